//! `collapse_feedback`: old feedback messages (validation rejections, step
//! errors, repetition warnings — recognised by configurable markers) become
//! one line per run, such as
//! `[3 earlier feedback messages clipped: 2 validation rejections, 1 step error]`.
//! The most recent feedback of each kind stays in full.
//!
//! A run is a sequence of feedback items separated only by assistant turns
//! and tool results. The run's last item is replaced by the placeholder; the
//! others are removed (a user message left empty is removed whole).

use std::ops::Range;

use abridge_model::{Part, Role};

use crate::config::PolicyConfig;
use crate::placeholder::{feedback, is_feedback_placeholder, parse_feedback};
use crate::slot::Slot;

/// A feedback text part: message index, part index, kind index (`None` for
/// an earlier placeholder, whose counts are absorbed).
type Item = (usize, usize, Option<usize>);

pub(super) fn apply(
    messages: &mut Vec<Slot<'_>>,
    region: Range<usize>,
    cfg: &PolicyConfig,
) -> usize {
    if cfg.feedback.is_empty() {
        return 0;
    }
    let kind_of = |text: &str| {
        if is_feedback_placeholder(text) {
            return None;
        }
        cfg.feedback
            .iter()
            .position(|k| k.markers.iter().any(|m| text.contains(m.as_str())))
    };
    // The newest item of each kind, anywhere, stays in full.
    let mut newest: Vec<Option<(usize, usize)>> = vec![None; cfg.feedback.len()];
    for (i, m) in messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
    {
        for (j, p) in m.parts.iter().enumerate() {
            if let Some(k) = p.as_text().and_then(kind_of) {
                newest[k] = Some((i, j));
            }
        }
    }
    let mut runs: Vec<Vec<Item>> = Vec::new();
    let mut run: Vec<Item> = Vec::new();
    for i in region {
        let m = &messages[i];
        match m.role {
            Role::Assistant | Role::Tool => continue,
            Role::User if !m.meta.pinned => {}
            _ => {
                runs.extend((!run.is_empty()).then(|| std::mem::take(&mut run)));
                continue;
            }
        }
        for (j, p) in m.parts.iter().enumerate() {
            match p {
                Part::ToolResult(_) => {}
                Part::Text(t) if is_feedback_placeholder(&t.text) => run.push((i, j, None)),
                Part::Text(t) => match kind_of(&t.text) {
                    Some(k) if newest[k] != Some((i, j)) => run.push((i, j, Some(k))),
                    _ => runs.extend((!run.is_empty()).then(|| std::mem::take(&mut run))),
                },
                _ => runs.extend((!run.is_empty()).then(|| std::mem::take(&mut run))),
            }
        }
    }
    runs.extend((!run.is_empty()).then_some(run));

    // A lone placeholder is already collapsed.
    runs.retain(|r| r.iter().any(|(_, _, k)| k.is_some()));
    let mut changed = 0;
    // Rewrite from the back so earlier indices stay valid.
    for run in runs.iter().rev() {
        let mut counts: Vec<(String, usize)> =
            cfg.feedback.iter().map(|k| (k.name.clone(), 0)).collect();
        for &(i, j, k) in run {
            match k {
                Some(k) => counts[k].1 += 1,
                None => {
                    let earlier = messages[i].parts[j].as_text().and_then(parse_feedback);
                    for (name, n) in earlier.into_iter().flatten() {
                        match counts.iter_mut().find(|(k, _)| *k == name) {
                            Some(c) => c.1 += n,
                            None => counts.push((name, n)),
                        }
                    }
                }
            }
        }
        let counts: Vec<(&str, usize)> = counts.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        let text = feedback(&counts);
        let Some(&(last_i, last_j, _)) = run.last() else {
            continue;
        };
        if let Part::Text(t) = &mut messages[last_i].make_mut().parts[last_j] {
            t.text = text;
        }
        for &(i, j, _) in run.iter().rev().skip(1) {
            messages[i].make_mut().parts.remove(j);
            if messages[i].parts.is_empty() {
                messages.remove(i);
            }
        }
        changed += run.iter().filter(|(_, _, k)| k.is_some()).count();
    }
    changed
}
