//! Facts extracted deterministically from the messages a briefing replaces.

use std::collections::HashMap;

use abridge_model::text::{clip, first_line};
use abridge_model::{Message, Part, Role};
use serde_json::Value;

use crate::briefing::unwrap;
use crate::ident::identifiers;
use crate::outcome::{Outcome, outcome};
use crate::tools::{ToolKind, classify, first_string};

/// What the extractor recognises.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FactConfig {
    /// Tools whose latest call holds the agent's task list.
    pub todo_tools: Vec<String>,
    /// Result first-line prefixes that mean failure.
    pub error_prefixes: Vec<String>,
    /// Tag around briefings: an earlier briefing is not a user message.
    pub wrapper: String,
}

impl Default for FactConfig {
    fn default() -> Self {
        FactConfig {
            todo_tools: [
                "TodoWrite",
                "todo_write",
                "write_todos",
                "reportProgress",
                "update_plan",
            ]
            .map(str::to_owned)
            .to_vec(),
            error_prefixes: crate::outcome::DEFAULT_ERROR_PREFIXES
                .map(str::to_owned)
                .to_vec(),
            wrapper: crate::briefing::DEFAULT_WRAPPER.to_owned(),
        }
    }
}

/// What happened to one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileFact {
    /// Path as the agent wrote it.
    pub path: String,
    /// Successful reads.
    pub read: usize,
    /// Successful writes (creations or overwrites).
    pub written: usize,
    /// Successful edits.
    pub edited: usize,
    /// Operations whose result shows failure.
    pub failed: usize,
}

/// Facts of a region, in order of appearance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The latest task-list call: tool name and its arguments.
    pub todo: Option<(String, Value)>,
    /// Files touched.
    pub files: Vec<FileFact>,
    /// Commands run and their outcome, e.g. ``cargo test` → exit 101`.
    pub commands: Vec<String>,
    /// Each command run (first line) and whether its result showed success.
    pub command_runs: Vec<(String, bool)>,
    /// Other tool calls with a short argument and outcome.
    pub other_calls: Vec<String>,
    /// First lines of failed results, oldest first.
    pub errors: Vec<String>,
    /// The latest failed result, verbatim (up to 20 lines).
    pub latest_error: Option<String>,
    /// Identifiers the agent or user wrote (tool arguments, messages).
    pub used_ids: Vec<String>,
    /// Identifiers that appeared only in tool results (ids created, URLs found).
    pub result_ids: Vec<String>,
    /// User messages (short ones verbatim, long ones head … tail).
    pub user_messages: Vec<String>,
    /// User decisions and corrections, and answers to questions the agent asked.
    pub decisions: Vec<String>,
    /// The last thing the assistant said before the boundary.
    pub last_state: Option<String>,
}

const DECISION_MARKERS: [&str; 12] = [
    "don't", "do not", "instead", "should", "must", "prefer", "always", "never", "actually",
    "stop", "skip", "rather",
];

/// Extracts the facts of `messages`.
pub fn extract(messages: &[Message], cfg: &FactConfig) -> Facts {
    let mut f = Facts::default();
    let mut calls: HashMap<&str, (&str, Value)> = HashMap::new();
    for m in messages {
        match m.role {
            Role::Assistant => {
                for p in &m.parts {
                    match p {
                        Part::Text(t) if !t.text.trim().is_empty() => {
                            push_ids(&mut f.used_ids, &t.text);
                            f.last_state = Some(clip(t.text.trim(), 600, 200));
                        }
                        Part::ToolCall(c) => {
                            let args = c.arguments.to_value();
                            let mut strings = Vec::new();
                            collect_strings(&args, &mut strings);
                            for s in strings.iter().filter(|s| s.len() < 400) {
                                push_ids(&mut f.used_ids, s);
                            }
                            if cfg.todo_tools.iter().any(|t| t == &c.name) {
                                f.todo = Some((c.name.clone(), args.clone()));
                            }
                            calls.insert(c.id.as_str(), (c.name.as_str(), args));
                        }
                        _ => {}
                    }
                }
            }
            _ => {
                for p in &m.parts {
                    match p {
                        Part::ToolResult(r) => {
                            let text = r.text();
                            let ok = outcome(r, &text, &cfg.error_prefixes);
                            for id in identifiers(&text).into_iter().take(60) {
                                if !f.used_ids.contains(&id) && !f.result_ids.contains(&id) {
                                    f.result_ids.push(id);
                                }
                            }
                            if let Outcome::Failed(_) = ok {
                                f.errors.push(clip(first_line(&text).trim(), 240, 0));
                                f.latest_error = Some(lines(&text, 10));
                            }
                            if let Some((name, args)) = calls.get(r.call_id.as_str()) {
                                record_call(&mut f, name, args, ok, &text);
                            }
                        }
                        Part::Text(t) if m.role == Role::User => {
                            user_text(&mut f, &t.text, &cfg.wrapper)
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    f
}

fn user_text(f: &mut Facts, text: &str, wrapper: &str) {
    let text = text.trim();
    if text.is_empty() || unwrap(wrapper, text).is_some() {
        return;
    }
    push_ids(&mut f.used_ids, text);
    let lower = text.to_lowercase();
    let short = clip(text, 300, 120);
    if text.len() <= 600 && DECISION_MARKERS.iter().any(|m| lower.contains(m)) {
        f.decisions.push(short);
    } else {
        f.user_messages.push(short);
    }
}

fn record_call(f: &mut Facts, name: &str, args: &Value, ok: Outcome, result: &str) {
    let status = match ok {
        Outcome::Ok => "ok".to_owned(),
        Outcome::Failed(Some(c)) => format!("exit {c}"),
        Outcome::Failed(None) => format!("failed: {}", clip(first_line(result).trim(), 160, 0)),
    };
    let kind = classify(name, args);
    match kind {
        ToolKind::Shell(cmd) => {
            let cmd = cmd.trim().lines().next().unwrap_or_default();
            f.commands
                .push(format!("`{}` → {status}", clip(cmd, 100, 30)));
            f.command_runs.push((cmd.to_owned(), ok == Outcome::Ok));
        }
        ToolKind::Read(p) | ToolKind::Write(p) | ToolKind::Edit(p) => {
            let i = match f.files.iter().position(|x| x.path == p) {
                Some(i) => i,
                None => {
                    f.files.push(FileFact {
                        path: p.to_owned(),
                        ..FileFact::default()
                    });
                    f.files.len() - 1
                }
            };
            let fact = &mut f.files[i];
            match (ok, kind) {
                (Outcome::Failed(_), _) => fact.failed += 1,
                (_, ToolKind::Edit(_)) => fact.edited += 1,
                (_, ToolKind::Write(_)) => fact.written += 1,
                _ => fact.read += 1,
            }
        }
        ToolKind::Ask => {
            f.decisions.push(format!(
                "answer to {name}: {}",
                clip(result.trim(), 300, 100)
            ));
        }
        ToolKind::Search(_) | ToolKind::Other => {
            let arg = first_string(args)
                .map(|s| format!(" `{}`", clip(s, 100, 0)))
                .unwrap_or_default();
            f.other_calls.push(format!("{name}{arg} → {status}"));
        }
    }
}

fn collect_strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

fn push_ids(ids: &mut Vec<String>, text: &str) {
    for id in identifiers(text) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
}

fn lines(text: &str, n: usize) -> String {
    let kept: Vec<&str> = text.lines().take(n).collect();
    let more = text.lines().count().saturating_sub(n);
    let body = clip(&kept.join("\n"), 800, 0);
    if more > 0 {
        format!("{body}\n… ({more} more lines)")
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_briefing_under_the_configured_wrapper_is_not_a_user_message() {
        let cfg = FactConfig {
            wrapper: "ctx".into(),
            ..FactConfig::default()
        };
        let messages = [
            Message::text(Role::User, "<ctx>\n## Task\nold briefing\n</ctx>"),
            Message::text(
                Role::User,
                "<compacted-history>\nnot ours\n</compacted-history>",
            ),
        ];
        let f = extract(&messages, &cfg);
        assert_eq!(f.user_messages.len(), 1, "{:?}", f.user_messages);
        assert!(f.user_messages[0].contains("not ours"));
    }
}
