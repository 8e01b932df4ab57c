//! `clip_tool_results`: old tool results become a placeholder. A failed
//! result keeps its first line, so the agent still knows the step failed.
//! Results of tools named in `keep_results_of`, and results shorter than
//! `min_result_chars`, are left alone.

use std::collections::HashMap;
use std::ops::Range;

use abridge_model::text::first_line;
use abridge_model::{ContentForm, Message, Part, ToolResult};
use abridge_summarize::{CallOutcome, outcome};

use crate::config::PolicyConfig;
use crate::placeholder::{TOOL_RESULT, failed_result, is_result_placeholder};

pub(super) fn apply(messages: &mut [Message], region: Range<usize>, cfg: &PolicyConfig) -> usize {
    let names: HashMap<String, String> = messages
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect();
    let mut changed = 0;
    for m in &mut messages[region] {
        if m.meta.pinned {
            continue;
        }
        for p in &mut m.parts {
            let Part::ToolResult(r) = p else { continue };
            let keep = names
                .get(&r.call_id)
                .is_some_and(|n| cfg.keep_results_of.iter().any(|k| k == n));
            if keep || !worth_clipping(r, cfg) {
                continue;
            }
            let text = r.text();
            let placeholder = if is_failure(r, &text, cfg) {
                failed_result(first_line(&text))
            } else {
                TOOL_RESULT.to_owned()
            };
            r.parts = vec![Part::text(placeholder)];
            if r.form == ContentForm::Absent || r.form == ContentForm::Null {
                r.form = ContentForm::Text;
            }
            changed += 1;
        }
    }
    changed
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
