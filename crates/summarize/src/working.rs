//! The working set: the newest copy of each file the agent was working on.
//!
//! Agents re-read what they edit, and after their own compaction they
//! re-attach the files they were last working on (Claude Code attaches the
//! latest reads; OpenHands keeps the latest events). When a briefing
//! replaces a region, the files read or written there most recently stay
//! as their newest copy — the read's result, or what was written —
//! verbatim, most recent first, within a budget, in a message of their own
//! after the briefing: older copies of the same file are not kept twice,
//! and a copy that edits followed says how many. A later compaction reads
//! its files back and carries those not touched since.

use std::borrow::Cow;
use std::collections::HashMap;

use abridge_model::{Message, Part, Role};
use abridge_tokens::TokenizerKind;
use serde_json::Value;

use crate::outcome::{CallOutcome, outcome};
use crate::tools::{ToolKind, classify};

/// The tag around the working set's message, which a later compaction
/// finds it by.
pub const TAG: &str = "working-files";

/// How the working set begins, for the model.
const HEADER: &str = "The newest copy of each file the agent was working on before this point, \
most recently touched first (a file edited after its copy was taken says so: read it again \
before relying on the lines that changed).";

/// Files a working set considers at most, most recently touched first.
const MOST_FILES: usize = 32;

/// Argument keys that hold a written file's content.
const CONTENT_KEYS: [&str; 3] = ["content", "file_text", "text"];

/// How a copy was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// The result of reading it.
    Read,
    /// What the agent wrote into it.
    Written,
}

/// One file's newest copy (borrowed from the history it was read in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkingFile<'a> {
    /// The path as the agent wrote it.
    pub path: String,
    /// The copy.
    pub text: Cow<'a, str>,
    /// How it was taken.
    pub taken: Taken,
    /// Successful edits after it.
    pub edits_after: usize,
}

/// The files `messages` read or wrote, each with its newest copy, most
/// recently touched first. Failed operations do not count; a file only
/// edited has no copy.
pub fn files<'a, S: AsRef<str>>(
    messages: &'a [Message],
    error_prefixes: &[S],
) -> Vec<WorkingFile<'a>> {
    let mut calls: HashMap<&str, (&str, Value)> = HashMap::new();
    // Each path's last touch and newest copy.
    let mut by_path: HashMap<String, (usize, Option<WorkingFile>)> = HashMap::new();
    let mut touch = 0;
    for m in messages {
        for p in &m.parts {
            match p {
                Part::ToolCall(c) if m.role == Role::Assistant => {
                    calls.insert(c.id.as_str(), (c.name.as_str(), c.arguments.fields()));
                }
                Part::ToolResult(r) => {
                    let Some((name, args)) = calls.get(r.call_id.as_str()) else {
                        continue;
                    };
                    let text = r.text();
                    if outcome(r, &text, error_prefixes) != CallOutcome::Ok {
                        continue;
                    }
                    touch += 1;
                    let (path, copy) = match classify(name, args) {
                        ToolKind::Read(path) => (path, Some((text, Taken::Read))),
                        ToolKind::Write(path) => {
                            (path, written(args).map(|t| (Cow::Owned(t), Taken::Written)))
                        }
                        ToolKind::Edit(path) => (path, None),
                        _ => continue,
                    };
                    let entry = by_path.entry(path.to_owned()).or_insert((touch, None));
                    entry.0 = touch;
                    match (copy, &mut entry.1) {
                        (Some((text, taken)), slot) => {
                            *slot = Some(WorkingFile {
                                path: path.to_owned(),
                                text,
                                taken,
                                edits_after: 0,
                            });
                        }
                        (None, Some(f)) => f.edits_after += 1,
                        (None, None) => {}
                    }
                }
                _ => {}
            }
        }
    }
    let mut out: Vec<(usize, WorkingFile<'a>)> = by_path
        .into_values()
        .filter_map(|(touch, f)| f.map(|f| (touch, f)))
        .collect();
    out.sort_by_key(|f| std::cmp::Reverse(f.0));
    out.into_iter().map(|(_, f)| f).collect()
}

/// The content a write call put in its file.
fn written(args: &Value) -> Option<String> {
    CONTENT_KEYS
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_owned)
}

/// The working set's message text and its tokens: `files` in order while
/// they fit `budget` tokens together (a file too large for what is left is
/// passed over); `None` when none fits.
pub fn render(
    files: &[WorkingFile<'_>],
    budget: usize,
    tokenizer: TokenizerKind,
) -> Option<(String, usize)> {
    let whole = |body: &str| format!("<{TAG}>\n{HEADER}\n{body}</{TAG}>");
    let mut body = String::new();
    let mut tokens = 0;
    for f in files.iter().take(MOST_FILES) {
        let section = section(f);
        // Counted as it would go out, and only as far as the budget: a
        // file far larger than what is left costs what is left, not its size.
        let with = format!("{body}{section}");
        if let Some(n) = tokenizer.count_within(&whole(&with), budget) {
            body = with;
            tokens = n;
        }
    }
    (!body.is_empty()).then(|| (whole(&body), tokens))
}

/// One file's section: a heading that says what the copy is, and the copy
/// in a fence longer than any backtick run inside it.
fn section(f: &WorkingFile<'_>) -> String {
    let how = match f.taken {
        Taken::Read => "as read",
        Taken::Written => "as written",
    };
    let after = match f.edits_after {
        0 => String::new(),
        1 => "; edited once after".to_owned(),
        n => format!("; edited {n} times after"),
    };
    let fence = "`".repeat(longest_backticks(&f.text).max(2) + 1);
    format!(
        "\n### {} ({how}{after})\n{fence}\n{}\n{fence}\n",
        f.path,
        f.text.trim_end_matches('\n')
    )
}

fn longest_backticks(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// The files of an earlier working set's message, in its order; `None`
/// when `text` is not one.
pub fn parse(text: &str) -> Option<Vec<WorkingFile<'static>>> {
    let body = text
        .trim()
        .strip_prefix(&format!("<{TAG}>"))?
        .strip_suffix(&format!("</{TAG}>"))?;
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.find("\n### ") {
        rest = &rest[at + 5..];
        let (heading, after) = rest.split_once('\n')?;
        let (path, how) = heading.rsplit_once(" (")?;
        let fence_len = after.chars().take_while(|c| *c == '`').count();
        let fence = &after[..fence_len];
        let inner = after[fence_len..].strip_prefix('\n')?;
        let end = inner.find(&format!("\n{fence}\n"))?;
        let edits_after =
            how.split("; edited ")
                .nth(1)
                .map_or(0, |n| match n.split_whitespace().next() {
                    Some("once") => 1,
                    Some(k) => k.parse().unwrap_or(1),
                    None => 0,
                });
        out.push(WorkingFile {
            path: path.to_owned(),
            text: Cow::Owned(inner[..end].to_owned()),
            taken: match how.starts_with("as written") {
                true => Taken::Written,
                false => Taken::Read,
            },
            edits_after,
        });
        rest = &inner[end..];
    }
    Some(out)
}

/// True when `text` is a working set's message.
pub fn is_working_set(text: &str) -> bool {
    let t = text.trim();
    t.starts_with(&format!("<{TAG}>")) && t.ends_with(&format!("</{TAG}>"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::exchange;
    use serde_json::json;

    #[test]
    fn each_file_keeps_its_newest_copy_most_recent_first() {
        let messages = [
            exchange("1", "Read", json!({"file_path": "a.rs"}), "fn old() {}"),
            exchange("2", "Read", json!({"file_path": "b.rs"}), "fn b() {}"),
            exchange("3", "Read", json!({"file_path": "a.rs"}), "fn new() {}"),
            exchange(
                "4",
                "Edit",
                json!({"file_path": "a.rs", "old_string": "new", "new_string": "newer"}),
                "The file has been updated.",
            ),
            exchange(
                "5",
                "Write",
                json!({"file_path": "c.rs", "content": "fn c() {}"}),
                "File created.",
            ),
            exchange(
                "6",
                "Read",
                json!({"file_path": "gone.rs"}),
                "Error: no such file",
            ),
            exchange("7", "Edit", json!({"file_path": "only-edited.rs"}), "ok"),
        ]
        .concat();
        let files = files(&messages, &crate::outcome::DEFAULT_ERROR_PREFIXES);
        let got: Vec<(&str, &str, usize)> = files
            .iter()
            .map(|f| (f.path.as_str(), &*f.text, f.edits_after))
            .collect();
        assert_eq!(
            got,
            [
                ("c.rs", "fn c() {}", 0),
                ("a.rs", "fn new() {}", 1),
                ("b.rs", "fn b() {}", 0)
            ]
        );
        assert_eq!(files[0].taken, Taken::Written);
    }

    #[test]
    fn a_rendered_set_reads_back_and_keeps_within_its_budget() {
        let files = vec![
            WorkingFile {
                path: "src/a b.rs".into(),
                text: "fn a() {}\n```\nnot a fence end\n".into(),
                taken: Taken::Read,
                edits_after: 2,
            },
            WorkingFile {
                path: "big.rs".into(),
                text: "x ".repeat(5_000).into(),
                taken: Taken::Read,
                edits_after: 0,
            },
            WorkingFile {
                path: "c.rs".into(),
                text: "fn c() {}".into(),
                taken: Taken::Written,
                edits_after: 1,
            },
        ];
        let (text, tokens) = render(&files, 400, TokenizerKind::O200kBase).unwrap();
        assert!(is_working_set(&text));
        assert_eq!(TokenizerKind::O200kBase.count(&text), tokens);
        assert!(tokens <= 400);
        // The file that did not fit is passed over; the next still goes.
        let back = parse(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].path, "src/a b.rs");
        assert_eq!(back[0].text, "fn a() {}\n```\nnot a fence end");
        assert_eq!(back[0].edits_after, 2);
        assert_eq!((back[1].taken, back[1].edits_after), (Taken::Written, 1));
        assert_eq!(render(&files[1..2], 400, TokenizerKind::O200kBase), None);
        assert!(parse("<compacted-history>\nx\n</compacted-history>").is_none());
    }
}
