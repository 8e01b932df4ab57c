//! The history as a summarizer reads it: one block per message, tool calls
//! as one-line markers (`[read: src/lib.rs]`, `[shell: cargo test → exit
//! 101]`), tool output truncated, the oldest outputs dropped first when the
//! whole does not fit the summarizer's window.

use std::collections::HashMap;

use abridge_model::text::{clip, first_line};
use abridge_model::{Message, Part, Role, ToolResult};
use abridge_summarize::FactConfig;
use abridge_summarize::Request;
use abridge_summarize::facts::extract;
use abridge_summarize::outcome::{CallOutcome, outcome};
use abridge_summarize::tasks::{self, Change, TaskList};
use abridge_summarize::tools::{ToolKind, classify, first_string};
use serde_json::Value;

/// Characters of one tool output kept in the serialization.
const OUTPUT_CHARS: usize = 600;

/// Serializes messages; at most `max_chars` characters.
pub(crate) fn history(messages: &[Message], facts: &FactConfig, max_chars: usize) -> String {
    let results: HashMap<&str, &ToolResult> = messages
        .iter()
        .flat_map(|m| m.tool_results())
        .map(|r| (r.call_id.as_str(), r))
        .collect();
    let mut blocks: Vec<(String, Option<String>)> = Vec::new(); // (block, tool outputs)
    for m in messages {
        match m.role {
            Role::Assistant => {
                let mut text = String::new();
                let mut outputs = String::new();
                for p in &m.parts {
                    match p {
                        Part::Text(t) if !t.text.trim().is_empty() => {
                            text.push_str(t.text.trim());
                            text.push('\n');
                        }
                        Part::ToolCall(c) => {
                            let args = c.arguments.fields();
                            let result = results.get(c.id.as_str()).copied();
                            // The list as it stands follows the history whole.
                            if let Some(change) =
                                tasks::change_of(&c.name, &args, &facts.todo_tools)
                            {
                                text.push_str(&change_marker(&c.name, &change));
                                text.push('\n');
                                continue;
                            }
                            let prefixes = &facts.error_prefixes;
                            let line = marker(&c.name, &args, result, prefixes);
                            push_marker(&mut text, line);
                            if let Some(r) = result {
                                let out = r.text();
                                if !out.trim().is_empty()
                                    && !matches!(classify(&c.name, &args), ToolKind::Read(_))
                                {
                                    outputs.push_str(&format!(
                                        "[output of {}]\n{}\n",
                                        c.name,
                                        clip(out.trim(), OUTPUT_CHARS, 0)
                                    ));
                                }
                            }
                        }
                        _ => {}
                    }
                }
                let outputs = (!outputs.is_empty()).then_some(outputs);
                blocks.push((format!("<assistant>\n{}</assistant>\n", text), outputs));
            }
            Role::System | Role::Developer => {}
            _ => {
                let text: Vec<&str> = m.parts.iter().filter_map(Part::as_text).collect();
                let notes = annotations(m, &text);
                if !text.is_empty() || !notes.is_empty() {
                    blocks.push((
                        format!(
                            "<user>\n{}{notes}\n</user>\n",
                            clip(&text.join("\n"), 2_000, 0)
                        ),
                        None,
                    ));
                }
            }
        }
    }
    // Drop outputs, oldest first, until the whole fits; then whole blocks.
    let len = |b: &[(String, Option<String>)]| -> usize {
        b.iter()
            .map(|(t, o)| t.len() + o.as_ref().map_or(0, String::len))
            .sum()
    };
    let mut i = 0;
    while len(&blocks) > max_chars && i < blocks.len() {
        blocks[i].1 = None;
        i += 1;
    }
    let mut dropped = 0;
    while len(&blocks) > max_chars && blocks.len() > 1 {
        blocks.remove(0);
        dropped += 1;
    }
    let mut out = String::new();
    if dropped > 0 {
        out.push_str(&format!("[{dropped} oldest messages left out to fit]\n"));
    }
    for (text, outputs) in blocks {
        out.push_str(&text);
        if let Some(o) = outputs {
            out.push_str(&o);
        }
    }
    out
}

/// The one-line marker of a tool call and its outcome.
fn marker(name: &str, args: &Value, result: Option<&ToolResult>, prefixes: &[String]) -> String {
    let status = match result {
        None => "no result".to_owned(),
        Some(r) => {
            let text = r.text();
            match outcome(r, &text, prefixes) {
                CallOutcome::Ok => "✓".to_owned(),
                CallOutcome::Failed(Some(c)) => {
                    format!("exit {c} ✗ {}", clip(first_line(&text).trim(), 160, 0))
                }
                CallOutcome::Failed(None) => {
                    format!("✗ {}", clip(first_line(&text).trim(), 160, 0))
                }
            }
        }
    };
    if let Some(lint) = lint_marker(name, args, result) {
        return lint;
    }
    match classify(name, args) {
        ToolKind::Read(p) => format!("[read: {p} → {status}]"),
        ToolKind::Write(p) if creates(name, args) => format!("[created: {p} → {status}]"),
        ToolKind::Write(p) => format!("[wrote: {p} → {status}]"),
        ToolKind::Edit(p) => match edits_in(args) {
            1 => format!("[edited: {p} → {status}]"),
            n => format!("[edited: {p} ({n} edits) → {status}]"),
        },
        ToolKind::Shell(c) => {
            let status = match result.is_some_and(timed_out) {
                true => "timed out".to_owned(),
                false => status,
            };
            format!("[shell: {} → {status}]", clip(c.trim(), 300, 0))
        }
        ToolKind::Search(q) => format!("[searched: \"{}\" → {status}]", clip(q, 200, 0)),
        ToolKind::Ask => {
            let answer = result.map(|r| clip(&r.text(), 400, 0)).unwrap_or_default();
            format!("[asked the user via {name}; answer: {answer}]")
        }
        ToolKind::Other => {
            let arg = first_string(args)
                .map(|s| clip(s, 200, 0))
                .unwrap_or_default();
            format!("[{name}: {arg} → {status}]")
        }
    }
}

/// Adds a marker line to an assistant block: an edit of the file the line
/// before edited too, with the same outcome, counts there (`[edited: p (3
/// edits) → ✓]`, as stagewise writes it).
fn push_marker(text: &mut String, line: String) {
    if let Some((path, n, status)) = edit_parts(&line) {
        let body = text.strip_suffix('\n').unwrap_or(text);
        let start = body.rfind('\n').map_or(0, |i| i + 1);
        if let Some((p, m, st)) = edit_parts(&body[start..])
            && p == path
            && st == status
        {
            let merged = format!("[edited: {path} ({} edits) → {status}]\n", n + m);
            text.truncate(start);
            text.push_str(&merged);
            return;
        }
    }
    text.push_str(&line);
    text.push('\n');
}

/// An edit marker's path, edit count and outcome.
fn edit_parts(line: &str) -> Option<(&str, usize, &str)> {
    let inner = line.strip_prefix("[edited: ")?.strip_suffix(']')?;
    let (head, status) = inner.rsplit_once(" → ")?;
    match head
        .strip_suffix(" edits)")
        .and_then(|h| h.rsplit_once(" ("))
    {
        Some((path, n)) => Some((path, n.parse().ok()?, status)),
        None => Some((head, 1, status)),
    }
}

/// Edits one call makes (`edits: [...]`, as multi-edit tools take them).
fn edits_in(args: &Value) -> usize {
    args.get("edits")
        .and_then(Value::as_array)
        .map_or(1, |e| e.len().max(1))
}

/// Whether a write creates a file (a create tool or command, a patch's
/// added file) rather than overwriting one.
fn creates(name: &str, args: &Value) -> bool {
    let lname = name.to_lowercase();
    lname.contains("create")
        || args.get("command").and_then(Value::as_str) == Some("create")
        || ["input", "patch"]
            .iter()
            .filter_map(|k| args.get(*k).and_then(Value::as_str))
            .any(|p| p.contains("*** Add File: "))
}

/// Whether a command's result says it ran out of time.
fn timed_out(r: &ToolResult) -> bool {
    let text = r.text();
    let head: String = text.chars().take(300).collect::<String>().to_lowercase();
    head.contains("timed out")
        || head.contains("timeout expired")
        || head.contains("exceeded the timeout")
}

/// A linter's or diagnostics tool's call, as stagewise writes it: `[lint:
/// paths → clean]` or `→ N errors, M warnings`.
fn lint_marker(name: &str, args: &Value, result: Option<&ToolResult>) -> Option<String> {
    let lname = name.to_lowercase();
    if !(lname.contains("lint") || lname.contains("diagnostic")) {
        return None;
    }
    let mut paths: Vec<&str> = ["paths", "files", "uris"]
        .iter()
        .filter_map(|k| args.get(*k).and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .take(5)
        .collect();
    if paths.is_empty() {
        paths.extend(first_string(args));
    }
    let paths = match paths.is_empty() {
        true => "the workspace".to_owned(),
        false => paths.join(", "),
    };
    let status = match result {
        None => "no result".to_owned(),
        Some(r) => {
            let text = r.text().to_lowercase();
            let (errors, warnings) = (count_of(&text, "error"), count_of(&text, "warning"));
            match (errors, warnings) {
                (0, 0) if r.is_error != Some(true) => "clean".to_owned(),
                (0, 0) => format!("✗ {}", clip(first_line(&r.text()).trim(), 160, 0)),
                (e, w) => format!("{e} errors, {w} warnings"),
            }
        }
    };
    Some(format!("[lint: {} → {status}]", clip(&paths, 300, 0)))
}

/// The largest `N` a text writes as `N <word>` or `N <word>s`; else the
/// number of lines that name the word as a severity (`error:`, `[error]`).
fn count_of(text: &str, word: &str) -> usize {
    let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).collect();
    let stated = words
        .windows(2)
        .filter(|w| w[1] == word || w[1].strip_suffix('s') == Some(word))
        .filter_map(|w| w[0].parse::<usize>().ok())
        .max();
    stated.unwrap_or_else(|| {
        text.lines()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with(&format!("{word}:"))
                    || l.contains(&format!("[{word}]"))
                    || l.contains(&format!(" {word}:"))
            })
            .count()
    })
}

/// What a user message brought beside its text, as stagewise annotates it:
/// `[attached: …]` for images and documents, `[mentioned: …]` for the
/// `@path` references its text makes.
fn annotations(m: &Message, text: &[&str]) -> String {
    let mut out = String::new();
    let attached: Vec<String> = m
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(i) => Some(match &i.source {
                abridge_model::ImageSource::Base64 { media_type, .. } => {
                    format!("image ({media_type})")
                }
                abridge_model::ImageSource::Url(u) if u.starts_with("data:") => "image".to_owned(),
                abridge_model::ImageSource::Url(u) => format!("image {}", clip(u, 120, 0)),
            }),
            Part::Opaque(v) => {
                let kind = v.get("type").and_then(Value::as_str).unwrap_or("file");
                let name = ["title", "filename", "name"]
                    .iter()
                    .find_map(|k| v.get(*k).and_then(Value::as_str));
                Some(match name {
                    Some(n) => format!("{kind} {}", clip(n, 120, 0)),
                    None => kind.to_owned(),
                })
            }
            _ => None,
        })
        .collect();
    if !attached.is_empty() {
        out.push_str(&format!("\n[attached: {}]", attached.join(", ")));
    }
    let mut mentioned: Vec<&str> = text
        .iter()
        .flat_map(|t| t.split_whitespace())
        .filter_map(|w| w.strip_prefix('@'))
        .map(|w| w.trim_end_matches([',', '.', ';', ':', ')', '\'', '"']))
        .filter(|w| w.contains('/') || w.contains('.'))
        .collect();
    mentioned.dedup();
    if !mentioned.is_empty() {
        out.push_str(&format!("\n[mentioned: {}]", mentioned.join(", ")));
    }
    out
}

/// A call that changes the task list, in one line: the list as it stands
/// is shown after the history.
fn change_marker(name: &str, change: &Change) -> String {
    match change {
        Change::Replace(list) => {
            let done = list.items.iter().filter(|t| t.done()).count();
            format!(
                "[{name}: wrote the task list, {} items, {done} done]",
                list.items.len()
            )
        }
        Change::Create { text, .. } => {
            format!("[{name}: added the task \"{}\"]", clip(text, 200, 0))
        }
        Change::Update { id, status } => format!("[{name}: task #{id} → {status}]"),
    }
}

/// The region's task list as it stands at its end: from the facts the
/// engine read of it, or read here.
pub(crate) fn task_list(req: &Request<'_>) -> Option<TaskList> {
    match req.region_facts {
        Some(f) => f.todo.clone(),
        None => extract(req.region, req.facts).todo,
    }
}

#[cfg(test)]
mod tests {
    use abridge_model::{Arguments, ContentForm, Extra, ImagePart, ImageSource, ToolCall};
    use serde_json::json;

    use super::*;

    fn call(id: &str, name: &str, args: Value) -> Part {
        Part::ToolCall(Box::new(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: Arguments::Value(args),
            extra: Extra::new(),
            function_extra: Extra::new(),
        }))
    }

    fn result(id: &str, text: &str) -> Message {
        Message {
            role: Role::Tool,
            parts: vec![Part::ToolResult(Box::new(ToolResult {
                call_id: id.into(),
                parts: vec![Part::text(text)],
                form: ContentForm::Text,
                is_error: None,
                extra: Extra::new(),
            }))],
            ..Message::default()
        }
    }

    #[test]
    fn stagewise_markers() {
        let mut user = Message::text(
            Role::User,
            "Fix the header, see @src/ui/Header.tsx and @docs/colors.md.",
        );
        user.parts.push(Part::Image(Box::new(ImagePart {
            source: ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "AAAA".into(),
            },
            extra: Extra::new(),
            source_extra: Extra::new(),
        })));
        let turn = Message {
            role: Role::Assistant,
            parts: vec![
                call(
                    "1",
                    "Edit",
                    json!({"file_path": "src/ui/Header.tsx", "old_string": "a", "new_string": "b"}),
                ),
                call(
                    "2",
                    "MultiEdit",
                    json!({"file_path": "src/ui/Header.tsx", "edits": [{}, {}]}),
                ),
                call(
                    "3",
                    "create_file",
                    json!({"path": "src/ui/Logo.tsx", "content": "x"}),
                ),
                call("4", "Bash", json!({"command": "npm run e2e"})),
                call("5", "read_lints", json!({"paths": ["src/ui"]})),
                call("6", "get_diagnostics", json!({"path": "src/app.ts"})),
            ],
            form: ContentForm::Blocks,
            ..Message::default()
        };
        let messages = vec![
            user,
            turn,
            result("1", "ok"),
            result("2", "ok"),
            result("3", "created"),
            result("4", "Error: Command timed out after 120000ms"),
            result("5", "Found 2 errors and 1 warning."),
            result("6", "No problems found."),
        ];
        let text = history(&messages, &FactConfig::default(), 100_000);
        for want in [
            "[attached: image (image/png)]",
            "[mentioned: src/ui/Header.tsx, docs/colors.md]",
            "[edited: src/ui/Header.tsx (3 edits) → ✓]",
            "[created: src/ui/Logo.tsx → ✓]",
            "[shell: npm run e2e → timed out]",
            "[lint: src/ui → 2 errors, 1 warnings]",
            "[lint: src/app.ts → clean]",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
    }
}
