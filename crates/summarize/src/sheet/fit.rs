//! Fitting a sheet to its budget: the oldest items of the least important
//! sections go first, then the verbatim error and last state are
//! shortened, then the kept minimums go too, and last what always stays is
//! cut to what is left.

use abridge_model::text::clip;
use abridge_tokens::TokenizerKind;

use super::{Kind, Root, Section, SheetItem};
use crate::facts::LAST_NAMES;
use crate::ident::clip_keeping_names;

/// Makes the sheet fit (as shown under `root`): first the oldest items of
/// the least important sections beyond their kept minimum, then the
/// verbatim error and last state are shortened, then the minimums go too,
/// then the error and last state are cut to the budget if still over.
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
        for item in verbatim_items(sections) {
            let short = clip(&item.text, SHORT_CHARS, 0);
            total -= cost(&item.text).saturating_sub(cost(&short));
            item.text = short;
        }
    }
    trim(sections, &mut total);
    // What always stays is over the budget on its own: it is cut to the
    // room left (the error first, then the last words), the names of what
    // is cut listed in its place, rather than the briefing fail — which
    // would lose the whole region.
    for item in verbatim_items(sections) {
        let Some(over) = total.checked_sub(budget).filter(|&o| o > 0) else {
            break;
        };
        let before = cost(&item.text);
        let short = shorten(&item.text, before.saturating_sub(over), &cost);
        total -= before - cost(&short);
        item.text = short;
    }
    for s in sections
        .iter_mut()
        .filter(|s| matches!(s.kind, Kind::LatestError | Kind::Last))
    {
        let before = s.items.len();
        s.items.retain(|i| !i.text.is_empty());
        s.omitted += before - s.items.len();
    }
    total
}

/// Characters the verbatim error and last state are first shortened to.
const SHORT_CHARS: usize = 200;

/// Characters of a shortened item's beginning kept before the names of
/// what is cut go.
const HEAD_CHARS: usize = 40;

/// The items of the verbatim error, then of the last state.
fn verbatim_items(sections: &mut [Section]) -> impl Iterator<Item = &mut SheetItem> {
    let mut found: Vec<&mut Section> = sections
        .iter_mut()
        .filter(|s| matches!(s.kind, Kind::LatestError | Kind::Last))
        .collect();
    found.sort_by_key(|s| s.kind != Kind::LatestError);
    found.into_iter().flat_map(|s| s.items.iter_mut())
}

/// `text` within `allowed` tokens: its beginning, with names of what is
/// cut listed after it; empty when not even a few characters fit.
fn shorten(text: &str, allowed: usize, cost: &dyn Fn(&str) -> usize) -> String {
    let whole = cost(text);
    if whole <= allowed {
        return text.to_owned();
    }
    // Names take at most about half the room (a name and its quotes are
    // some four tokens), the beginning the rest.
    let mut names = LAST_NAMES.min(allowed / 8);
    let mut chars = text.len() * allowed / whole.max(1);
    loop {
        let short = clip_keeping_names(text, chars, 0, names);
        if cost(&short) <= allowed {
            return short;
        }
        // The beginning shrinks to a few words, then the names go, then
        // the words.
        match (chars, names) {
            (0, 0) => return String::new(),
            (c, n) if c > HEAD_CHARS || n == 0 => chars = (c * 3 / 4).min(c - 1),
            _ => names -= 1,
        }
    }
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
