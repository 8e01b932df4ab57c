//! `clip_tool_results`: old tool results become a placeholder. A failed
//! result keeps its first line, so the agent still knows the step failed.
//! Results of tools named in `keep_results_of`, and results shorter than
//! `min_result_chars`, are left alone.

use std::collections::HashMap;
use std::ops::Range;

use abridge_model::{ContentForm, Message, Part, ToolResult};

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

fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// A result failed when the API flag says so, its first line starts with an
/// error word, or it reports a non-zero exit code.
pub(crate) fn is_failure(r: &ToolResult, text: &str, cfg: &PolicyConfig) -> bool {
    if r.is_error == Some(true) {
        return true;
    }
    let line = first_line(text).trim_start().to_lowercase();
    let line = line.trim_start_matches(['[', '(', '<', '*', '#', ' ']);
    if cfg
        .error_prefixes
        .iter()
        .any(|p| line.starts_with(&p.to_lowercase()))
    {
        return true;
    }
    nonzero_exit(line)
}

/// `exit status 101`, `exit code: 2`, `returncode>1<` with a non-zero number.
fn nonzero_exit(line: &str) -> bool {
    for key in ["exit status", "exit code", "returncode>", "exit_code"] {
        if let Some(pos) = line.find(key) {
            let rest = line[pos + key.len()..].trim_start_matches([' ', ':', '=']);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse::<i64>() {
                return n != 0;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(text: &str, is_error: Option<bool>) -> ToolResult {
        ToolResult {
            call_id: "c".into(),
            parts: vec![Part::text(text)],
            form: ContentForm::Text,
            is_error,
            extra: Default::default(),
        }
    }

    #[test]
    fn recognises_failures() {
        let cfg = PolicyConfig::default();
        let f = |t: &str, e| is_failure(&result(t, e), t, &cfg);
        assert!(f("ok", Some(true)));
        assert!(f("Error: element e15 is not clickable", None));
        assert!(f("\n  Traceback (most recent call last):", None));
        assert!(f("exit status 101\nerror[E0599]", None));
        assert!(f("<returncode>1</returncode>\n<output>", None));
        assert!(!f("<returncode>0</returncode>\n<output>", None));
        assert!(!f("exit status 0", None));
        assert!(!f("All 14 tests passed", None));
    }
}
