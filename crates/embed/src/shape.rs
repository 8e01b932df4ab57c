//! Reading messages in whatever shape a front end holds them, and writing
//! them back in that shape.

use abridge_model::{Conversation, Format, Wire, decode_value, detect, encode, json_kind};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// How the messages were given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A request body (an object with `messages`, or the Responses API's `input`).
    Body,
    /// A bare array of messages (or of Responses input items).
    List,
}

/// Messages read from a front end, with the shape to give them back in.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// The conversation.
    pub conversation: Conversation,
    /// How it was given.
    pub shape: Shape,
}

impl Decoded {
    /// Reads a body or a bare list of messages; `format` when known, else detected.
    pub fn read(value: Value, format: Option<Wire>) -> Result<Self> {
        let (shape, body) = match value {
            Value::Object(body) if body.get("messages").is_some_and(Value::is_array) => {
                (Shape::Body, Value::Object(body))
            }
            // Bodies whose history is not `messages`: the Responses API's
            // `input`, Gemini's `contents`.
            Value::Object(body) if body.contains_key("input") || body.contains_key("contents") => {
                let own = match body.contains_key("input") {
                    true => Format::Responses,
                    false => Format::Gemini,
                };
                let conversation = decode_value(Value::Object(body), own)?.remove(0);
                return Ok(Decoded {
                    conversation,
                    shape: Shape::Body,
                });
            }
            Value::Object(_) => {
                return Err(not_messages(
                    "an object without a `messages` array, an `input` or `contents`",
                ));
            }
            Value::Array(items) => {
                let list = Value::Array(items);
                // Lists whose items carry their own decoding: the AI SDK's
                // messages, Responses input items and Gemini contents.
                let own = match format {
                    Some(w @ (Wire::AiSdk | Wire::Responses | Wire::Gemini)) => Some(w.format()),
                    Some(_) => None,
                    None => detect(&list).ok().filter(|f| {
                        matches!(f, Format::AiSdk | Format::Responses | Format::Gemini)
                    }),
                };
                if let Some(format) = own {
                    let conversation = decode_value(list, format)?.remove(0);
                    return Ok(Decoded {
                        conversation,
                        shape: Shape::List,
                    });
                }
                let mut body = Map::new();
                body.insert("messages".into(), list);
                (Shape::List, Value::Object(body))
            }
            other => return Err(not_messages(json_kind(&other))),
        };
        let empty = body["messages"].as_array().is_some_and(Vec::is_empty);
        let wire = match format {
            Some(w) => w,
            None if empty => Wire::Chat,
            None => Wire::of(detect(&body)?),
        };
        let conversation = match wire {
            Wire::AiSdk => return Err(not_messages("an AI SDK body (give the messages array)")),
            family => decode_value(body, family.format())?.remove(0),
        };
        Ok(Decoded {
            conversation,
            shape,
        })
    }

    /// [`read`](Self::read) of JSON text. A large body with `messages`
    /// (OpenAI, Anthropic) is decoded a message at a time on every core,
    /// as the CLI and the proxy decode it, instead of becoming a JSON tree
    /// first (for the 8 MB tool chat that tree was most of the packages'
    /// cost beyond the engine's); anything else is read as a tree.
    pub fn read_text(text: &str, format: Option<Wire>) -> Result<Self> {
        let streamable = format.is_none_or(|w| matches!(w, Wire::Chat | Wire::Anthropic));
        if streamable
            && let Some(decoded) = abridge_model::decode_large_body(text, format.map(Wire::format))
        {
            let conversation = decoded?;
            // An empty `messages` is OpenAI's when no format is given, as
            // `read` decides it, whatever the other fields suggest.
            let empty = conversation.wire_offset() == conversation.messages.len();
            if format.is_some() || !empty {
                return Ok(Decoded {
                    conversation,
                    shape: Shape::Body,
                });
            }
        }
        Self::read(serde_json::from_str(text)?, format)
    }

    /// The wire format these messages are written in.
    pub fn wire(&self) -> Wire {
        Wire::of(self.conversation.format)
    }
}

impl Shape {
    /// `conv` in this shape: a body, or its messages (items) alone.
    pub fn write(self, conv: &Conversation) -> Result<Value> {
        let value = encode(conv)?;
        let key = Wire::of(conv.format).history_key();
        Ok(match (self, value) {
            (Shape::List, Value::Object(mut body)) => body.remove(key).unwrap_or_default(),
            (_, value) => value,
        })
    }
}

fn not_messages(what: &str) -> Error {
    Error::Input(abridge_model::Error::Shape {
        at: "input".into(),
        expected: format!(
            "a request body with `messages`, `input` or `contents`, or an array of messages, input items or contents, found {what}"
        ),
    })
}
