//! `clip_tool_results`: old tool results become a placeholder that names
//! the original by its handle (an excerpt an earlier compaction gave back
//! goes back to the placeholder of the original it named). A failed result keeps its first line, so
//! the agent still knows the step failed. Results of tools named in
//! `keep_results_of` and of the recall tool (what the model asked back is
//! not taken away again), and results shorter than `min_result_chars`, are
//! left alone.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::ops::Range;

use abridge_model::text::first_line;
use abridge_model::{Message, Part, ToolResult};
use abridge_summarize::outcome::{CallOutcome, outcome};

use crate::config::PolicyConfig;
use crate::placeholder::{excerpt_handle, failed_result, is_result_placeholder, result};
use crate::recall::{Found, Original, answered_calls, keep};
use crate::slot::Slot;

pub(super) fn apply(
    messages: &mut [Slot<'_>],
    region: Range<usize>,
    cfg: &PolicyConfig,
    mut found: Option<Found<'_>>,
) -> usize {
    let calls = answered_calls(messages);
    let recall_tool = found.as_ref().and_then(|f| f.tool);
    // What each result was before this compaction touched it: the input's
    // result with the same id and the same place among that id's results,
    // counted from the newest (what a compaction removes is the oldest).
    let given: HashMap<&str, Vec<&ToolResult>> = found
        .as_ref()
        .map(|f| newest_first(f.input))
        .unwrap_or_default();
    let here = match found {
        Some(_) => newest_first(messages),
        None => HashMap::new(),
    };
    // Decided over the whole history (calls come before their results),
    // then written.
    let mut clips: Vec<(usize, usize, String)> = Vec::new();
    for i in region {
        let m = &messages[i];
        if m.meta.pinned {
            continue;
        }
        for (j, p) in m.parts.iter().enumerate() {
            let Part::ToolResult(r) = p else { continue };
            let call = calls.get(&(i, j)).copied();
            let keep_it = call.is_some_and(|c| {
                cfg.keep_results_of.contains(&c.name) || Some(c.name.as_str()) == recall_tool
            });
            if keep_it {
                continue;
            }
            // An excerpt an earlier compaction gave back goes back to its
            // placeholder, its original the one it named.
            if let [Part::Text(t)] = r.parts.as_slice()
                && let Some(h) = excerpt_handle(&t.text)
            {
                clips.push((i, j, result(Some(&h))));
                continue;
            }
            if !worth_clipping(r, cfg) {
                continue;
            }
            let rank = here
                .get(r.call_id.as_str())
                .and_then(|same| same.iter().position(|x| std::ptr::eq(*x, &**r)));
            let before = rank
                .and_then(|k| given.get(r.call_id.as_str())?.get(k).copied())
                .unwrap_or(r);
            let handle = keep(&mut found, || Original::tool_result(before, call));
            let text = r.text();
            let placeholder = if is_failure(r, &text, cfg) {
                failed_result(first_line(&text), handle.as_ref())
            } else {
                result(handle.as_ref())
            };
            clips.push((i, j, placeholder));
        }
    }
    let changed = clips.len();
    for (i, j, placeholder) in clips {
        let Part::ToolResult(r) = &mut messages[i].make_mut().parts[j] else {
            continue;
        };
        r.replace_with_text(placeholder);
    }
    changed
}

/// The results of `messages` by call id, newest first.
fn newest_first<M: Borrow<Message>>(messages: &[M]) -> HashMap<&str, Vec<&ToolResult>> {
    let mut out: HashMap<&str, Vec<&ToolResult>> = HashMap::new();
    let parts = messages
        .iter()
        .rev()
        .flat_map(|m| m.borrow().parts.iter().rev());
    for r in parts.filter_map(|p| match p {
        Part::ToolResult(r) => Some(r),
        _ => None,
    }) {
        out.entry(r.call_id.as_str()).or_default().push(r);
    }
    out
}

fn worth_clipping(r: &ToolResult, cfg: &PolicyConfig) -> bool {
    if let [Part::Text(t)] = r.parts.as_slice()
        && is_result_placeholder(&t.text)
    {
        return false;
    }
    let chars: usize = r.parts.iter().filter_map(Part::as_text).map(str::len).sum();
    let has_other = r.parts.iter().any(|p| p.as_text().is_none());
    has_other || chars >= cfg.min_result_chars
}

/// A result failed when its outcome (API flag, error word, exit code) says so.
fn is_failure(r: &ToolResult, text: &str, cfg: &PolicyConfig) -> bool {
    matches!(
        outcome(r, text, &cfg.error_prefixes),
        CallOutcome::Failed(_)
    )
}
