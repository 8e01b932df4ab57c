//! Small helpers for taking fields out of JSON objects with precise errors.

use serde_json::{Map, Value};

use crate::conversation::{Conversation, Format, FunctionTool, Tool};
use crate::error::{Error, Result};
use crate::message::{ContentForm, Message, Part, TextPart};

/// A JSON object being taken apart or put together (what is left of one
/// becomes a value's [`Extra`](crate::message::Extra)).
pub(crate) type Object = Map<String, Value>;

/// Turns a value into an object or says where it was not one.
pub(crate) fn object(v: Value, at: &dyn Fn() -> String) -> Result<Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(Error::shape(
            at(),
            format!("a JSON object, found {}", kind(&other)),
        )),
    }
}

/// Removes a required string field.
pub(crate) fn take_str(map: &mut Object, key: &str, at: &dyn Fn() -> String) -> Result<String> {
    match map.shift_remove(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(Error::shape(
            format!("{}.{key}", at()),
            format!("a string, found {}", kind(&other)),
        )),
        None => Err(Error::shape(at(), format!("a \"{key}\" field"))),
    }
}

/// Removes an optional string field; a present non-string is left in place.
pub(crate) fn take_opt_str(map: &mut Object, key: &str) -> Option<String> {
    match map.get(key) {
        Some(Value::String(_)) => match map.shift_remove(key) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// Short name of a JSON value's type, for error messages ("an array", "null"…).
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A decoder of one content part, given the part and its location.
pub(crate) type PartDecoder = dyn Fn(Value, &dyn Fn() -> String) -> Result<Part>;

/// Decodes a `content` value with a part decoder for the array form.
pub(crate) fn decode_content(
    v: Option<Value>,
    at: &dyn Fn() -> String,
    part: &PartDecoder,
) -> Result<(Vec<Part>, ContentForm)> {
    match v {
        None => Ok((Vec::new(), ContentForm::Absent)),
        Some(Value::Null) => Ok((Vec::new(), ContentForm::Null)),
        Some(Value::String(s)) => Ok((vec![Part::text(s)], ContentForm::Text)),
        Some(Value::Array(items)) => {
            let mut parts = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                let at_i = || format!("{}.content[{i}]", at());
                parts.push(part(item, &at_i)?);
            }
            Ok((parts, ContentForm::Blocks))
        }
        Some(other) => Err(Error::shape(
            format!("{}.content", at()),
            format!("a string, an array or null, found {}", kind(&other)),
        )),
    }
}

/// Decodes a message that is `role`, `content` (parts by `part`) and
/// other fields kept as extras.
pub(crate) fn decode_role_content(
    v: Value,
    at: &dyn Fn() -> String,
    part: &PartDecoder,
) -> Result<Message> {
    let mut map = object(v, at)?;
    let role = crate::message::Role::parse(&take_str(&mut map, "role", at)?);
    let (parts, form) = decode_content(map.shift_remove("content"), at, part)?;
    Ok(Message {
        role,
        parts,
        form,
        extra: map.into(),
        ..Message::default()
    })
}

/// Encodes parts in the content form they came in, when that still fits.
///
/// Returns `None` for an absent `content` key.
pub(crate) fn encode_content(
    parts: &[&Part],
    form: ContentForm,
    part: &dyn Fn(&Part) -> Result<Value>,
) -> Result<Option<Value>> {
    if parts.is_empty() {
        return Ok(match form {
            ContentForm::Absent => None,
            ContentForm::Null => Some(Value::Null),
            ContentForm::Text => Some(Value::String(String::new())),
            ContentForm::Blocks => Some(Value::Array(Vec::new())),
        });
    }
    if form != ContentForm::Blocks
        && let [Part::Text(t)] = parts
        && t.extra.is_empty()
    {
        return Ok(Some(Value::String(t.text.clone())));
    }
    let items = parts.iter().map(|p| part(p)).collect::<Result<Vec<_>>>()?;
    Ok(Some(Value::Array(items)))
}

/// Builds an object from leading fields followed by the extras.
/// `{"type": "text", "text": …}` plus the part's other fields: the same
/// block in both APIs.
pub(crate) fn text_block(t: &TextPart) -> Value {
    with_extra(
        vec![
            ("type", Value::String("text".into())),
            ("text", Value::String(t.text.clone())),
        ],
        &t.extra,
    )
}

pub(crate) fn with_extra(fields: Vec<(&str, Value)>, extra: &Object) -> Value {
    let mut map = Map::with_capacity(fields.len() + extra.len());
    for (k, v) in fields {
        map.insert(k.to_owned(), v);
    }
    for (k, v) in extra {
        map.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(map)
}

/// Removes the `messages` array of a request body.
pub(crate) fn take_messages(map: &mut Object) -> Result<Vec<Value>> {
    match map.shift_remove("messages") {
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(Error::shape(
            "messages",
            format!("an array, found {}", kind(&other)),
        )),
        None => Err(Error::shape("request body", "a \"messages\" array")),
    }
}

/// A conversation from decoded messages and the rest of the body: `model`,
/// `tools` (each decoded with `tool`) and every other field as extra.
pub(crate) fn envelope(
    format: Format,
    key_order: Vec<String>,
    mut map: Object,
    messages: Vec<Message>,
    tool: fn(Value) -> Tool,
) -> Conversation {
    let model = take_opt_str(&mut map, "model");
    let tools = match map.shift_remove("tools") {
        Some(Value::Array(items)) => Some(items.into_iter().map(tool).collect()),
        Some(other) => {
            map.insert("tools".into(), other);
            None
        }
        None => None,
    };
    Conversation {
        format,
        family: format.family(),
        model,
        tools,
        messages,
        extra: map.into(),
        boundaries: Vec::new(),
        label: None,
        key_order,
    }
}

/// A function tool's `name` and `description`, the same in both APIs.
pub(crate) fn name_and_description(f: &FunctionTool) -> Vec<(&'static str, Value)> {
    let mut fields = vec![("name", Value::String(f.name.clone()))];
    if let Some(d) = &f.description {
        fields.push(("description", Value::String(d.clone())));
    }
    fields
}

/// Starts a request body: `model` first, as the APIs document it.
pub(crate) fn start_body(conv: &Conversation) -> Object {
    let mut map = Object::new();
    if let Some(model) = &conv.model {
        map.insert("model".into(), Value::String(model.clone()));
    }
    map
}

/// Finishes a request body: the messages under `key` (`messages`, or the
/// Responses API's `input`), then `tools` when declared, then the other
/// envelope fields (those already set win) — and puts the keys in the order
/// the decoded body had them, keys it did not have last.
pub(crate) fn finish_body(
    mut map: Object,
    key: &str,
    messages: Vec<Value>,
    conv: &Conversation,
    encode_tool: fn(&Tool) -> Value,
) -> Value {
    map.insert(key.into(), Value::Array(messages));
    if let Some(tools) = &conv.tools {
        map.insert("tools".into(), tools.iter().map(encode_tool).collect());
    }
    for (k, v) in &conv.extra {
        map.entry(k.clone()).or_insert_with(|| v.clone());
    }
    if conv.key_order.is_empty() {
        return Value::Object(map);
    }
    let mut ordered = Object::with_capacity(map.len());
    for k in &conv.key_order {
        if let Some((k, v)) = map.remove_entry(k) {
            ordered.insert(k, v);
        }
    }
    ordered.extend(map);
    Value::Object(ordered)
}

/// A tool call, result or reasoning where only content parts may be.
pub(crate) fn not_content(index: usize, target: &'static str) -> Error {
    Error::Unrepresentable {
        index,
        target,
        reason: "tool calls, results and reasoning cannot be content parts".into(),
    }
}
