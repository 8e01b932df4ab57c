//! Large Chat Completions and Messages bodies decoded one message at a time.
//!
//! A body's history is most of it. Parsing the whole body into a JSON tree
//! first holds every message twice at the peak (the tree, then the decoded
//! messages): a million one-word messages took 1.1 GB to read. Here the body
//! is split into its fields' raw text, the envelope is parsed, and each
//! message is parsed and decoded in turn, so that one message's tree exists
//! at a time. Whatever this does not recognise (another format, text that
//! does not parse) takes the whole-tree path, which says what is wrong and
//! where; a message that parses but does not decode gets the same error
//! there as here.

use std::collections::HashMap;

use serde_json::Value;
use serde_json::value::RawValue;

use super::util::Object;
use super::{FamilyScore, anthropic, decode_value, openai};
use crate::conversation::{Conversation, Format};
use crate::error::Result;
use crate::message::Message;

/// Bodies smaller than this are parsed whole: the tree costs little there.
pub(super) const MIN_BYTES: usize = 1 << 20;

/// The body in `text` decoded message by message, when it is a large object
/// with a `messages` array in a format this module decodes.
pub(super) fn decode(text: &str, format: Option<Format>) -> Option<Result<Conversation>> {
    (text.len() >= MIN_BYTES)
        .then(|| decode_any_size(text, format))
        .flatten()
}

/// [`decode`] at any size (tests compare it with the whole-tree path).
pub(super) fn decode_any_size(text: &str, format: Option<Format>) -> Option<Result<Conversation>> {
    if format.is_some_and(|f| !matches!(f, Format::Chat | Format::Anthropic)) {
        return None;
    }
    let top: HashMap<String, &RawValue> = serde_json::from_str(text).ok()?;
    let items: Vec<&RawValue> = serde_json::from_str(top.get("messages")?.get()).ok()?;
    // The fields in the order the body has them (the encoder keeps it).
    let mut fields: Vec<(&String, &&RawValue)> = top.iter().collect();
    fields.sort_by_key(|(_, raw)| raw.get().as_ptr() as usize);
    let mut envelope = Object::with_capacity(fields.len());
    for (key, raw) in fields {
        let value = match key.as_str() {
            "messages" => Value::Array(Vec::new()),
            _ => serde_json::from_str(raw.get()).ok()?,
        };
        envelope.insert(key.clone(), value);
    }
    let format = match format {
        Some(f) => f,
        None => detect(&envelope, &items)?,
    };
    let decode_one: DecodeOne = match format {
        Format::Chat => openai::decode_message,
        Format::Anthropic => anthropic::decode_message,
        _ => return None,
    };
    let mut conv = match decode_value(Value::Object(envelope), format) {
        Ok(mut convs) if convs.len() == 1 => convs.pop()?,
        Ok(_) => return None,
        Err(e) => return Some(Err(e)),
    };
    // After what the envelope holds (Messages' system prompt).
    match decode_messages(&items, decode_one)? {
        Ok(mut messages) => conv.messages.append(&mut messages),
        Err(e) => return Some(Err(e)),
    }
    Some(Ok(conv))
}

/// Decodes one message (`what` names it in an error).
type DecodeOne = fn(Value, &dyn Fn() -> String) -> Result<Message>;

/// Most threads a body's messages are decoded on.
const MAX_THREADS: usize = 4;

/// The messages, decoded on every core: contiguous shares of about equal
/// text, one per thread, put back in order. What the first share to fail
/// says is what a decoding in order would have said: `None` for a message
/// that does not parse (the whole-tree path then says where), or its error.
fn decode_messages(items: &[&RawValue], decode_one: DecodeOne) -> Option<Result<Vec<Message>>> {
    let threads = crate::shares::threads(MAX_THREADS);
    let decoded = crate::shares::on_shares(
        items,
        |r| r.get().len(),
        threads,
        |share, at| decode_share(share, at, decode_one),
    );
    let mut messages = Vec::with_capacity(items.len());
    for share in decoded {
        // A share that panicked: the whole-tree path says what is wrong.
        match share.ok().flatten()? {
            Ok(mut m) => messages.append(&mut m),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(messages))
}

/// `items` decoded in order; `offset`: the index of the first.
fn decode_share(
    items: &[&RawValue],
    offset: usize,
    decode_one: DecodeOne,
) -> Option<Result<Vec<Message>>> {
    let mut out = Vec::with_capacity(items.len());
    for (i, raw) in items.iter().enumerate() {
        let value = serde_json::from_str(raw.get()).ok()?;
        match decode_one(value, &|| format!("messages[{}]", offset + i)) {
            Ok(m) => out.push(m),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(out))
}

/// The format [`super::detect`] finds for a body with a `messages` array,
/// when it is Chat Completions or Messages; `None` for a body that may be a
/// log (mini-swe-agent, Claude Code), which the whole-tree path reads.
fn detect(envelope: &Object, items: &[&RawValue]) -> Option<Format> {
    if ["trajectory_format", "info", "type"]
        .iter()
        .any(|k| envelope.contains_key(*k))
    {
        return None;
    }
    let mut score = FamilyScore::new(envelope.contains_key("system"));
    for raw in items {
        add_hints(&mut score, raw)?;
    }
    Some(score.family())
}

/// Scores one message: an object without duplicate fields or escaped keys
/// in its blocks by its [`Hints`], anything else as a tree; `None` when it
/// is not JSON.
fn add_hints(score: &mut FamilyScore, raw: &RawValue) -> Option<()> {
    let hints = (raw.get().starts_with('{'))
        .then(|| serde_json::from_str::<Hints<'_>>(raw.get()).ok())
        .flatten();
    match hints {
        Some(hints) => score.add(&hints.value()),
        None => score.add(&serde_json::from_str(raw.get()).ok()?),
    }
    Some(())
}

/// What [`FamilyScore`] reads of a message, without the rest of its tree:
/// its role, whether it has `tool_calls` or `tool_call_id` (any value,
/// `null` too), and the `type` of each block of an array `content`.
#[derive(serde::Deserialize)]
struct Hints<'a> {
    #[serde(default, borrow)]
    role: Lenient<'a>,
    #[serde(default)]
    tool_calls: Present,
    #[serde(default)]
    tool_call_id: Present,
    #[serde(default, borrow)]
    content: Blocks<'a>,
}

impl Hints<'_> {
    /// The message as far as [`FamilyScore`] looks.
    fn value(&self) -> Value {
        let mut m = serde_json::Map::new();
        if let Some(role) = &self.role.0 {
            m.insert("role".into(), Value::String(role.to_string()));
        }
        for (key, present) in [
            ("tool_calls", &self.tool_calls),
            ("tool_call_id", &self.tool_call_id),
        ] {
            if present.0 {
                m.insert(key.into(), Value::Null);
            }
        }
        if let Some(types) = &self.content.0 {
            let blocks = types
                .iter()
                .map(|t| match t {
                    Some(t) => serde_json::json!({ "type": t.as_ref() }),
                    None => Value::Object(Default::default()),
                })
                .collect();
            m.insert("content".into(), Value::Array(blocks));
        }
        Value::Object(m)
    }
}

/// Any value; the string when it is one.
#[derive(Default)]
struct Lenient<'a>(Option<std::borrow::Cow<'a, str>>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Lenient<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(Lenient(v.as_str().map(|s| s.to_owned().into())))
    }
}

/// A field that is there, whatever its value.
#[derive(Default)]
struct Present(bool);

impl<'de> serde::Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Present(true))
    }
}

/// The `type` of each block of an array; `None` for any other value.
#[derive(Default)]
struct Blocks<'a>(Option<Vec<Option<std::borrow::Cow<'a, str>>>>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for Blocks<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(BlocksVisitor(std::marker::PhantomData))
    }
}

struct BlocksVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> serde::de::Visitor<'de> for BlocksVisitor<'a> {
    type Value = Blocks<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any value")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut types = Vec::new();
        while let Some(block) = seq.next_element::<BlockType<'a>>()? {
            types.push(block.0);
        }
        Ok(Blocks(Some(types)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Blocks(None))
    }

    fn visit_str<E>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(Blocks(None))
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(Blocks(None))
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(Blocks(None))
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(Blocks(None))
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(Blocks(None))
    }

    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(Blocks(None))
    }
}

/// A block's `type` when it is an object with a string one (the last, as
/// in a tree); keys with escapes fail the hints, and the message is read
/// as a tree instead.
struct BlockType<'a>(Option<std::borrow::Cow<'a, str>>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for BlockType<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(BlockVisitor(std::marker::PhantomData))
    }
}

struct BlockVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> serde::de::Visitor<'de> for BlockVisitor<'a> {
    type Value = BlockType<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut ty = None;
        while let Some(key) = map.next_key::<&'de str>()? {
            if key == "type" {
                ty = map.next_value::<Lenient<'a>>()?.0;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(BlockType(ty))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(BlockType(None))
    }

    fn visit_str<E>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(BlockType(None))
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Ok(BlockType(None))
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Ok(BlockType(None))
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Ok(BlockType(None))
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Ok(BlockType(None))
    }

    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(BlockType(None))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::codec::{decode_as, detect};

    /// The whole-tree path's answer.
    fn whole(text: &str, format: Option<Format>) -> Result<Conversation> {
        let value: Value = serde_json::from_str(text).unwrap();
        let format = match format {
            Some(f) => f,
            None => detect(&value)?,
        };
        Ok(decode_value(value, format)?.remove(0))
    }

    fn same(text: &str, format: Option<Format>) {
        let streamed = decode_any_size(text, format).expect("taken message by message");
        match (streamed, whole(text, format)) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("streamed {a:?}, whole {b:?}"),
        }
    }

    #[test]
    fn the_examples_decode_as_the_whole_tree_does() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
        for name in ["coding-agent.openai.json", "web-agent.anthropic.json"] {
            let text = std::fs::read_to_string(format!("{root}/{name}")).unwrap();
            same(&text, None);
            same(&text, Some(whole(&text, None).unwrap().format));
        }
    }

    #[test]
    fn envelopes_keep_their_fields_in_order_and_errors_their_places() {
        let anthropic = json!({
            "model": "claude-sonnet-4-5", "max_tokens": 10, "system": "Be brief.",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]}
            ],
            "tools": [{"name": "ls", "input_schema": {"type": "object"}}], "zeta": 1, "alpha": [2]
        });
        same(&anthropic.to_string(), None);
        let openai = json!({
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                         {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}],
            "model": "gpt-4o", "stream": true
        });
        same(&openai.to_string(), None);
        same(&openai.to_string(), Some(Format::Chat));
    }

    /// Shares decoded on several threads come back in order, and a bad
    /// message anywhere is named as the whole tree names it.
    #[test]
    fn shares_keep_the_order_and_the_first_error() {
        let good = |i: usize| match i % 3 {
            0 => json!({"role": "user", "content": format!("question {i}")}),
            1 => {
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"),
                "type": "function", "function": {"name": "ls", "arguments": "{}"}}]})
            }
            _ => {
                json!({"role": "tool", "tool_call_id": format!("c{}", i - 1), "content": "a ".repeat(i)})
            }
        };
        let body = |bad: &[usize]| {
            let messages: Vec<Value> = (0..300)
                .map(|i| match bad.contains(&i) {
                    true => json!({"role": 5, "content": "x"}),
                    false => good(i),
                })
                .collect();
            json!({"model": "gpt-4o", "messages": messages}).to_string()
        };
        same(&body(&[]), None);
        for bad in [&[0][..], &[1], &[150], &[299], &[120, 280], &[280, 20]] {
            let first = bad.iter().min().unwrap();
            let e = decode_any_size(&body(bad), Some(Format::Chat)).unwrap();
            assert!(
                e.unwrap_err()
                    .to_string()
                    .contains(&format!("messages[{first}]")),
                "{bad:?}"
            );
            same(&body(bad), Some(Format::Chat));
        }
    }

    #[test]
    fn what_it_does_not_read_goes_the_whole_way() {
        for text in [
            json!({"type": "user", "sessionId": "s", "messages": []}).to_string(),
            json!({"info": {}, "messages": [{"role": "exit", "content": ""}]}).to_string(),
            json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}]}).to_string(),
            json!({"messages": {"role": "user"}}).to_string(),
            r#"{"messages": [{"role": "user", "content": "x"}"#.to_owned(),
        ] {
            assert!(decode_any_size(&text, None).is_none(), "{text}");
        }
        let body = json!({"messages": [{"role": "user", "content": "x"}]}).to_string();
        assert!(decode_any_size(&body, Some(Format::Gemini)).is_none());
    }

    #[test]
    fn hints_score_a_message_as_its_tree_does() {
        let messages = [
            r#"{"role": "tool", "tool_call_id": "x", "content": "a"}"#,
            r#"{"role": "assistant", "tool_calls": null}"#,
            r#"{"role": 7, "content": [{"type": "tool_use"}, 3, "s", [1], {"type": 5}, {"ty\u0070e": "image"}]}"#,
            r#"{"role": "user", "content": [{"type": "text", "type": "image"}, {"x": {"type": "tool_result"}}]}"#,
            r#"{"role": "system", "content": {"type": "thinking"}}"#,
            r#"{"role": "developer", "role": "user"}"#,
            r#"["system", null, null, [{"type": "image"}]]"#,
            r#"{"content": [{"type": "image_url", "image_url": {"url": "u"}}, {"type": "input_audio"}]}"#,
            r#"{"role": "user", "content": [{"type": "document", "source": {"type": "base64", "data": "AAAA"}}]}"#,
        ];
        let mut hinted = 0;
        for has_system in [false, true] {
            for m in messages {
                let raw: &RawValue = serde_json::from_str(m).unwrap();
                let mut by_hints = FamilyScore::new(has_system);
                let mut by_tree = FamilyScore::new(has_system);
                by_tree.add(&serde_json::from_str(m).unwrap());
                add_hints(&mut by_hints, raw).unwrap();
                hinted +=
                    usize::from(m.starts_with('{') && serde_json::from_str::<Hints<'_>>(m).is_ok());
                assert_eq!(
                    (by_hints.anthropic, by_hints.openai),
                    (by_tree.anthropic, by_tree.openai),
                    "{m}"
                );
            }
        }
        // All but the duplicate role, the escaped key and the array.
        assert_eq!(hinted, 2 * 6);
    }

    #[test]
    fn a_large_body_is_read_message_by_message() {
        let messages: Vec<Value> = (0..60_000)
            .map(|i| {
                let role = ["user", "assistant"][i % 2];
                json!({"role": role, "content": format!("word {i}")})
            })
            .collect();
        let text = json!({"model": "gpt-4o", "messages": messages}).to_string();
        assert!(text.len() >= MIN_BYTES);
        let read = decode_as(text.as_bytes(), None).unwrap().remove(0);
        assert_eq!(read, whole(&text, None).unwrap());
        assert_eq!(read.messages.len(), 60_000);
    }
}
