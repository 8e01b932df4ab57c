//! Gemini to and from Anthropic Messages, its nearest kin (a system
//! prompt apart from the turns; calls as parts of the model's turn, their
//! results as parts of the next user turn). Conversion to and from the
//! other formats goes through Anthropic.
//!
//! Thoughts and thinking are each provider's own (their signatures are
//! only valid there): they are dropped and said so. A Gemini built-in tool
//! (search, code execution) and a part abridge keeps verbatim (files, code,
//! other media) have no counterpart: an error names them.

use serde_json::{Map, Value, json};

use super::{Warnings, unrepresentable};
use crate::conversation::{Conversation, Family, FunctionTool, Tool};
use crate::error::Result;
use crate::message::{
    Arguments, ContentForm, Extra, ImagePart, Message, Part, Role, TextPart, ToolCall, ToolResult,
};

/// A Gemini conversation as Anthropic Messages.
pub(super) fn to_anthropic(conv: &Conversation, w: &mut Warnings) -> Result<Conversation> {
    let to = Family::Anthropic;
    let mut out = Conversation::new(to);
    copy_labels(conv, &mut out);
    for (i, m) in conv.messages.iter().enumerate() {
        w.drop_extra("Gemini turn", &m.extra);
        let role = match &m.role {
            Role::Function => Role::User,
            other => other.clone(),
        };
        let mut results = Vec::new();
        let mut parts = Vec::new();
        for p in &m.parts {
            match p {
                Part::Text(t) => parts.push(text(t, "Gemini part", w)),
                Part::Image(img) => parts.push(image(img, "Gemini image", w)),
                Part::Reasoning(_) => {
                    w.add("dropped Gemini thoughts (their signatures are only valid on Gemini)");
                }
                Part::ToolCall(c) => {
                    w.drop_extra("Gemini function call", &c.extra);
                    w.drop_extra("Gemini function call", &c.function_extra);
                    parts.push(Part::ToolCall(Box::new(ToolCall {
                        id: anthropic_id(&c.id),
                        name: c.name.clone(),
                        arguments: Arguments::Value(c.arguments.to_value()),
                        extra: Extra::new(),
                        function_extra: Extra::new(),
                    })));
                }
                Part::ToolResult(r) => results.push(Part::ToolResult(Box::new(ToolResult {
                    call_id: anthropic_id(&r.call_id),
                    parts: vec![Part::text(r.text())],
                    form: ContentForm::Text,
                    is_error: None,
                    extra: Extra::new(),
                }))),
                Part::Opaque(_) => {
                    return Err(unrepresentable(
                        i,
                        to,
                        "a Gemini part with no Anthropic kin (a file, code, other media)",
                    ));
                }
            }
        }
        // Anthropic wants a turn's results before anything else in it.
        results.extend(parts);
        out.messages.push(Message {
            role,
            parts: results,
            form: ContentForm::Blocks,
            ..Message::default()
        });
    }
    out.tools = match &conv.tools {
        None => None,
        Some(tools) => Some(declarations(tools)?),
    };
    out.extra = envelope_to_anthropic(&conv.extra, w);
    Ok(out)
}

/// An Anthropic conversation as Gemini.
pub(super) fn from_anthropic(conv: &Conversation, w: &mut Warnings) -> Result<Conversation> {
    let to = Family::Gemini;
    let mut out = Conversation::new(to);
    copy_labels(conv, &mut out);
    let mut names: Vec<(&str, &str)> = Vec::new();
    for (i, m) in conv.messages.iter().enumerate() {
        w.drop_extra("message", &m.extra);
        let mut parts = Vec::new();
        for p in &m.parts {
            match p {
                Part::Text(t) => parts.push(text(t, "text block", w)),
                Part::Image(img) => parts.push(image(img, "image block", w)),
                Part::Reasoning(_) => {
                    w.add("dropped thinking (its signatures are only valid on Anthropic)");
                }
                Part::ToolCall(c) => {
                    w.drop_extra("tool_use", &c.extra);
                    names.push((&c.id, &c.name));
                    parts.push(Part::ToolCall(Box::new(ToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: Arguments::Value(c.arguments.to_value()),
                        extra: Extra::new(),
                        function_extra: Extra::new(),
                    })));
                }
                Part::ToolResult(r) => parts.push(result_to_gemini(r, &names, i, w)?),
                Part::Opaque(_) => {
                    return Err(unrepresentable(
                        i,
                        to,
                        "a block with no Gemini kin (a document, a server tool's call or result)",
                    ));
                }
            }
        }
        out.messages.push(Message {
            role: m.role.clone(),
            parts,
            form: ContentForm::Blocks,
            ..Message::default()
        });
    }
    out.tools = tools_to_gemini(conv.tools.as_deref(), w)?;
    out.extra = envelope_to_gemini(&conv.extra, w);
    Ok(out)
}

/// A tool result as Gemini's `functionResponse`: named by its call, its
/// text under `output` (`error` for a failure), as agents write them.
fn result_to_gemini(
    r: &ToolResult,
    names: &[(&str, &str)],
    i: usize,
    w: &mut Warnings,
) -> Result<Part> {
    w.drop_extra("tool_result", &r.extra);
    if r.parts.iter().any(|p| !matches!(p, Part::Text(_))) {
        return Err(unrepresentable(
            i,
            Family::Gemini,
            format!("a tool result with an image or document ({})", r.call_id),
        ));
    }
    let name = names
        .iter()
        .find(|(id, _)| *id == r.call_id)
        .map_or("", |(_, n)| n);
    let key = if r.is_error == Some(true) {
        "error"
    } else {
        "output"
    };
    let mut extra = Extra::new();
    extra.insert("name".into(), json!(name));
    extra.insert("response".into(), json!({ key: null }));
    Ok(Part::ToolResult(Box::new(ToolResult {
        call_id: r.call_id.clone(),
        parts: vec![Part::text(r.text())],
        form: ContentForm::Text,
        is_error: None,
        extra,
    })))
}

/// Function declarations as Gemini's; a server tool has no kin there.
fn tools_to_gemini(tools: Option<&[Tool]>, w: &mut Warnings) -> Result<Option<Vec<Tool>>> {
    let Some(tools) = tools else {
        return Ok(None);
    };
    let tools = tools.iter().map(|t| match t {
        Tool::Function(f) => {
            w.drop_extra("tool", &f.extra);
            Ok(Tool::Function(FunctionTool {
                name: f.name.clone(),
                description: f.description.clone(),
                parameters: f.parameters.clone(),
                extra: Extra::new(),
                function_extra: Extra::new(),
            }))
        }
        Tool::Opaque(_) => Err(unrepresentable(
            0,
            Family::Gemini,
            "a server or non-function tool declaration",
        )),
    });
    tools.collect::<Result<Vec<_>>>().map(Some)
}

fn copy_labels(from: &Conversation, to: &mut Conversation) {
    to.model = from.model.clone();
    to.boundaries = from.boundaries.clone();
    to.label = from.label.clone();
}

fn text(t: &TextPart, what: &str, w: &mut Warnings) -> Part {
    w.drop_extra(what, &t.extra);
    Part::text(t.text.clone())
}

fn image(img: &ImagePart, what: &str, w: &mut Warnings) -> Part {
    w.drop_extra(what, &img.extra);
    w.drop_extra(what, &img.source_extra);
    Part::Image(Box::new(ImagePart {
        source: img.source.clone(),
        source_extra: Extra::new(),
        extra: Extra::new(),
    }))
}

/// A call id Anthropic accepts (`[A-Za-z0-9_-]`): one abridge made up for
/// a Gemini call without its own becomes `gemini_…`.
fn anthropic_id(id: &str) -> String {
    let (prefix, rest) = match id.strip_prefix('\u{e000}') {
        Some(rest) => ("gemini_", rest),
        None => ("", id),
    };
    let clean: String = rest
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{prefix}{clean}")
}

/// Gemini's tool objects as function declarations, one per function.
fn declarations(tools: &[Tool]) -> Result<Vec<Tool>> {
    let mut out = Vec::new();
    for t in tools {
        let declared = match t {
            Tool::Opaque(Value::Object(m)) if m.len() == 1 => m.get("functionDeclarations"),
            _ => None,
        };
        let Some(Value::Array(functions)) = declared else {
            return Err(unrepresentable(
                0,
                Family::Anthropic,
                "a Gemini built-in tool (search, code execution…)",
            ));
        };
        for f in functions {
            let field = |k: &str| f.get(k).cloned();
            out.push(Tool::Function(FunctionTool {
                name: f
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                parameters: field("parametersJsonSchema").or_else(|| field("parameters")),
                extra: Extra::new(),
                function_extra: Extra::new(),
            }));
        }
    }
    Ok(out)
}

/// `generationConfig`'s limits, sampling and stops and `toolConfig`'s
/// mode, in Anthropic's fields.
fn envelope_to_anthropic(extra: &Extra, w: &mut Warnings) -> Extra {
    let mut out = Extra::new();
    let mut dropped = Vec::new();
    for (k, v) in extra {
        match k.as_str() {
            "generationConfig" => {
                let Some(config) = v.as_object() else {
                    continue;
                };
                for (field, value) in config {
                    let to = match field.as_str() {
                        "maxOutputTokens" => "max_tokens",
                        "temperature" => "temperature",
                        "topP" => "top_p",
                        "topK" => "top_k",
                        "stopSequences" => "stop_sequences",
                        _ => {
                            w.add(format!("dropped generationConfig field: {field}"));
                            continue;
                        }
                    };
                    out.insert(to.into(), value.clone());
                }
            }
            "toolConfig" => {
                let mode = v
                    .pointer("/functionCallingConfig/mode")
                    .and_then(Value::as_str);
                let names = v
                    .pointer("/functionCallingConfig/allowedFunctionNames")
                    .and_then(Value::as_array);
                let choice = match (mode, names.map(Vec::as_slice)) {
                    (Some("ANY"), Some([one])) => json!({"type": "tool", "name": one}),
                    (Some("ANY"), _) => json!({"type": "any"}),
                    (Some("NONE"), _) => json!({"type": "none"}),
                    _ => json!({"type": "auto"}),
                };
                out.insert("tool_choice".into(), choice);
            }
            _ => dropped.push(k.as_str()),
        }
    }
    w.dropped_fields(&dropped);
    out
}

/// Anthropic's limits, sampling, stops and `tool_choice` as
/// `generationConfig` and `toolConfig`.
fn envelope_to_gemini(extra: &Extra, w: &mut Warnings) -> Extra {
    let mut config = Map::new();
    let mut out = Extra::new();
    let mut dropped = Vec::new();
    for (k, v) in extra {
        let field = match k.as_str() {
            "max_tokens" => "maxOutputTokens",
            "temperature" => "temperature",
            "top_p" => "topP",
            "top_k" => "topK",
            "stop_sequences" => "stopSequences",
            "tool_choice" => {
                let (mode, name) = match v.get("type").and_then(Value::as_str) {
                    Some("any") => ("ANY", None),
                    Some("none") => ("NONE", None),
                    Some("tool") => ("ANY", v.get("name").cloned()),
                    _ => ("AUTO", None),
                };
                let mut calling = json!({ "mode": mode });
                if let Some(name) = name {
                    calling["allowedFunctionNames"] = json!([name]);
                }
                out.insert(
                    "toolConfig".into(),
                    json!({ "functionCallingConfig": calling }),
                );
                continue;
            }
            _ => {
                dropped.push(k.as_str());
                continue;
            }
        };
        config.insert(field.into(), v.clone());
    }
    if !config.is_empty() {
        out.insert("generationConfig".into(), Value::Object(config));
    }
    w.dropped_fields(&dropped);
    out
}
