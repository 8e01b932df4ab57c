//! OpenAI Responses API request bodies: `instructions`, `input` items and
//! flat function tools.
//!
//! Each input item is one [`Message`], so item `i` of `input` is message `i`
//! after the instructions, as in the other wire formats:
//!
//! - `message` items (and the type-less "easy" messages) keep their role;
//!   `input_text`/`output_text` parts are text, `input_image` parts with an
//!   `image_url` are images, other parts stay verbatim;
//! - `function_call` and `custom_tool_call` items are assistant messages with
//!   one tool call (`call_id` is its id); `function_call_output` and
//!   `custom_tool_call_output` items are tool messages with its result;
//! - every other item (reasoning with its `encrypted_content`, hosted and
//!   local tool calls and their outputs, MCP items, compaction items,
//!   `item_reference`) is kept byte for byte as one opaque part: assistant
//!   side items as assistant messages, outputs as tool messages.
//!
//! The model's turn spans several items (reasoning, text, calls): the items
//! after its first are marked [`continues_turn`](crate::Meta::continues_turn)
//! so that the turn stays one iteration. `instructions` is the leading
//! system message, marked [`instructions`](crate::Meta::instructions).
//!
//! Fields are written back in the order the item had them: modelled fields
//! leave a `null` slot in the extras where they were, filled on encoding.

use serde_json::{Map, Value};

use super::util::{
    Object, decode_content, encode_content, envelope, finish_body, name_and_description,
    not_content, object, start_body, take_opt_str,
};
use crate::conversation::{Conversation, Format, FunctionTool, Tool, Wire};
use crate::error::{Error, Result};
use crate::message::{
    Arguments, ContentForm, Extra, ImagePart, ImageSource, Message, Part, Role, TextPart, ToolCall,
    ToolResult,
};

/// Item types only the Responses API uses (for format detection).
pub(crate) const TELLTALE_ITEMS: [&str; 6] = [
    "function_call",
    "function_call_output",
    "reasoning",
    "custom_tool_call",
    "custom_tool_call_output",
    "item_reference",
];

/// Decodes a request body (an object with `input`).
pub(crate) fn decode_body(v: Value) -> Result<Conversation> {
    let mut map = object(v, &|| "request body".to_owned())?;
    let key_order = map.keys().cloned().collect();
    let mut messages = Vec::new();
    if let Some(text) = take_opt_str(&mut map, "instructions") {
        let mut m = Message::text(Role::System, text);
        m.meta.instructions = true;
        messages.push(m);
    }
    match map.shift_remove("input") {
        Some(Value::String(text)) => messages.push(Message::text(Role::User, text)),
        Some(Value::Array(items)) => messages.extend(decode_items(items, 0)?),
        Some(other) => {
            return Err(Error::shape(
                "input",
                format!(
                    "a string or an array of items, found {}",
                    super::util::kind(&other)
                ),
            ));
        }
        None => return Err(Error::shape("request body", "an \"input\" field")),
    }
    Ok(envelope(
        Format::Responses,
        key_order,
        map,
        messages,
        decode_tool,
    ))
}

/// Decodes input items; error locations count from `first`. An item of the
/// model's side right after another continues its turn; the first item is
/// taken to open one (items are appended at a turn's boundary).
pub(crate) fn decode_items(items: Vec<Value>, first: usize) -> Result<Vec<Message>> {
    let mut out: Vec<Message> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let mut m = decode_item(item, &|| format!("input[{}]", first + i))?;
        m.meta.continues_turn = continues_turn(out.last(), &m);
        out.push(m);
    }
    Ok(out)
}

/// Whether a Responses item `next`, after `prev`, continues the model's
/// turn: an item of the model's side right after another. For a loop that
/// appends items one by one.
pub fn continues_turn(prev: Option<&Message>, next: &Message) -> bool {
    next.role == Role::Assistant && prev.is_some_and(|p| p.role == Role::Assistant)
}

/// A function call (JSON `arguments`) or a custom tool's call (free-form
/// `input`); one without its input is kept verbatim.
fn decode_call(mut map: Object, function: bool) -> Message {
    let input = if function { "arguments" } else { "input" };
    if !map.get(input).is_some_and(Value::is_string) {
        return opaque(map, Role::Assistant);
    }
    let id = take_slot_str(&mut map, "call_id");
    let name = take_slot_str(&mut map, "name");
    let text = take_slot_str(&mut map, input);
    let arguments = if function {
        Arguments::Json(text)
    } else {
        Arguments::Custom(text)
    };
    Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(Box::new(ToolCall {
            id,
            name,
            arguments,
            extra: Extra::new(),
            function_extra: Extra::new(),
        }))],
        form: ContentForm::Absent,
        extra: map.into(),
        ..Message::default()
    }
}

/// Decodes one input item.
pub(crate) fn decode_item(v: Value, at: &dyn Fn() -> String) -> Result<Message> {
    let mut map = object(v, at)?;
    let ty = map.get("type").and_then(Value::as_str).map(str::to_owned);
    let str_at = |map: &Object, k: &str| map.get(k).is_some_and(Value::is_string);
    match ty.as_deref() {
        None | Some("message") if str_at(&map, "role") => {
            let role = Role::parse(&take_slot_str(&mut map, "role"));
            let content = map.get_mut("content").map(Value::take);
            let (parts, form) = decode_content(content, at, &decode_part)?;
            Ok(Message {
                role,
                parts,
                form,
                extra: map.into(),
                ..Message::default()
            })
        }
        Some(kind @ ("function_call" | "custom_tool_call"))
            if str_at(&map, "call_id") && str_at(&map, "name") =>
        {
            Ok(decode_call(map, kind == "function_call"))
        }
        Some("function_call_output" | "custom_tool_call_output")
            if str_at(&map, "call_id")
                && map
                    .get("output")
                    .is_some_and(|o| o.is_string() || o.is_array()) =>
        {
            let call_id = take_slot_str(&mut map, "call_id");
            let output = map.get_mut("output").map(Value::take);
            let at_output = || format!("{}.output", at());
            let (parts, form) = decode_content(output, &at_output, &decode_part)?;
            Ok(Message {
                role: Role::Tool,
                parts: vec![Part::ToolResult(Box::new(ToolResult {
                    call_id,
                    parts,
                    form,
                    is_error: None,
                    extra: Extra::new(),
                }))],
                form: ContentForm::Absent,
                extra: map.into(),
                ..Message::default()
            })
        }
        Some(t) if t.ends_with("_output") || t == "mcp_approval_response" => {
            Ok(opaque(map, Role::Tool))
        }
        Some("item_reference") => Ok(opaque(map, Role::Other("item_reference".into()))),
        _ => Ok(opaque(map, Role::Assistant)),
    }
}

/// An item kept verbatim as the one part of a message of `role`.
fn opaque(map: Map<String, Value>, role: Role) -> Message {
    Message {
        role,
        parts: vec![Part::opaque(Value::Object(map))],
        form: ContentForm::Absent,
        ..Message::default()
    }
}

/// Takes a string field known to be there, leaving a `null` slot in its place.
fn take_slot_str(map: &mut Object, key: &str) -> String {
    match map.get_mut(key).map(Value::take) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    }
}

/// Decodes a content part of a message or a tool output.
fn decode_part(v: Value, _at: &dyn Fn() -> String) -> Result<Part> {
    let Value::Object(mut map) = v else {
        return Ok(Part::opaque(v));
    };
    let ty = map.get("type").and_then(Value::as_str).unwrap_or("");
    Ok(match ty {
        "input_text" | "output_text" if map.get("text").is_some_and(Value::is_string) => {
            let text = take_slot_str(&mut map, "text");
            Part::Text(TextPart {
                text,
                extra: map.into(),
            })
        }
        "input_image" if map.get("image_url").is_some_and(Value::is_string) => {
            let url = take_slot_str(&mut map, "image_url");
            Part::Image(Box::new(ImagePart {
                source: ImageSource::Url(url),
                source_extra: Extra::new(),
                extra: map.into(),
            }))
        }
        _ => Part::opaque(Value::Object(map)),
    })
}

fn decode_tool(v: Value) -> Tool {
    let Value::Object(mut map) = v else {
        return Tool::Opaque(v);
    };
    let is_function = map.get("type").and_then(Value::as_str) == Some("function");
    if !is_function || !map.get("name").is_some_and(Value::is_string) {
        return Tool::Opaque(Value::Object(map));
    }
    let name = take_slot_str(&mut map, "name");
    let description = map
        .get("description")
        .is_some_and(Value::is_string)
        .then(|| take_slot_str(&mut map, "description"));
    let parameters = map.get_mut("parameters").map(Value::take);
    Tool::Function(FunctionTool {
        name,
        description,
        parameters,
        extra: map.into(),
        function_extra: Extra::new(),
    })
}

/// Encodes a conversation decoded from (or converted to) the Responses API.
pub(crate) fn encode_body(conv: &Conversation) -> Result<Value> {
    let mut map = start_body(conv);
    let lead = conv.wire_offset();
    if lead > 0 {
        let text: Vec<_> = conv.messages[..lead]
            .iter()
            .map(Message::text_content)
            .collect();
        map.insert("instructions".into(), Value::String(text.join("\n\n")));
    }
    let items = conv.messages[lead..]
        .iter()
        .enumerate()
        .map(|(i, m)| encode_item(m, lead + i))
        .collect::<Result<Vec<_>>>()?;
    Ok(finish_body(
        map,
        Wire::Responses.history_key(),
        items,
        conv,
        encode_tool,
    ))
}

/// Encodes one message as an input item.
pub(crate) fn encode_item(m: &Message, index: usize) -> Result<Value> {
    match (m.parts.as_slice(), m.form) {
        ([Part::Opaque(v)], ContentForm::Absent) if m.extra.is_empty() => Ok((**v).clone()),
        ([Part::ToolCall(c)], ContentForm::Absent) if m.role == Role::Assistant => {
            let (kind, key, text) = match &c.arguments {
                Arguments::Json(s) => ("function_call", "arguments", s.clone()),
                Arguments::Value(v) => ("function_call", "arguments", v.to_string()),
                Arguments::Custom(s) => ("custom_tool_call", "input", s.clone()),
            };
            let fields = vec![
                ("type", Value::String(kind.into())),
                ("name", Value::String(c.name.clone())),
                (key, Value::String(text)),
                ("call_id", Value::String(c.id.clone())),
            ];
            Ok(fill(&m.extra, fields))
        }
        ([Part::ToolResult(r)], ContentForm::Absent) if m.role == Role::Tool => {
            let parts: Vec<&Part> = r.parts.iter().collect();
            let output = encode_content(&parts, r.form, &|p| encode_part(p, "input_text", index))?
                .unwrap_or_else(|| Value::String(String::new()));
            let fields = vec![
                ("type", Value::String("function_call_output".into())),
                ("call_id", Value::String(r.call_id.clone())),
                ("output", output),
            ];
            Ok(fill(&m.extra, fields))
        }
        _ => {
            if m.has_tool_calls() || m.has_tool_results() {
                return Err(Error::Unrepresentable {
                    index,
                    target: "the Responses API",
                    reason: "a tool call or result must be an item of its own".into(),
                });
            }
            let text_type = if m.role == Role::Assistant {
                "output_text"
            } else {
                "input_text"
            };
            let parts: Vec<&Part> = m.parts.iter().collect();
            let mut fields = vec![("role", Value::String(m.role.as_str().into()))];
            if let Some(content) =
                encode_content(&parts, m.form, &|p| encode_part(p, text_type, index))?
            {
                fields.push(("content", content));
            }
            Ok(fill(&m.extra, fields))
        }
    }
}

/// Encodes a content part; text and images without a `type` get the role's.
fn encode_part(p: &Part, text_type: &str, index: usize) -> Result<Value> {
    Ok(match p {
        Part::Text(t) => fill(
            &t.extra,
            vec![
                ("type", Value::String(text_type.into())),
                ("text", Value::String(t.text.clone())),
            ],
        ),
        Part::Image(img) => {
            let url = img.source.to_url();
            let mut extra = img.source_extra.clone();
            extra.extend(img.extra.clone());
            fill(
                &extra,
                vec![
                    ("type", Value::String("input_image".into())),
                    ("image_url", Value::String(url)),
                ],
            )
        }
        Part::Opaque(v) => (**v).clone(),
        Part::ToolCall(_) | Part::ToolResult(_) | Part::Reasoning(_) => {
            return Err(not_content(index, "the Responses API"));
        }
    })
}

fn encode_tool(t: &Tool) -> Value {
    match t {
        Tool::Opaque(v) => v.clone(),
        Tool::Function(f) => {
            let mut fields = vec![("type", Value::String("function".into()))];
            fields.extend(name_and_description(f));
            if let Some(p) = &f.parameters {
                fields.push(("parameters", p.clone()));
            }
            fill(&f.extra, fields)
        }
    }
}

/// An object with the extras' keys in their order, each modelled field in
/// its slot, and modelled fields the extras have no slot for after them.
/// A `type` the item had is kept; one it lacks is written first.
fn fill(extra: &Object, fields: Vec<(&str, Value)>) -> Value {
    let mut fields: Vec<(&str, Option<Value>)> =
        fields.into_iter().map(|(k, v)| (k, Some(v))).collect();
    let mut out = Map::with_capacity(extra.len() + fields.len());
    if let Some((_, ty)) = fields.iter_mut().find(|(k, _)| *k == "type")
        && let Some(ty) = ty.take()
        && !extra.contains_key("type")
    {
        out.insert("type".into(), ty);
    }
    for (k, v) in extra {
        let slot = fields.iter_mut().find(|(name, _)| name == k);
        let value = slot
            .and_then(|(_, v)| v.take())
            .unwrap_or_else(|| v.clone());
        out.insert(k.clone(), value);
    }
    for (k, v) in fields {
        if let Some(v) = v {
            out.insert(k.to_owned(), v);
        }
    }
    Value::Object(out)
}
