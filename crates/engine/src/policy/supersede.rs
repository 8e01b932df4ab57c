//! `supersede_reads`: an old read of a file that the agent read again
//! later becomes a placeholder saying so, with its handle. Agents re-read
//! what they edit, and the older copies of a file are a coding session's
//! largest redundant content; the newest copy stays where it is (in the
//! old region, the kept tail or the working set).
//!
//! A later read supersedes an earlier one when it read the whole file (no
//! offset, limit or range), or exactly what the earlier one read. Failed
//! reads neither supersede nor are superseded.

use std::collections::HashMap;
use std::ops::Range;

use abridge_model::Part;
use abridge_summarize::outcome::{CallOutcome, outcome};
use abridge_summarize::tools::{ToolKind, classify};
use serde_json::Value;

use crate::config::PolicyConfig;
use crate::placeholder::{is_result_placeholder, superseded};
use crate::recall::{Found, Original, answered_calls, keep};
use crate::slot::Slot;

/// Arguments that make a read partial.
const RANGE_KEYS: [&str; 8] = [
    "offset",
    "limit",
    "view_range",
    "start_line",
    "end_line",
    "line_start",
    "line_end",
    "range",
];

pub(super) fn apply(
    messages: &mut [Slot<'_>],
    region: Range<usize>,
    cfg: &PolicyConfig,
    mut found: Option<Found<'_>>,
) -> usize {
    let calls = answered_calls(messages);
    // Every successful read, in order: its place, path and arguments.
    let mut reads: Vec<((usize, usize), String, Value)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for (j, p) in m.parts.iter().enumerate() {
            let (Part::ToolResult(r), Some(call)) = (p, calls.get(&(i, j))) else {
                continue;
            };
            let args = call.arguments.fields();
            let ToolKind::Read(path) = classify(&call.name, &args) else {
                continue;
            };
            let text = r.text();
            if is_result_placeholder(&text)
                || outcome(r, &text, &cfg.error_prefixes) != CallOutcome::Ok
            {
                continue;
            }
            let path = path.to_owned();
            reads.push(((i, j), path, args));
        }
    }
    // For each read, whether a later one supersedes it: walked from the
    // newest, remembering per path whether a whole read and which partial
    // reads came after.
    let mut later: HashMap<&str, (bool, Vec<&Value>)> = HashMap::new();
    let mut gone: Vec<(usize, usize, String)> = Vec::new();
    for ((i, j), path, args) in reads.iter().rev() {
        let seen = later.entry(path.as_str()).or_default();
        let covered = seen.0 || seen.1.contains(&args);
        if covered
            && region.contains(i)
            && !messages[*i].meta.pinned
            && let Part::ToolResult(r) = &messages[*i].parts[*j]
        {
            let call = calls.get(&(*i, *j)).copied();
            let handle = keep(&mut found, || Original::tool_result(r, call));
            gone.push((*i, *j, superseded(path, handle.as_ref())));
        }
        match RANGE_KEYS.iter().any(|k| args.get(*k).is_some()) {
            false => seen.0 = true,
            true => seen.1.push(args),
        }
    }
    let changed = gone.len();
    for (i, j, placeholder) in gone {
        let Part::ToolResult(r) = &mut messages[i].make_mut().parts[j] else {
            continue;
        };
        r.replace_with_text(placeholder);
    }
    changed
}
