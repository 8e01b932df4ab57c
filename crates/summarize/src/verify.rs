//! Checks an LLM briefing against facts extracted deterministically from the
//! same history, and repairs it: critical facts it lost are appended
//! verbatim (within budget), and claims of completion that no successful
//! tool result supports are flagged.

use abridge_tokens::TokenizerKind;
use serde::{Deserialize, Serialize};

use crate::facts::Facts;
use crate::ident::mentions;
use crate::outcome::exit_code;
use crate::tasks::{Task, TaskList, status_claimed};

/// What verification found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// Facts the briefing lacked, appended under "Verbatim facts".
    pub appended_facts: Vec<String>,
    /// Facts it lacked that did not fit the budget.
    pub missing_facts: Vec<String>,
    /// Lines claiming completion without a successful result, flagged.
    pub unverified_claims: Vec<String>,
    /// Task-list items the briefing left out or gave another status,
    /// appended with the agent's status (`- [in_progress] Fix rounding`).
    #[serde(default)]
    pub restated_tasks: Vec<String>,
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

/// What a briefing is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The facts of the region it replaced.
    pub facts: &'a Facts,
    /// The task list to hold it to: the region's, unless what stays after
    /// the briefing writes a newer one (which the model reads there).
    pub tasks: Option<&'a TaskList>,
}

impl<'a> Evidence<'a> {
    /// The region's facts, its own task list included.
    pub fn of(facts: &'a Facts) -> Self {
        Evidence {
            facts,
            tasks: facts.todo.as_ref(),
        }
    }
}

/// The briefing with repairs appended, and what was repaired.
pub fn verify(
    briefing: &str,
    evidence: Evidence<'_>,
    budget: usize,
    kind: TokenizerKind,
) -> (String, Verification) {
    let facts = evidence.facts;
    let mut v = Verification::default();
    let critical = critical(facts);
    let missing: Vec<String> = critical
        .into_iter()
        .filter(|c| !mentions(briefing, c))
        .fold(Vec::new(), |mut acc, c| {
            if !acc.contains(&c) {
                acc.push(c);
            }
            acc
        });
    let claims = unverified(briefing, facts, evidence.tasks);
    let mut out = briefing.trim_end().to_owned();
    let tasks = misstated_tasks(briefing, evidence.tasks);
    if !tasks.is_empty() {
        // The agent's own list, whole: a partial list reads as the list.
        let mut section =
            "\n\n## Task list (as the agent last set it here, with its statuses)\n".to_owned();
        for t in tasks {
            section.push_str(&t.line());
            section.push('\n');
        }
        if kind.count(&out) + kind.count(&section) <= budget {
            out.push_str(section.trim_end());
            v.restated_tasks = tasks.iter().map(Task::line).collect();
        } else {
            v.missing_facts.extend(tasks.iter().map(Task::line));
        }
    }
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
            // After the task lines that did not fit, if any.
            v.missing_facts.extend(missing);
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

/// The facts a briefing must state verbatim: the latest error's first
/// line (and the next when the first is only an exit code), the files
/// edited or written, commands whose failure no later run fixed (the same
/// facts the offline sheet keeps under its errors), the ids created, the
/// URLs and the last 30 ids used.
fn critical(facts: &Facts) -> Vec<String> {
    let mut critical: Vec<String> = Vec::new();
    if let Some(e) = &facts.latest_error {
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
    critical.extend(
        facts
            .files
            .iter()
            .filter(|f| f.edited + f.written > 0)
            .map(|f| f.path.clone()),
    );
    critical.extend(
        facts
            .commands
            .iter()
            .filter(|c| c.failure.is_some() && !c.fixed)
            .map(|c| c.command.clone()),
    );
    critical.extend(facts.created_ids.iter().cloned());
    critical.extend(
        facts
            .used_ids
            .iter()
            .filter(|i| i.starts_with("http"))
            .cloned(),
    );
    critical.extend(facts.used_ids.iter().rev().take(30).rev().cloned());
    critical.dedup();
    critical
}

/// The task list when the briefing leaves an item out or
/// states it with another status than the agent's (done for open, or open
/// for done); empty when it states every item as the agent did.
fn misstated_tasks<'f>(briefing: &str, list: Option<&'f TaskList>) -> &'f [Task] {
    let Some(list) = list else {
        return &[];
    };
    let lower = briefing.to_lowercase();
    let stated = |t: &Task| {
        let text = t.text.to_lowercase();
        let lines: Vec<&str> = lower.lines().filter(|l| l.contains(&text)).collect();
        !lines.is_empty()
            && lines
                .iter()
                .any(|l| status_claimed(l).is_none_or(|done| done == t.done()))
    };
    if list.items.iter().all(stated) {
        &[]
    } else {
        &list.items
    }
}

/// Lines that claim something done which the results contradict: a command
/// whose latest run failed, or a task-list item not marked completed.
fn unverified(briefing: &str, facts: &Facts, tasks: Option<&TaskList>) -> Vec<String> {
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
    let open: Vec<String> = tasks
        .iter()
        .flat_map(|l| &l.items)
        .filter(|t| !t.done())
        .map(|t| t.text.to_lowercase())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::Task;

    /// A budget too small for the task list and for the facts' heading:
    /// both are reported missing, neither in place of the other.
    #[test]
    fn what_fits_nowhere_is_all_reported_missing() {
        let todo = TaskList {
            tool: "TodoWrite".into(),
            items: vec![Task {
                text: "Fix rounding in ledger totals".into(),
                status: "in_progress".into(),
                id: None,
            }],
            args: serde_json::Value::Null,
        };
        let facts = Facts {
            created_ids: vec!["INV-20931".into()],
            todo: Some(todo),
            ..Facts::default()
        };
        let briefing = "Work on the ledger went on.";
        let kind = TokenizerKind::O200kBase;
        let (out, v) = verify(briefing, Evidence::of(&facts), kind.count(briefing), kind);
        assert_eq!(out, briefing);
        assert_eq!(
            v.missing_facts,
            ["- [in_progress] Fix rounding in ledger totals", "INV-20931"]
        );
    }
}
