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
use crate::message::{ContentForm, Message, Meta, Part, Role, Usage};

/// Decodes a whole session log.
pub(crate) fn decode(text: &str) -> Result<Conversation> {
    let mut r = Reader::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| Error::json(&e, i))?;
        r.line(value, i + 1)?;
    }
    r.flush();
    Ok(Conversation {
        format: Format::ClaudeCode,
        family: Family::Anthropic,
        model: r.model,
        tools: None,
        messages: r.out,
        extra: Map::new(),
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
                    self.flush();
                    let meta = obj.get("compactMetadata");
                    self.boundaries.push(CompactBoundary {
                        index: self.out.len(),
                        pre_tokens: meta
                            .and_then(|m| m.get("preTokens"))
                            .and_then(Value::as_u64),
                        trigger: meta
                            .and_then(|m| m.get("trigger"))
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    });
                }
                return Ok(());
            }
            _ => return Ok(()),
        }
        let summary = obj.get("isCompactSummary") == Some(&Value::Bool(true));
        let injected = obj.get("isMeta") == Some(&Value::Bool(true));
        let Some(Value::Object(mut msg)) = obj.remove("message") else {
            return Err(Error::shape(
                format!("line {line}"),
                "a \"message\" object on a user/assistant line",
            ));
        };
        let at = || format!("line {line}: message");
        let (mut parts, form) = decode_content(msg.remove("content"), &at, &decode_block)?;
        if ty == "assistant" {
            for p in &mut parts {
                if let Part::ToolCall(c) = p {
                    // Log-only field; not part of the API's tool_use block.
                    c.extra.remove("caller");
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
                        m.meta.usage = usage;
                    }
                }
                _ => {
                    self.flush();
                    let m = Message {
                        role: Role::Assistant,
                        parts,
                        form: ContentForm::Blocks,
                        extra: Map::new(),
                        meta: Meta {
                            line: Some(line),
                            usage,
                            ..Meta::default()
                        },
                    };
                    self.open = Some((id, m));
                }
            }
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
            extra: Map::new(),
            meta: Meta {
                line: Some(line),
                compact_summary: summary,
                injected,
                ..Meta::default()
            },
        });
        Ok(())
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
                extra: Map::new(),
                meta: Meta {
                    line: Some(self.results_line),
                    ..Meta::default()
                },
            });
        }
    }
}
