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
                            text.push_str(&marker(&c.name, &args, result, prefixes));
                            text.push('\n');
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
                if !text.is_empty() {
                    blocks.push((
                        format!("<user>\n{}\n</user>\n", clip(&text.join("\n"), 2_000, 0)),
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
    match classify(name, args) {
        ToolKind::Read(p) => format!("[read: {p} → {status}]"),
        ToolKind::Write(p) => format!("[wrote: {p} → {status}]"),
        ToolKind::Edit(p) => format!("[edited: {p} → {status}]"),
        ToolKind::Shell(c) => format!("[shell: {} → {status}]", clip(c.trim(), 300, 0)),
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
