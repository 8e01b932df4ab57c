//! The history as a summarizer reads it: one block per message, tool calls
//! as one-line markers (`[read: src/lib.rs]`, `[shell: cargo test → exit
//! 101]`), tool output truncated, the oldest outputs dropped first when the
//! whole does not fit the summarizer's window.

use std::collections::HashMap;

use abridge_model::{Message, Part, Role, ToolResult};
use abridge_summarize::{Outcome, ToolKind, classify, first_line, first_string, outcome};
use serde_json::Value;

/// Characters of one tool output kept in the serialization.
const OUTPUT_CHARS: usize = 600;

/// Serializes messages; at most `max_chars` characters.
pub(crate) fn history(messages: &[Message], error_prefixes: &[String], max_chars: usize) -> String {
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
                            let args: Value = serde_json::from_str(&c.arguments.to_json_text())
                                .unwrap_or(Value::Null);
                            let result = results.get(c.id.as_str()).copied();
                            text.push_str(&marker(&c.name, &args, result, error_prefixes));
                            text.push('\n');
                            if let Some(r) = result {
                                let out = r.text();
                                if !out.trim().is_empty()
                                    && !matches!(classify(&c.name, &args), ToolKind::Read(_))
                                {
                                    outputs.push_str(&format!(
                                        "[output of {}]\n{}\n",
                                        c.name,
                                        cut(out.trim(), OUTPUT_CHARS)
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
                if !text.is_empty() {
                    blocks.push((
                        format!("<user>\n{}\n</user>\n", cut(&text.join("\n"), 2_000)),
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
                Outcome::Ok => "✓".to_owned(),
                Outcome::Failed(Some(c)) => {
                    format!("exit {c} ✗ {}", cut(first_line(&text).trim(), 160))
                }
                Outcome::Failed(None) => format!("✗ {}", cut(first_line(&text).trim(), 160)),
            }
        }
    };
    match classify(name, args) {
        ToolKind::Read(p) => format!("[read: {p} → {status}]"),
        ToolKind::Write(p) => format!("[wrote: {p} → {status}]"),
        ToolKind::Edit(p) => format!("[edited: {p} → {status}]"),
        ToolKind::Shell(c) => format!("[shell: {} → {status}]", cut(c.trim(), 300)),
        ToolKind::Search(q) => format!("[searched: \"{}\" → {status}]", cut(q, 200)),
        ToolKind::Ask => {
            let answer = result.map(|r| cut(&r.text(), 400)).unwrap_or_default();
            format!("[asked the user via {name}; answer: {answer}]")
        }
        ToolKind::Other => {
            let arg = if name.to_lowercase().contains("todo") || args.get("todos").is_some() {
                cut(&args.to_string(), 1_500)
            } else {
                first_string(args).map(|s| cut(s, 200)).unwrap_or_default()
            };
            format!("[{name}: {arg} → {status}]")
        }
    }
}

/// At most `max` characters of `s`, with a note of what was cut.
pub(crate) fn cut(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_owned();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}… [{} more characters]", n - max)
}
