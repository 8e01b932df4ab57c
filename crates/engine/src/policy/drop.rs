//! `drop_iterations`: the hard cap. Whole old iterations (an assistant turn
//! with its results and what follows) are removed; each run of removed
//! iterations leaves one user message `[N earlier iterations omitted]`. A
//! placeholder right before the run is absorbed, so repeated compactions keep
//! one running count. Iterations holding a pinned message are kept whole.
//! With recall on, the placeholder names the removed messages by a handle
//! (an absorbed placeholder is among them, so earlier runs stay reachable).

use std::ops::Range;

use abridge_model::{Message, Role, iterations};

use crate::placeholder::{iterations as placeholder, parse_iterations};
use crate::recall::{Found, Original, keep};
use crate::slot::Slot;

pub(super) fn apply(
    messages: &mut Vec<Slot<'_>>,
    region: Range<usize>,
    mut found: Option<Found<'_>>,
) -> usize {
    let its: Vec<Range<usize>> = iterations(messages)
        .into_iter()
        .map(|it| it.range())
        .filter(|r| r.start >= region.start && r.end <= region.end)
        .collect();
    // Runs of droppable iterations, as message ranges.
    let mut runs: Vec<(Range<usize>, usize)> = Vec::new();
    for r in its {
        if messages[r.clone()].iter().any(|m| m.meta.pinned) {
            continue;
        }
        match runs.last_mut() {
            Some((span, n)) if span.end == r.start => {
                span.end = r.end;
                *n += 1;
            }
            _ => runs.push((r, 1)),
        }
    }
    let mut dropped = 0;
    for (span, n) in runs.into_iter().rev() {
        let mut start = span.start;
        let mut count = n;
        if start > 0
            && let Some(prev) = placeholder_count(&messages[start - 1])
        {
            start -= 1;
            count += prev;
        }
        let handle = keep(&mut found, || {
            Original::region(&messages[start..span.end], None, &Default::default())
        });
        let mut note = Message::text(Role::User, placeholder(count, handle.as_ref()));
        note.meta.compact_summary = true;
        messages.splice(start..span.end, std::iter::once(note.into()));
        dropped += n;
    }
    dropped
}

fn placeholder_count(m: &Message) -> Option<usize> {
    if m.role != Role::User || m.meta.pinned {
        return None;
    }
    match m.parts.as_slice() {
        [p] => p.as_text().and_then(parse_iterations),
        _ => None,
    }
}
