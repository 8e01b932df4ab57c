//! Byte-pair merging of one piece, counting the tokens it becomes.
//!
//! tiktoken's rule: start from single bytes and repeatedly merge the
//! adjacent pair whose concatenation has the lowest rank (the leftmost of
//! equal ranks) until no pair is a token. Short pieces (nearly all) scan
//! their pairs as tiktoken does; long ones keep their pairs in a heap so a
//! piece of a megabyte (one long word, a run of symbols) costs
//! `n log n`, not `n²`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Pieces up to this many bytes are merged by scanning.
const SCAN_MAX: usize = 128;

/// No token: the rank of a pair that is not one.
const NONE: u32 = u32::MAX;

/// Tokens `piece` becomes, given the rank of a byte string (`None`: not a
/// token). Every single byte must be a token.
pub(crate) fn count(piece: &[u8], rank: impl Fn(&[u8]) -> Option<u32>) -> usize {
    match piece.len() {
        0 => 0,
        1 => 1,
        n if n <= SCAN_MAX => by_scan(piece, &rank).len() - 1,
        _ => by_heap(piece, &rank).iter().filter(|&&a| a).count(),
    }
}

/// tiktoken's `_byte_pair_merge`: parts as start offsets, each with the
/// rank of itself joined with the next part; the last is the end.
fn by_scan(piece: &[u8], rank: &impl Fn(&[u8]) -> Option<u32>) -> Vec<(usize, u32)> {
    let n = piece.len();
    let mut parts: Vec<(usize, u32)> = Vec::with_capacity(n + 1);
    for i in 0..n - 1 {
        parts.push((i, rank(&piece[i..i + 2]).unwrap_or(NONE)));
    }
    parts.push((n - 1, NONE));
    parts.push((n, NONE));
    // The rank of parts `i` and `i + 1` joined.
    let joined = |parts: &[(usize, u32)], i: usize| match parts.get(i + 3) {
        Some(&(end, _)) => rank(&piece[parts[i].0..end]).unwrap_or(NONE),
        None => NONE,
    };
    loop {
        let mut best = (NONE, 0);
        for (i, &(_, r)) in parts[..parts.len() - 1].iter().enumerate() {
            if r < best.0 {
                best = (r, i);
            }
        }
        let (r, i) = best;
        if r == NONE {
            break;
        }
        parts[i].1 = joined(&parts, i);
        if i > 0 {
            parts[i - 1].1 = joined(&parts, i - 1);
        }
        parts.remove(i + 1);
    }
    parts
}

/// The same merges, driven by a heap of candidate pairs keyed by rank and
/// then start (so ties go leftmost, as in the scan), over a linked list of
/// parts. A heap entry is one `u64` (rank above, start below); each part
/// remembers the rank and end of the pair it last pushed, so an entry whose
/// pair has changed since is recognised and skipped. Returns, per byte,
/// whether a part starts there.
fn by_heap(piece: &[u8], rank: &impl Fn(&[u8]) -> Option<u32>) -> Vec<bool> {
    let n = piece.len();
    debug_assert!(u32::try_from(n).is_ok(), "a piece is at most a body");
    let pos = |i: usize| i as u32;
    // Part starting at byte i: its end, and the start of the part before.
    let mut end: Vec<u32> = (1..=pos(n)).collect();
    let mut prev: Vec<u32> = (0..pos(n)).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    // The pair each part last pushed: its rank and end.
    let mut pushed: Vec<(u32, u32)> = vec![(NONE, 0); n];
    let mut heap: BinaryHeap<Reverse<u64>> = BinaryHeap::with_capacity(n);
    let push = |heap: &mut BinaryHeap<Reverse<u64>>,
                pushed: &mut [(u32, u32)],
                left: u32,
                right_end: u32| {
        let r = rank(&piece[left as usize..right_end as usize]).unwrap_or(NONE);
        pushed[left as usize] = (r, right_end);
        if r != NONE {
            heap.push(Reverse((u64::from(r) << 32) | u64::from(left)));
        }
    };
    for i in 0..n - 1 {
        push(&mut heap, &mut pushed, pos(i), pos(i + 2));
    }
    while let Some(Reverse(key)) = heap.pop() {
        let (r, left) = ((key >> 32) as u32, key as u32);
        let l = left as usize;
        let right = end[l];
        if !alive[l] || right as usize >= n {
            continue;
        }
        let joined_end = end[right as usize];
        // Stale: the pair starting at `left` is no longer this one.
        if pushed[l] != (r, joined_end) {
            continue;
        }
        alive[right as usize] = false;
        end[l] = joined_end;
        if (joined_end as usize) < n {
            prev[joined_end as usize] = left;
            push(&mut heap, &mut pushed, left, end[joined_end as usize]);
        } else {
            pushed[l] = (NONE, 0);
        }
        let before = prev[l];
        if before != u32::MAX {
            push(&mut heap, &mut pushed, before, joined_end);
        }
    }
    alive
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A small vocabulary: every byte, and some multi-byte strings ranked
    /// so that ties and overlaps occur.
    fn vocab(extra: &[&[u8]]) -> HashMap<Vec<u8>, u32> {
        let mut v: HashMap<Vec<u8>, u32> = (0..=255u8).map(|b| (vec![b], u32::from(b))).collect();
        for (i, t) in extra.iter().enumerate() {
            v.entry(t.to_vec()).or_insert(256 + i as u32);
        }
        v
    }

    const EXTRA: &[&[u8]] = &[
        b"ab", b"bc", b"aa", b"abc", b"aaa", b"ca", b"bca", b"aaaa", b"cab", b"abab", b"bb",
        b"bbb", b"abcab",
    ];

    proptest! {
        #[test]
        fn heap_merges_as_the_scan_does(piece in "[abc]{1,300}") {
            let v = vocab(EXTRA);
            let rank = |b: &[u8]| v.get(b).copied();
            let bytes = piece.as_bytes();
            let scanned: Vec<usize> = by_scan(bytes, &rank).iter().map(|p| p.0).collect();
            let heaped: Vec<usize> = by_heap(bytes, &rank)
                .iter()
                .enumerate()
                .filter(|(_, a)| **a)
                .map(|(i, _)| i)
                .chain([bytes.len()])
                .collect();
            prop_assert_eq!(heaped, scanned);
        }
    }

    #[test]
    fn a_long_run_merges_in_n_log_n() {
        let v = vocab(EXTRA);
        let rank = |b: &[u8]| v.get(b).copied();
        let piece = vec![b'a'; 1 << 20];
        // Pairs of "aa" then "aaaa": a quarter as many tokens.
        assert_eq!(count(&piece, rank), 1 << 18);
    }
}
