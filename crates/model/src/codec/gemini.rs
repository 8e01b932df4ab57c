//! Google Gemini API request bodies (`generateContent`,
//! `streamGenerateContent`): `contents` of `user` and `model` turns made
//! of parts, an optional `systemInstruction`, `tools` of function
//! declarations and built-in tools.
//!
//! A part holds one datum (`text`, `inlineData`, `functionCall`,
//! `functionResponse`…) beside fields any part may carry, among them
//! `thoughtSignature`: it stays on its part, byte for byte, in the part's
//! other fields. Text with `thought: true` is reasoning. An image's inline
//! data is an image; any other datum (files, code execution, other media)
//! is kept verbatim and counted as its JSON.
//!
//! A function call answers to the function response of the same `id`.
//! Gemini lets both leave the id out (a response then answers the call of
//! its name at its place in the turn before): such a call and its
//! response get an id made from the model turn's place, the name and the
//! rank among calls of that name, marked so that it is never written back.

use serde_json::{Map, Value};

use super::util::{envelope, finish_body, kind, object, start_body, with_extra};
use crate::conversation::{Conversation, Format, Tool};
use crate::error::{Error, Result};
use crate::message::{
    Arguments, ContentForm, Extra, ImagePart, ImageSource, Message, Part, Reasoning, ReasoningKind,
    Role, TextPart, ToolCall, ToolResult,
};

/// Leads an id abridge made up (never written back); a wire id that
/// happens to start with it is stored with it doubled.
const MADE_UP: char = '\u{e000}';

/// The fields of a `functionResponse` object abridge does not model but
/// keeps inside it (the part's other fields go beside it).
const RESPONSE_FIELDS: [&str; 4] = ["name", "parts", "willContinue", "scheduling"];

/// Decodes a request body (an object with `contents`).
pub(crate) fn decode_body(v: Value) -> Result<Conversation> {
    let mut map = object(v, &|| "request body".to_owned())?;
    let key_order = map.keys().cloned().collect();
    let mut messages = Vec::new();
    if let Some(system) = map.shift_remove("systemInstruction") {
        messages.push(decode_system(system)?);
    }
    let items = match map.shift_remove("contents") {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(Error::shape(
                "contents",
                format!("an array, found {}", kind(&other)),
            ));
        }
        None => return Err(Error::shape("request body", "a \"contents\" array")),
    };
    messages.extend(decode_contents(items, 0)?);
    Ok(envelope(
        Format::Gemini,
        key_order,
        map,
        messages,
        Tool::Opaque,
    ))
}

/// Decodes items of a `contents` array; error locations and made-up ids
/// count from `first` (the index of the first of them).
pub(crate) fn decode_contents(items: Vec<Value>, first: usize) -> Result<Vec<Message>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| decode_content(item, first + i))
        .collect()
}

fn decode_system(v: Value) -> Result<Message> {
    let at = || "systemInstruction".to_owned();
    // A bare string is accepted by the API as the instruction's text.
    let (parts, form, extra) = match v {
        Value::String(text) => (vec![Part::text(text)], ContentForm::Text, Extra::new()),
        other => {
            let mut map = object(other, &at)?;
            let parts = decode_parts(take_parts(&mut map, &at)?, usize::MAX, "systemInstruction")?;
            (parts, ContentForm::Blocks, map.into())
        }
    };
    Ok(Message {
        role: Role::System,
        parts,
        form,
        extra,
        ..Message::default()
    })
}

fn take_parts(map: &mut Map<String, Value>, at: &dyn Fn() -> String) -> Result<Vec<Value>> {
    match map.shift_remove("parts") {
        Some(Value::Array(parts)) => Ok(parts),
        None => Ok(Vec::new()),
        Some(other) => Err(Error::shape(
            format!("{}.parts", at()),
            format!("an array, found {}", kind(&other)),
        )),
    }
}

/// One turn of `contents`, the `index`-th.
fn decode_content(v: Value, index: usize) -> Result<Message> {
    let at = || format!("contents[{index}]");
    let mut map = object(v, &at)?;
    let role = match map.shift_remove("role") {
        // The API takes a turn without a role as the user's.
        None => Role::User,
        Some(Value::String(r)) => match r.as_str() {
            "model" => Role::Assistant,
            "user" => Role::User,
            other => Role::parse(other),
        },
        Some(other) => {
            return Err(Error::shape(
                format!("{}.role", at()),
                format!("a string, found {}", kind(&other)),
            ));
        }
    };
    let parts = take_parts(&mut map, &at)?;
    // A response answers the turn before: ids are made from its place.
    let turn = match role {
        Role::Assistant => index,
        _ => index.saturating_sub(1),
    };
    let parts = decode_parts(parts, turn, &at())?;
    Ok(Message {
        role,
        parts,
        form: ContentForm::Blocks,
        extra: map.into(),
        ..Message::default()
    })
}

fn decode_parts(items: Vec<Value>, turn: usize, at: &str) -> Result<Vec<Part>> {
    let mut ranks: Vec<(String, usize)> = Vec::new();
    let mut rank = |name: &str| -> usize {
        match ranks.iter_mut().find(|(n, _)| n == name) {
            Some((_, k)) => {
                *k += 1;
                *k
            }
            None => {
                ranks.push((name.to_owned(), 0));
                0
            }
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (j, item) in items.into_iter().enumerate() {
        let here = || format!("{at}.parts[{j}]");
        let Value::Object(mut map) = item else {
            return Err(Error::shape(
                here(),
                format!("an object, found {}", kind(&item)),
            ));
        };
        let part = if let Some(Value::String(text)) = map.get("text").cloned() {
            map.shift_remove("text");
            if map.get("thought") == Some(&Value::Bool(true)) {
                map.shift_remove("thought");
                let signature = match map.shift_remove("thoughtSignature") {
                    Some(Value::String(s)) => Some(s),
                    Some(other) => {
                        map.insert("thoughtSignature".into(), other);
                        None
                    }
                    None => None,
                };
                Part::Reasoning(Box::new(Reasoning {
                    text,
                    signature,
                    kind: ReasoningKind::Thought,
                    extra: map.into(),
                }))
            } else {
                Part::Text(TextPart {
                    text,
                    extra: map.into(),
                })
            }
        } else if let Some(Value::Object(call)) = map.get("functionCall").cloned() {
            map.shift_remove("functionCall");
            let mut call = call;
            let name = match call.shift_remove("name") {
                Some(Value::String(n)) => n,
                _ => {
                    return Err(Error::shape(
                        format!("{}.functionCall", here()),
                        "a \"name\"",
                    ));
                }
            };
            let id = wire_id(call.shift_remove("id"), turn, &name, &mut rank);
            let args = call
                .shift_remove("args")
                .unwrap_or(Value::Object(Map::new()));
            Part::ToolCall(Box::new(ToolCall {
                id,
                name,
                arguments: Arguments::Value(args),
                extra: map.into(),
                function_extra: call.into(),
            }))
        } else if let Some(Value::Object(response)) = map.get("functionResponse").cloned() {
            map.shift_remove("functionResponse");
            Part::ToolResult(Box::new(decode_response(response, map, turn, &mut rank)))
        } else if let Some(image) = image_of(&map) {
            let mut data = match map.shift_remove("inlineData") {
                Some(Value::Object(data)) => data,
                _ => Map::new(),
            };
            data.shift_remove("mimeType");
            data.shift_remove("data");
            Part::Image(Box::new(ImagePart {
                source: image,
                source_extra: data.into(),
                extra: map.into(),
            }))
        } else {
            Part::opaque(Value::Object(map))
        };
        out.push(part);
    }
    Ok(out)
}

/// The id a call or response goes by: its own (escaped when it looks made
/// up), or one made from its turn, name and rank among its name's.
fn wire_id(
    id: Option<Value>,
    turn: usize,
    name: &str,
    rank: &mut impl FnMut(&str) -> usize,
) -> String {
    match id {
        Some(Value::String(id)) if id.starts_with(MADE_UP) => format!("{MADE_UP}{id}"),
        Some(Value::String(id)) => id,
        _ => format!("{MADE_UP}{turn}.{}.{name}", rank(name)),
    }
}

/// The id to write for `id`: none when abridge made it up.
fn id_on_wire(id: &str) -> Option<&str> {
    match id.strip_prefix(MADE_UP) {
        Some(rest) if rest.starts_with(MADE_UP) => Some(rest),
        Some(_) => None,
        None => Some(id),
    }
}

/// Whether a result decoded from a Gemini `functionResponse` answered
/// with an error (`{"error": "…"}`, as Gemini CLI reports a failed call):
/// its shape, kept in `extra`, holds only that key.
pub fn answered_with_error(r: &ToolResult) -> bool {
    r.extra
        .get("response")
        .and_then(Value::as_object)
        .is_some_and(|shape| shape.len() == 1 && shape.contains_key("error"))
}

/// A `functionResponse`: its `response` is the result's text — the string
/// when it is an object of one string (`{"output": "…"}`, as agents write
/// it), its JSON otherwise — and the object's shape is kept to write it back.
fn decode_response(
    mut response: Map<String, Value>,
    part: Map<String, Value>,
    turn: usize,
    rank: &mut impl FnMut(&str) -> usize,
) -> ToolResult {
    let name = response
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let call_id = wire_id(response.shift_remove("id"), turn, &name, rank);
    let body = response.shift_remove("response").unwrap_or(Value::Null);
    let mut extra = part;
    for (k, v) in response {
        extra.insert(k, v);
    }
    let (text, form) = match &body {
        Value::Object(m) if m.len() == 1 && m.values().all(Value::is_string) => {
            let (shape, text): (Map<String, Value>, String) = m
                .iter()
                .map(|(k, v)| {
                    (
                        (k.clone(), Value::Null),
                        v.as_str().unwrap_or_default().to_owned(),
                    )
                })
                .unzip();
            extra.insert("response".into(), Value::Object(shape));
            (text, ContentForm::Text)
        }
        other => (other.to_string(), ContentForm::Blocks),
    };
    ToolResult {
        call_id,
        parts: vec![Part::text(text)],
        form,
        is_error: None,
        extra: extra.into(),
    }
}

/// The image an `inlineData` part holds, when its type is an image's.
fn image_of(part: &Map<String, Value>) -> Option<ImageSource> {
    let data = part.get("inlineData")?.as_object()?;
    let media_type = data.get("mimeType")?.as_str()?;
    if !media_type.starts_with("image/") {
        return None;
    }
    Some(ImageSource::Base64 {
        media_type: media_type.to_owned(),
        data: data.get("data")?.as_str()?.to_owned(),
    })
}

/// Encodes a conversation as a request body.
pub(crate) fn encode_body(conv: &Conversation) -> Result<Value> {
    let mut map = start_body(conv);
    // The model is named in the URL; a body names it only when it came so.
    if !conv.key_order.iter().any(|k| k == "model") {
        map.shift_remove("model");
    }
    let lead = conv.wire_offset();
    if lead > 0 {
        map.insert(
            "systemInstruction".into(),
            encode_system(&conv.messages[..lead])?,
        );
    }
    let contents = encode_contents(&conv.messages[lead..], lead)?;
    Ok(finish_body(map, "contents", contents, conv, encode_tool))
}

/// Encodes turns of `contents`; error locations count from `first`. A
/// response that does not say its function's name (one abridge wrote)
/// takes its call's, as the API requires one.
pub(crate) fn encode_contents(messages: &[Message], first: usize) -> Result<Vec<Value>> {
    let mut names: Vec<(&str, &str)> = Vec::new();
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        names.extend(m.tool_calls().map(|c| (c.id.as_str(), c.name.as_str())));
        out.push(encode_content(m, first + i, &names)?);
    }
    Ok(out)
}

fn encode_system(messages: &[Message]) -> Result<Value> {
    if let [one] = messages
        && one.form == ContentForm::Text
        && let [Part::Text(t)] = one.parts.as_slice()
        && t.extra.is_empty()
        && one.extra.is_empty()
    {
        return Ok(Value::String(t.text.clone()));
    }
    let mut parts = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        for p in &m.parts {
            parts.push(encode_part(p, i, &[])?);
        }
    }
    let extra = messages
        .first()
        .map(|m| m.extra.clone())
        .unwrap_or_default();
    Ok(with_extra(vec![("parts", Value::Array(parts))], &extra))
}

/// Encodes one turn of `contents`; `names` are the calls' names by id.
fn encode_content(m: &Message, index: usize, names: &[(&str, &str)]) -> Result<Value> {
    let role = match &m.role {
        Role::Assistant => "model",
        Role::User => "user",
        Role::System => {
            return Err(Error::Unrepresentable {
                index,
                target: "Gemini",
                reason: "a system message inside the turns (only the leading ones are the \
                         systemInstruction)"
                    .into(),
            });
        }
        other => other.as_str(),
    };
    let parts = m
        .parts
        .iter()
        .map(|p| encode_part(p, index, names))
        .collect::<Result<Vec<_>>>()?;
    // Keys in the order Google's SDKs (and so Gemini CLI) write them, so
    // that a turn written back is the client's bytes.
    Ok(with_extra(
        vec![
            ("parts", Value::Array(parts)),
            ("role", Value::String(role.to_owned())),
        ],
        &m.extra,
    ))
}

fn encode_part(p: &Part, index: usize, names: &[(&str, &str)]) -> Result<Value> {
    Ok(match p {
        Part::Text(t) => with_extra(vec![("text", Value::String(t.text.clone()))], &t.extra),
        Part::Reasoning(r) if r.kind == ReasoningKind::Thought => {
            let mut fields = vec![
                ("text", Value::String(r.text.clone())),
                ("thought", Value::Bool(true)),
            ];
            if let Some(s) = &r.signature {
                fields.push(("thoughtSignature", Value::String(s.clone())));
            }
            with_extra(fields, &r.extra)
        }
        Part::Image(img) => {
            let data = match &img.source {
                ImageSource::Base64 { media_type, data } => with_extra(
                    vec![
                        ("mimeType", Value::String(media_type.clone())),
                        ("data", Value::String(data.clone())),
                    ],
                    &img.source_extra,
                ),
                ImageSource::Url(url) => {
                    let data = vec![("fileUri", Value::String(url.clone()))];
                    let file = with_extra(data, &img.source_extra);
                    return Ok(with_extra(vec![("fileData", file)], &img.extra));
                }
            };
            with_extra(vec![("inlineData", data)], &img.extra)
        }
        Part::ToolCall(c) => {
            let args = match &c.arguments {
                Arguments::Value(v) => v.clone(),
                Arguments::Json(s) => {
                    serde_json::from_str(s).map_err(|e| Error::Unrepresentable {
                        index,
                        target: "Gemini",
                        reason: format!("arguments of tool call {} are not valid JSON ({e})", c.id),
                    })?
                }
                Arguments::Custom(_) => {
                    return Err(Error::Unrepresentable {
                        index,
                        target: "Gemini",
                        reason: format!("custom (free-form) tool call {}", c.id),
                    });
                }
            };
            let mut fields = Vec::new();
            if let Some(id) = id_on_wire(&c.id) {
                fields.push(("id", Value::String(id.to_owned())));
            }
            fields.push(("args", args));
            fields.push(("name", Value::String(c.name.clone())));
            let call = with_extra(fields, &c.function_extra);
            with_extra(vec![("functionCall", call)], &c.extra)
        }
        Part::Reasoning(_) => {
            return Err(Error::Unrepresentable {
                index,
                target: "Gemini",
                reason: "another API's reasoning (convert the conversation first)".into(),
            });
        }
        Part::ToolResult(r) => {
            let name = names
                .iter()
                .find(|(id, _)| *id == r.call_id)
                .map(|(_, n)| *n);
            encode_response(r, name)
        }
        Part::Opaque(v) => (**v).clone(),
    })
}

/// A `functionResponse` part: the result's text back in the shape it came
/// in (`{"output": …}`), or its JSON; text that is no JSON object (a
/// clipped result's placeholder) as `{"output": …}`; named as its call.
fn encode_response(r: &ToolResult, call_name: Option<&str>) -> Value {
    let text = r.text();
    let mut inner = Map::new();
    let mut part = Map::new();
    let mut shape = None;
    for (k, v) in &r.extra {
        if k == "response" {
            shape = Some(v);
        } else if RESPONSE_FIELDS.contains(&k.as_str()) {
            inner.insert(k.clone(), v.clone());
        } else {
            part.insert(k.clone(), v.clone());
        }
    }
    let key = shape
        .and_then(Value::as_object)
        .and_then(|m| m.keys().next().cloned());
    let response = match key {
        Some(key) => Value::Object(Map::from_iter([(key, Value::String(text.into_owned()))])),
        None => match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => v,
            _ => Value::Object(Map::from_iter([(
                "output".to_owned(),
                Value::String(text.into_owned()),
            )])),
        },
    };
    let mut fields = Map::new();
    match (inner.shift_remove("name"), call_name) {
        (Some(name), _) => {
            fields.insert("name".into(), name);
        }
        (None, Some(name)) => {
            fields.insert("name".into(), Value::String(name.to_owned()));
        }
        (None, None) => {}
    }
    fields.insert("response".into(), response);
    if let Some(id) = id_on_wire(&r.call_id) {
        fields.insert("id".into(), Value::String(id.to_owned()));
    }
    fields.extend(inner);
    let mut out = Map::new();
    out.insert("functionResponse".into(), Value::Object(fields));
    out.extend(part);
    Value::Object(out)
}

fn encode_tool(t: &Tool) -> Value {
    match t {
        Tool::Opaque(v) => v.clone(),
        Tool::Function(f) => {
            let mut fields = vec![("name", Value::String(f.name.clone()))];
            if let Some(d) = &f.description {
                fields.push(("description", Value::String(d.clone())));
            }
            if let Some(p) = &f.parameters {
                // Standard JSON Schema, as Gemini CLI declares its tools.
                fields.push(("parametersJsonSchema", p.clone()));
            }
            let declaration = with_extra(fields, &f.function_extra);
            with_extra(
                vec![("functionDeclarations", Value::Array(vec![declaration]))],
                &f.extra,
            )
        }
    }
}
