//! Checks an LLM briefing against facts extracted deterministically from the
//! same history, and repairs it: critical facts it lost are appended
//! verbatim (within budget), and claims of completion that no successful
//! tool result supports are flagged.

use abridge_tokens::TokenizerKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::facts::Facts;
use crate::ident::mentions;
use crate::outcome::exit_code;

/// What verification found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// Facts the briefing lacked, appended under "Verbatim facts".
    pub appended_facts: Vec<String>,
    /// Facts it lacked that did not fit the budget.
    pub missing_facts: Vec<String>,
    /// Lines claiming completion without a successful result, flagged.
    pub unverified_claims: Vec<String>,
}

const DONE_WORDS: [&str; 10] = [
    "completed",
    "complete",
    "done",
    "finished",
    "fixed",
    "passed",
    "passes",
    "succeeded",
    "resolved",
    "✓",
];

/// The briefing with repairs appended, and what was repaired.
pub fn verify(
    briefing: &str,
    facts: &Facts,
    budget: usize,
    kind: TokenizerKind,
) -> (String, Verification) {
    let mut v = Verification::default();
    let mut critical: Vec<String> = Vec::new();
    if let Some(e) = &facts.latest_error {
        // Its first line, and the next one when the first is only an exit code.
        let mut lines = e.lines().map(str::trim).filter(|l| !l.is_empty());
        if let Some(first) = lines.next() {
            critical.push(first.to_owned());
            if exit_code(first).is_some()
                && let Some(next) = lines.next()
            {
                critical.push(next.to_owned());
            }
        }
    }
    critical.extend(todo_items(facts).into_iter().map(|(item, _)| item));
    critical.extend(
        facts
            .files
            .iter()
            .filter(|f| f.edited + f.written > 0)
            .map(|f| f.path.clone()),
    );
    // Commands whose failure no later run fixed: the same facts the
    // offline sheet keeps under its errors.
    critical.extend(
        facts
            .commands
            .iter()
            .filter(|c| c.failure.is_some() && !c.fixed)
            .map(|c| c.command.clone()),
    );
    critical.extend(
        facts
            .used_ids
            .iter()
            .filter(|i| i.starts_with("http"))
            .cloned(),
    );
    critical.extend(facts.used_ids.iter().rev().take(30).rev().cloned());
    critical.dedup();
    let missing: Vec<String> = critical
        .into_iter()
        .filter(|c| !mentions(briefing, c))
        .fold(Vec::new(), |mut acc, c| {
            if !acc.contains(&c) {
                acc.push(c);
            }
            acc
        });
    let claims = unverified(briefing, facts);
    let mut out = briefing.trim_end().to_owned();
    let used = kind.count(&out);
    if !missing.is_empty() {
        let heading = "\n\n## Verbatim facts (checked against the history)\n";
        if used + kind.count(heading) < budget {
            let mut section = heading.to_owned();
            for m in &missing {
                let line = format!("- `{m}`\n");
                let cost = kind.count(&line);
                if used + kind.count(&section) + cost <= budget {
                    section.push_str(&line);
                    v.appended_facts.push(m.clone());
                } else {
                    v.missing_facts.push(m.clone());
                }
            }
            if !v.appended_facts.is_empty() {
                out.push_str(section.trim_end());
            }
        } else {
            v.missing_facts = missing;
        }
    }
    if !claims.is_empty() {
        out.push_str("\n\n## Unverified claims\n");
        for c in &claims {
            out.push_str(&format!("- \"{c}\": no successful tool result in the history shows this; treat it as IN-PROGRESS.\n"));
        }
        out = out.trim_end().to_owned();
    }
    v.unverified_claims = claims;
    (out, v)
}

/// Task-list items and whether the agent's latest list marks them completed.
fn todo_items(facts: &Facts) -> Vec<(String, bool)> {
    let Some((_, args)) = &facts.todo else {
        return Vec::new();
    };
    let list = ["todos", "items", "tasks", "plan"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_array));
    list.into_iter()
        .flatten()
        .filter_map(|t| {
            let text = ["content", "step", "title", "task"]
                .iter()
                .find_map(|k| t.get(*k).and_then(Value::as_str))?;
            let done = t.get("status").and_then(Value::as_str) == Some("completed");
            Some((text.to_owned(), done))
        })
        .collect()
}

/// Lines that claim something done which the results contradict: a command
/// whose latest run failed, or a task-list item not marked completed.
fn unverified(briefing: &str, facts: &Facts) -> Vec<String> {
    let failed: Vec<&str> = facts
        .command_runs
        .iter()
        .enumerate()
        .filter(|(i, (cmd, ok))| {
            !ok && !facts.command_runs[i + 1..]
                .iter()
                .any(|(c, ok)| c == cmd && *ok)
        })
        .map(|(_, (cmd, _))| cmd.as_str())
        .collect();
    let open: Vec<String> = todo_items(facts)
        .into_iter()
        .filter(|(_, done)| !done)
        .map(|(t, _)| t.to_lowercase())
        .collect();
    briefing
        .lines()
        .map(str::trim)
        .filter(|line| {
            let lower = line.to_lowercase();
            DONE_WORDS.iter().any(|w| lower.contains(w))
                && !lower.contains("not ")
                && (failed
                    .iter()
                    .any(|c| line.contains(c) || lower.contains(&key_words(c)))
                    || open.iter().any(|t| lower.contains(t.as_str())))
        })
        .map(str::to_owned)
        .collect()
}

/// The first two words of a command (`cargo test`), for loose matching.
fn key_words(cmd: &str) -> String {
    cmd.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}
