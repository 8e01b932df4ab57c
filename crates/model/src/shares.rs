//! Work split across cores: contiguous shares of a list with about equal
//! weight each (text to count, messages to decode), one per thread, so that
//! the results put back in share order are in the list's order.

use std::ops::Range;

/// Threads to use: the machine's cores, at most `max`.
pub fn threads(max: usize) -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(max))
}

/// `items` cut into at most `n` contiguous ranges of about equal total
/// `weight` (the last may be lighter); none for an empty list.
pub fn shares<T>(items: &[T], weight: impl Fn(&T) -> usize, n: usize) -> Vec<Range<usize>> {
    let share = items
        .iter()
        .map(&weight)
        .sum::<usize>()
        .div_ceil(n.max(1))
        .max(1);
    let mut out = Vec::with_capacity(n);
    let (mut start, mut acc) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        acc += weight(item);
        if acc >= share {
            out.push(start..i + 1);
            (start, acc) = (i + 1, 0);
        }
    }
    if start < items.len() {
        out.push(start..items.len());
    }
    out
}

/// `f` on each of the `n` shares of `items` ([`shares`] by `weight`), each
/// share on a thread of its own when there are several (on the calling
/// thread when there is one), with the index of its first item; what each
/// returned, or its panic, in share order.
pub fn on_shares<'a, T: Sync, R: Send>(
    items: &'a [T],
    weight: impl Fn(&T) -> usize,
    n: usize,
    f: impl Fn(&'a [T], usize) -> R + Sync,
) -> Vec<std::thread::Result<R>> {
    let shares = shares(items, weight, n);
    if let [one] = shares.as_slice() {
        return vec![Ok(f(&items[one.clone()], one.start))];
    }
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|r| scope.spawn(move || f(&items[r.clone()], r.start)))
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_run_on_threads_come_back_in_order() {
        let items: Vec<usize> = (0..1000).collect();
        let sums = |n| -> Vec<(usize, usize)> {
            on_shares(&items, |_| 1, n, |s, at| (at, s.iter().sum()))
                .into_iter()
                .map(|r| r.unwrap())
                .collect()
        };
        assert_eq!(sums(1), [(0, 499_500)]);
        let four = sums(4);
        assert_eq!(four.len(), 4);
        assert_eq!(four.iter().map(|(_, s)| s).sum::<usize>(), 499_500);
        assert!(four.windows(2).all(|w| w[0].0 < w[1].0));
        // A share that panics is said, the others still answer.
        let out = on_shares(&items, |_| 1, 2, |_, at| assert_eq!(at, 0));
        assert!(out[0].is_ok() && out[1].is_err());
        assert!(on_shares(&[0u8; 0], |_| 1, 2, |_, _| ()).is_empty());
    }

    #[test]
    fn shares_cover_the_list_in_order_with_about_equal_weight() {
        let items = [5, 1, 1, 1, 1, 1, 4, 2];
        let s = shares(&items, |w| *w, 2);
        assert_eq!(s, [0..4, 4..8]);
        assert_eq!(shares(&items, |_| 1, 3), [0..3, 3..6, 6..8]);
        assert_eq!(shares(&[7], |w| *w, 4), vec![Range { start: 0, end: 1 }]);
        assert!(shares::<usize>(&[], |w| *w, 2).is_empty());
        // Weightless items end up in one share, not one each.
        assert_eq!(
            shares(&[0, 0, 0], |w| *w, 2),
            vec![Range { start: 0, end: 3 }]
        );
    }
}
