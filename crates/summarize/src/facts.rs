//! Facts extracted deterministically from the messages a briefing replaces.

use std::collections::HashMap;

use abridge_model::text::{clip, first_line};
use abridge_model::{Message, Part, Role};
use serde_json::Value;

use crate::briefing::unwrap;
use crate::ident::identifiers;
use crate::outcome::{Outcome, outcome};
use crate::progress::{self, CommandFact, first_sentence, is_exploration, progress_of};
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
    /// Each command once, most recently run last, with its runs and what
    /// came of its failures. Successful exploration (`ls`, `grep`…) is left out.
    pub commands: Vec<CommandFact>,
    /// Progress commands recorded (commits, closed tasks, pushes), in order.
    pub progress: Vec<String>,
    /// The first sentence of each thing the agent said, deduplicated.
    pub narrative: Vec<String>,
    /// Each command run (first line) and whether its result showed success.
    pub command_runs: Vec<(String, bool)>,
    /// Other tool calls with a short argument and outcome.
    pub other_calls: Vec<String>,
    /// Failed calls other than commands (`Edit src/a.rs: …`), oldest first;
    /// failed commands are under [`commands`](Self::commands).
    pub errors: Vec<String>,
    /// The latest failed result, verbatim (up to 20 lines).
    pub latest_error: Option<String>,
    /// Identifiers the agent or user wrote (tool arguments, messages),
    /// least worth keeping first: ranked by how often the agent wrote them,
    /// then how recently.
    pub used_ids: Vec<String>,
    /// Identifiers that appeared only in the latest tool results (ids
    /// created, URLs found); bulk listings further back are left out.
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
    let mut weight = Weights::default();
    let mut results: Vec<String> = Vec::new();
    // Each file the agent read: its path and the index of its text in `results`.
    let mut read: Vec<(String, usize)> = Vec::new();
    for m in messages {
        match m.role {
            Role::Assistant => {
                for p in &m.parts {
                    match p {
                        Part::Text(t) if !t.text.trim().is_empty() => {
                            weight.add(&mut f.used_ids, &t.text);
                            f.last_state = Some(clip(t.text.trim(), 600, 200));
                            if let Some(s) = first_sentence(&t.text)
                                && !f.narrative.contains(&s)
                            {
                                f.narrative.push(s);
                            }
                        }
                        Part::ToolCall(c) => {
                            let args = c.arguments.to_value();
                            let mut strings = Vec::new();
                            collect_strings(&args, &mut strings);
                            // Code the agent wrote counts too (edits, new files).
                            for s in &strings {
                                weight.add(&mut f.used_ids, &s[..floor_char(s, 20_000)]);
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
                            let at = results.len();
                            results.push(r.text());
                            let text = &results[at];
                            let ok = outcome(r, text, &cfg.error_prefixes);
                            if let Outcome::Failed(_) = ok {
                                f.latest_error = Some(lines(text, 10));
                            }
                            if let Some((name, args)) = calls.get(r.call_id.as_str()) {
                                if let (ToolKind::Read(path), Outcome::Ok) =
                                    (classify(name, args), ok)
                                {
                                    read.push((path.to_owned(), at));
                                }
                                record_call(&mut f, name, args, ok, text);
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
    weight.rank(&mut f.used_ids);
    // From results: what the files the agent changed contain, and what the
    // latest results showed; other listings are bulk.
    let changed = |path: &str| {
        f.files
            .iter()
            .any(|x| x.path == path && x.edited + x.written > 0)
    };
    // Identifiers are read only from the files that turned out changed.
    let mut from_results: Vec<String> = read
        .into_iter()
        .filter(|(path, _)| changed(path))
        .flat_map(|(_, at)| identifiers(&results[at]).into_iter().take(80))
        .collect();
    // Older results give a few names each, the latest ones more.
    let n = results.len();
    for (i, text) in results.iter().enumerate() {
        let take = if i + RECENT_RESULTS >= n {
            20
        } else {
            OLDER_RESULT_IDS
        };
        from_results.extend(identifiers(text).into_iter().take(take));
    }
    for id in from_results {
        if !f.used_ids.contains(&id) && !f.result_ids.contains(&id) && !is_position(&id) {
            f.result_ids.push(id);
        }
    }
    f
}

/// Tool results whose identifiers the briefing keeps more of (the latest ones).
const RECENT_RESULTS: usize = 3;

/// Identifiers an older tool result contributes at most.
const OLDER_RESULT_IDS: usize = 20;

/// How often and how late the agent wrote each identifier, and whether
/// only inside code it wrote (a long argument: an edit, a new file).
#[derive(Default)]
struct Weights {
    seen: HashMap<String, Seen>,
    clock: u32,
    /// Long arguments written so far.
    code_calls: u32,
}

#[derive(Default, Clone, Copy)]
struct Seen {
    /// In prose or a short argument (a path, a command, an id).
    plain: u32,
    /// Inside code the agent wrote.
    code: u32,
    /// When last written.
    last: u32,
    /// The long argument it was last written in.
    last_code: u32,
}

/// Code the agent wrote is a long argument; its names count for less.
const CODE_CHARS: usize = 400;
/// Names from the latest this many code arguments are kept, older ones
/// only when written again.
const RECENT_CODE: u32 = 8;

impl Weights {
    fn add(&mut self, ids: &mut Vec<String>, text: &str) {
        self.clock += 1;
        let code = text.len() >= CODE_CHARS;
        if code {
            self.code_calls += 1;
        }
        for id in identifiers(text) {
            if is_position(&id) {
                continue;
            }
            let w = self.seen.entry(id.clone()).or_default();
            if w.plain + w.code == 0 {
                ids.push(id);
            }
            if code {
                w.code += 1;
                w.last_code = self.code_calls;
            } else {
                w.plain += 1;
            }
            w.last = self.clock;
        }
    }

    /// Drops names seen only once in old code; least worth keeping first:
    /// long ago, then seldom.
    fn rank(&self, ids: &mut Vec<String>) {
        let recent = self.code_calls.saturating_sub(RECENT_CODE);
        ids.retain(|id| {
            self.seen
                .get(id)
                .is_some_and(|w| w.plain > 0 || w.code > 1 || w.last_code > recent)
        });
        ids.sort_by_key(|id| {
            self.seen
                .get(id)
                .map(|w| (w.last, w.plain + w.code))
                .unwrap_or_default()
        });
    }
}

/// `lib/a.ex:264:82`, `src/main.rs:10`: a compiler position, not a name
/// worth keeping (its file is listed on its own).
fn is_position(id: &str) -> bool {
    let mut parts = id.rsplit(':');
    let last = parts.next().unwrap_or("");
    !last.is_empty() && last.chars().all(|c| c.is_ascii_digit()) && id.contains('.')
}

fn floor_char(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn user_text(f: &mut Facts, text: &str, wrapper: &str) {
    let text = text.trim();
    if text.is_empty() || unwrap(wrapper, text).is_some() {
        return;
    }
    for id in identifiers(text) {
        if !f.used_ids.contains(&id) {
            f.used_ids.push(id);
        }
    }
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
            f.command_runs.push((cmd.to_owned(), ok == Outcome::Ok));
            let failure = (ok != Outcome::Ok).then(|| clip(first_line(result).trim(), 240, 0));
            if ok == Outcome::Ok {
                if let Some(p) = progress_of(cmd) {
                    f.progress.push(p);
                }
                if is_exploration(cmd) {
                    return;
                }
            }
            progress::record(&mut f.commands, cmd, status, failure);
        }
        ToolKind::Read(p) | ToolKind::Write(p) | ToolKind::Edit(p) => {
            if ok != Outcome::Ok {
                f.errors.push(format!(
                    "{name} `{p}`: {}",
                    clip(first_line(result).trim(), 240, 0)
                ));
            }
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
            if ok != Outcome::Ok {
                f.errors.push(format!(
                    "{name}{arg}: {}",
                    clip(first_line(result).trim(), 240, 0)
                ));
            }
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
