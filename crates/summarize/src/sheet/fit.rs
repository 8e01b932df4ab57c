//! Fitting a sheet to its budget: the oldest items of the least important
//! sections go first, then the verbatim error and last state are
//! shortened, then the kept minimums go too.

use abridge_model::text::clip;
use abridge_tokens::TokenizerKind;

use super::{Kind, Root, Section};

/// Makes the sheet fit (as shown under `root`): first the oldest items of
/// the least important sections beyond their kept minimum, then the
/// verbatim error and last state are shortened, then the minimums go too.
/// Returns what the fit counts of what it kept.
pub(super) fn fit(
    sections: &mut [Section],
    root: &Root,
    budget: usize,
    kind: TokenizerKind,
) -> usize {
    let cost = |s: &str| kind.count(s) + 2;
    let (mut costs, mut total) = first_trim(sections, root, budget, &cost);
    // Then the kept minimums, oldest items of the lowest-priority section
    // first; each section's are counted and taken out once at the end
    // (removing them one by one from the front cost time in the square of
    // their number).
    let mut trim = |sections: &mut [Section], total: &mut usize| {
        let mut dropped = vec![0usize; sections.len()];
        while *total > budget {
            let victim = sections
                .iter()
                .enumerate()
                .filter(|(i, s)| s.priority() < u8::MAX && s.items.len() > dropped[*i])
                .min_by_key(|(_, s)| s.priority())
                .map(|(i, _)| i);
            let Some(i) = victim else { break };
            *total -= costs[i][dropped[i]];
            dropped[i] += 1;
        }
        for ((section, cost), n) in sections.iter_mut().zip(costs.iter_mut()).zip(dropped) {
            section.items.drain(..n);
            section.omitted += n;
            cost.drain(..n);
        }
    };
    if total > budget {
        for s in sections
            .iter_mut()
            .filter(|s| matches!(s.kind, Kind::LatestError | Kind::Last))
        {
            for item in &mut s.items {
                let short = clip(&item.text, 200, 0);
                total -= cost(&item.text).saturating_sub(cost(&short));
                item.text = short;
            }
        }
    }
    trim(sections, &mut total);
    total
}

/// The first pass of [`fit`]: the oldest items beyond each section's kept
/// minimum go, lowest-priority section first, until the sheet fits. Only
/// what is kept is counted: the drop order is walked from its newest end,
/// items kept while they fit, and all that is older goes uncounted — the
/// same cut as dropping from the oldest end until the rest fits, since
/// every item costs something. A section's heading is counted with its
/// newest item: the last to go, and it goes with it. Returns the kept
/// items' costs by section and the sheet's total.
pub(super) fn first_trim(
    sections: &mut [Section],
    root: &Root,
    budget: usize,
    cost: &dyn Fn(&str) -> usize,
) -> (Vec<Vec<usize>>, usize) {
    let item_cost = |s: &Section, j: usize| {
        let heading = match j + 1 == s.items.len() {
            true => cost(s.kind.title()) + 2,
            false => 0,
        };
        cost(&root.show(s.kind, &s.items[j].text)) + heading
    };
    // Items before `firsts[i]` may go; those from it on stay.
    let firsts: Vec<usize> = sections
        .iter()
        .map(|s| match s.kind.priority_and_keep() {
            (u8::MAX, _) => 0,
            (_, keep) => s.items.len().saturating_sub(keep),
        })
        .collect();
    let mut costs: Vec<Vec<usize>> = sections.iter().map(|s| vec![0; s.items.len()]).collect();
    let mut total = 0;
    for ((s, first), costs) in sections.iter().zip(&firsts).zip(costs.iter_mut()) {
        for (j, c) in costs.iter_mut().enumerate().skip(*first) {
            *c = item_cost(s, j);
            total += *c;
        }
    }
    // The drop order: by priority, then by place (stable).
    let mut order: Vec<usize> = (0..sections.len()).filter(|&i| firsts[i] > 0).collect();
    order.sort_by_key(|&i| sections[i].priority());
    let mut dropped = firsts;
    'walk: for &i in order.iter().rev() {
        for j in (0..dropped[i]).rev() {
            let c = item_cost(&sections[i], j);
            if total + c > budget {
                break 'walk;
            }
            costs[i][j] = c;
            total += c;
            dropped[i] = j;
        }
    }
    for ((section, cost), n) in sections.iter_mut().zip(costs.iter_mut()).zip(dropped) {
        section.items.drain(..n);
        section.omitted += n;
        cost.drain(..n);
    }
    (costs, total)
}
