//! Claude Code session logs (JSONL).
//!
//! Claude Code writes one line per content block. Assistant lines that share
//! `message.id` are one API message, and the results of parallel tool calls
//! are interleaved between those lines. The reader merges lines by
//! `message.id` and puts all results of an assistant message into the user
//! message right after it, in the order of the calls, so the result is a valid
//! Anthropic conversation. Lines that are not messages (`progress`,
//! `file-history-snapshot`, `queue-operation`, `system`) are skipped, except
//! `system`/`compact_boundary`, which becomes a [`CompactBoundary`]; the
//! summary that follows it stays in place as a user message marked
//! [`Meta::compact_summary`](crate::Meta::compact_summary).

use serde_json::{Map, Value};

use super::anthropic::decode_block;
use super::util::decode_content;
use crate::conversation::{CompactBoundary, Conversation, Family, Format};
use crate::error::{Error, Result};
use crate::message::{ContentForm, Extra, Message, Meta, Part, Role, Usage};

/// What the reader puts where a call's result was never logged (the user
/// interrupted it): what Claude Code itself sends for such a call when the
/// session resumes, so the history stays one the API accepts.
pub(crate) const INTERRUPTED_RESULT: &str = "[Request interrupted by user for tool use]";

/// Decodes a whole session log.
pub(crate) fn decode(text: &str) -> Result<Conversation> {
    let mut r = Reader::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // A line is one JSON object; a writer cut short can run two
        // together (the first without its newline): each is read.
        for value in serde_json::Deserializer::from_str(line).into_iter::<Value>() {
            r.line(value.map_err(|e| Error::json(&e, i))?, i + 1)?;
        }
    }
    r.flush();
    answer_interrupted(&mut r.out, &mut r.boundaries);
    Ok(Conversation {
        format: Format::ClaudeCode,
        family: Family::Anthropic,
        model: r.model,
        tools: None,
        messages: r.out,
        extra: Extra::new(),
        boundaries: r.boundaries,
        label: None,
        key_order: Vec::new(),
    })
}

#[derive(Default)]
struct Reader {
    out: Vec<Message>,
    boundaries: Vec<CompactBoundary>,
    model: Option<String>,
    /// The assistant message being assembled and its API message id.
    open: Option<(Option<String>, Message)>,
    /// Results (and other blocks) answering the open assistant message.
    results: Vec<Part>,
    results_line: usize,
}

impl Reader {
    fn line(&mut self, v: Value, line: usize) -> Result<()> {
        let Value::Object(mut obj) = v else {
            return Err(Error::shape(format!("line {line}"), "a JSON object"));
        };
        let ty = obj
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if obj.get("isSidechain") == Some(&Value::Bool(true)) {
            return Ok(());
        }
        match ty.as_str() {
            "assistant" | "user" => {}
            "system" => {
                if obj.get("subtype").and_then(Value::as_str) == Some("compact_boundary") {
                    self.boundary(obj.get("compactMetadata"));
                }
                return Ok(());
            }
            _ => return Ok(()),
        }
        let summary = obj.get("isCompactSummary") == Some(&Value::Bool(true));
        let injected = obj.get("isMeta") == Some(&Value::Bool(true));
        let Some(Value::Object(mut msg)) = obj.shift_remove("message") else {
            return Err(Error::shape(
                format!("line {line}"),
                "a \"message\" object on a user/assistant line",
            ));
        };
        let at = || format!("line {line}: message");
        let (parts, form) = decode_content(msg.shift_remove("content"), &at, &decode_block)?;
        if ty == "assistant" {
            self.assistant(parts, &msg, line);
            return Ok(());
        }
        let answers_open = parts.iter().any(|p| matches!(p, Part::ToolResult(_)));
        if answers_open && self.open.is_some() {
            if self.results.is_empty() {
                self.results_line = line;
            }
            self.results.extend(parts);
            return Ok(());
        }
        self.flush();
        self.out.push(Message {
            role: Role::User,
            parts,
            form,
            extra: Extra::new(),
            meta: Meta {
                line: Some(line),
                compact_summary: summary,
                injected,
                ..Meta::default()
            },
        });
        Ok(())
    }

    /// Claude Code compacted here: what came before is one view.
    fn boundary(&mut self, meta: Option<&Value>) {
        self.flush();
        self.boundaries.push(CompactBoundary {
            index: self.out.len(),
            view: vec![self.out.len()],
            pre_tokens: meta
                .and_then(|m| m.get("preTokens"))
                .and_then(Value::as_u64),
            trigger: meta
                .and_then(|m| m.get("trigger"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }

    /// An assistant line: Claude Code logs each content block of one API
    /// message on its own line, so lines with the open message's id join it.
    fn assistant(&mut self, mut parts: Vec<Part>, msg: &Map<String, Value>, line: usize) {
        for p in &mut parts {
            if let Part::ToolCall(c) = p {
                // Log-only field; not part of the API's tool_use block.
                c.extra.shift_remove("caller");
            }
        }
        let id = msg.get("id").and_then(Value::as_str).map(str::to_owned);
        if let Some(m) = msg.get("model").and_then(Value::as_str)
            && !m.starts_with('<')
        {
            self.model = Some(m.to_owned());
        }
        let usage = msg.get("usage").map(Usage::from_anthropic);
        match &mut self.open {
            Some((open_id, m)) if id.is_some() && *open_id == id => {
                m.parts.extend(parts);
                if usage.is_some() {
                    m.meta.usage = usage.map(Box::new);
                }
            }
            _ => {
                self.flush();
                let m = Message {
                    role: Role::Assistant,
                    parts,
                    form: ContentForm::Blocks,
                    extra: Extra::new(),
                    meta: Meta {
                        line: Some(line),
                        usage: usage.map(Box::new),
                        ..Meta::default()
                    },
                };
                self.open = Some((id, m));
            }
        }
    }

    /// Emits the open assistant message and the user message with its results.
    fn flush(&mut self) {
        let Some((_, assistant)) = self.open.take() else {
            return;
        };
        let mut results = std::mem::take(&mut self.results);
        if !results.is_empty() {
            // Results first, in call order; anything else after them.
            let order = |p: &Part| match p {
                Part::ToolResult(r) => assistant
                    .tool_calls()
                    .position(|c| c.id == r.call_id)
                    .unwrap_or(usize::MAX - 1),
                _ => usize::MAX,
            };
            results.sort_by_key(order);
        }
        self.out.push(assistant);
        if !results.is_empty() {
            self.out.push(Message {
                role: Role::User,
                parts: results,
                form: ContentForm::Blocks,
                extra: Extra::new(),
                meta: Meta {
                    line: Some(self.results_line),
                    ..Meta::default()
                },
            });
        }
    }
}

/// Gives every call that no result answers, other than in the log's last
/// message (a log may end mid-step), an error result saying it was
/// interrupted, in the user message after it (made when there is none).
fn answer_interrupted(out: &mut Vec<Message>, boundaries: &mut [CompactBoundary]) {
    let mut i = 0;
    while i + 1 < out.len() {
        if out[i].role != Role::Assistant {
            i += 1;
            continue;
        }
        let answered: Vec<String> = out[i + 1]
            .tool_results()
            .map(|r| r.call_id.clone())
            .collect();
        let missing: Vec<Part> = out[i]
            .tool_calls()
            .filter(|c| !answered.contains(&c.id))
            .map(|c| Part::ToolResult(Box::new(interrupted(&c.id))))
            .collect();
        if !missing.is_empty() {
            if out[i + 1].role == Role::User && !answered.is_empty() {
                out[i + 1].parts.extend(missing);
            } else {
                // A message of its own, before what the user said next.
                let line = out[i].meta.line;
                out.insert(i + 1, results_message(missing, line));
                for b in boundaries.iter_mut() {
                    b.shift_after(i);
                }
            }
        }
        i += 1;
    }
}

fn interrupted(call_id: &str) -> crate::message::ToolResult {
    crate::message::ToolResult {
        call_id: call_id.to_owned(),
        parts: vec![Part::text(INTERRUPTED_RESULT)],
        form: ContentForm::Text,
        is_error: Some(true),
        extra: Extra::new(),
    }
}

fn results_message(parts: Vec<Part>, line: Option<usize>) -> Message {
    Message {
        role: Role::User,
        parts,
        form: ContentForm::Blocks,
        extra: Extra::new(),
        meta: Meta {
            line,
            ..Meta::default()
        },
    }
}
