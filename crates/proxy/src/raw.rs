//! Recognising a session's next request by its bytes.
//!
//! A client that resends its history sends the same bytes up to the end of
//! its last message, then the messages it added and the same closing
//! fields. The proxy keeps, per session, where the previous body's history
//! array (`messages`, or the Responses API's `input`) ended and a hash of
//! everything before; a body that starts with those bytes only needs its
//! new messages parsed. Anything else takes the full decode.

use std::ops::Range;

use serde_json::Value;
use serde_json::value::RawValue;

/// Where a body's history array sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    /// One past the last byte of the last message.
    pub(crate) prefix_end: usize,
    /// From the array's closing `]` to the end of the body.
    pub(crate) post: Range<usize>,
    /// Messages in the array.
    pub(crate) count: usize,
    /// Where the last [`ANCHORS`] messages start, oldest first: a client
    /// that moves its cache marker rewrites its newest messages, and the
    /// next body is recognised from the start of those.
    pub(crate) starts: Vec<usize>,
}

/// Newest messages whose starts a [`Shape`] keeps.
pub(crate) const ANCHORS: usize = 3;

impl Shape {
    /// The wire index of the message starting at `starts[k]`.
    pub(crate) fn index_of(&self, k: usize) -> usize {
        self.count - self.starts.len() + k
    }
}

/// The shape of a whole body (one scan), when it is an object with a
/// non-empty history array under `key`.
pub(crate) fn shape(body: &[u8], key: &str) -> Option<Shape> {
    let top: std::collections::HashMap<String, &RawValue> = serde_json::from_slice(body).ok()?;
    let array = top.get(key)?;
    let items: Vec<&RawValue> = serde_json::from_str(array.get()).ok()?;
    let last = items.last()?;
    let close = offset(body, array.get()) + array.get().len() - 1;
    let newest = &items[items.len().saturating_sub(ANCHORS)..];
    Some(Shape {
        prefix_end: offset(body, last.get()) + last.get().len(),
        post: close..body.len(),
        count: items.len(),
        starts: newest.iter().map(|m| offset(body, m.get())).collect(),
    })
}

fn offset(body: &[u8], part: &str) -> usize {
    part.as_ptr() as usize - body.as_ptr() as usize
}

/// Hashes of the bytes before each of a shape's [`Shape::starts`] and
/// before its `prefix_end`, in one pass.
pub(crate) fn prefix_hashes(body: &[u8], shape: &Shape) -> (Vec<u64>, u64) {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut at = 0;
    let mut anchors = Vec::with_capacity(shape.starts.len());
    for &start in &shape.starts {
        h.update(&body[at..start]);
        at = start;
        anchors.push(h.digest());
    }
    h.update(&body[at..shape.prefix_end]);
    (anchors, h.digest())
}

/// A hash of the bytes before `end`.
#[cfg(test)]
pub(crate) fn prefix_hash(body: &[u8], end: usize) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&body[..end])
}

/// What a body holds from the message at `start` (wire index `index`) to
/// the end of its history array: those messages and the body's shape,
/// or `None` when the array does not go on from there.
/// `first_is_value`: `start` is a message's first byte (else it is the end
/// of one, and a `,` or the array's `]` follows).
pub(crate) fn messages_from(
    body: &[u8],
    start: usize,
    index: usize,
    first_is_value: bool,
    kept_starts: &[usize],
) -> Option<(Vec<Value>, Shape)> {
    let mut pos = start;
    let mut end = start;
    let mut values = Vec::new();
    let mut starts = kept_starts.to_vec();
    let mut expect_value = first_is_value;
    loop {
        pos = skip_ws(body, pos);
        let value_at = if expect_value {
            expect_value = false;
            Some(pos)
        } else {
            match body.get(pos)? {
                b',' => Some(skip_ws(body, pos + 1)),
                b']' => None,
                _ => return None,
            }
        };
        let Some(at) = value_at else {
            let keep = starts.len().saturating_sub(ANCHORS);
            starts.drain(..keep);
            let shape = Shape {
                prefix_end: end,
                post: pos..body.len(),
                count: index + values.len(),
                starts,
            };
            return Some((values, shape));
        };
        let mut stream = serde_json::Deserializer::from_slice(body.get(at..)?).into_iter::<Value>();
        let value = stream.next()?.ok()?;
        end = at + stream.byte_offset();
        pos = end;
        starts.push(at);
        values.push(value);
    }
}

/// Whether the parts of two bodies after their history arrays hold the
/// same fields: the same bytes, or the same JSON once parsed (Codex writes
/// its `client_metadata` map in a new order on every request). Only that
/// part is parsed, never the history.
pub(crate) fn same_post(a: &[u8], b: &[u8]) -> bool {
    a == b || matches!((post_fields(a), post_fields(b)), (Some(x), Some(y)) if x == y)
}

/// The fields after a history array's closing `]`, as one object.
fn post_fields(post: &[u8]) -> Option<Value> {
    let rest = post.strip_prefix(b"]")?;
    let at = skip_ws(rest, 0);
    let fields = match rest.get(at)? {
        b',' => &rest[at + 1..],
        b'}' => &rest[at..],
        _ => return None,
    };
    let object: Value = serde_json::from_slice(&[b"{".as_slice(), fields].concat()).ok()?;
    object.is_object().then_some(object)
}

fn skip_ws(body: &[u8], mut pos: usize) -> usize {
    while body
        .get(pos)
        .is_some_and(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
    {
        pos += 1;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_longer_history_is_recognised_compact_or_pretty() {
        for (a, b) in [
            (
                r#"{"model":"m","messages":[{"role":"user","content":"a"}],"stream":true}"#,
                r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c]"}],"stream":true}"#,
            ),
            (
                "{\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"a\"}\n  ],\n  \"model\": \"m\"\n}",
                "{\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"a\"},\n    {\"role\": \"assistant\", \"content\": \"b\"}\n  ],\n  \"model\": \"m\"\n}",
            ),
        ] {
            let first = shape(a.as_bytes(), "messages").unwrap();
            assert_eq!(first.count, 1);
            assert_eq!(
                prefix_hash(a.as_bytes(), first.prefix_end),
                prefix_hash(b.as_bytes(), first.prefix_end)
            );
            let kept = &first.starts;
            let (added, next) =
                messages_from(b.as_bytes(), first.prefix_end, first.count, false, kept).unwrap();
            assert_eq!(next, shape(b.as_bytes(), "messages").unwrap());
            assert_eq!(added.len(), next.count - 1);
            assert_eq!(
                &a.as_bytes()[first.post.clone()],
                &b.as_bytes()[next.post.clone()]
            );
        }
    }

    #[test]
    fn a_body_that_rewrote_its_newest_message_is_read_from_its_start() {
        // Claude Code moves its cache marker to the newest message.
        let a = r#"{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}],"m":1}"#;
        let b = r#"{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":[{"type":"text","text":"c","cache_control":{"type":"ephemeral"}}]}],"m":1}"#;
        let first = shape(a.as_bytes(), "messages").unwrap();
        assert_eq!(first.starts.len(), 2);
        let (hashes, _) = prefix_hashes(a.as_bytes(), &first);
        let at = first.starts[1];
        assert_eq!(hashes[1], prefix_hash(b.as_bytes(), at));
        let (values, next) = messages_from(
            b.as_bytes(),
            at,
            first.index_of(1),
            true,
            &first.starts[..1],
        )
        .unwrap();
        assert_eq!(values.len(), 2);
        assert_eq!(values[0]["content"], "b");
        assert_eq!(next, shape(b.as_bytes(), "messages").unwrap());
    }

    #[test]
    fn fields_after_the_history_compare_as_json_when_their_bytes_differ() {
        let a = br#"], "tools": [1], "meta": {"a": 1, "b": [2, 3]}}"#;
        let b = br#"],"meta":{"b":[2,3],"a":1},"tools":[1]}"#;
        assert!(same_post(a, b));
        assert!(same_post(b"]}", b"] }"));
        assert!(!same_post(a, br#"],"meta":{"b":[3,2],"a":1},"tools":[1]}"#));
        assert!(!same_post(
            a,
            br#"],"meta":{"a":1,"b":[2,3]},"tools":[1],"x":0}"#
        ));
        assert!(!same_post(b"]}", b"]x}"));
    }

    #[test]
    fn anything_else_is_not_an_extension() {
        let a = r#"{"messages":[{"role":"user","content":"a"}]}"#;
        let s = shape(a.as_bytes(), "messages").unwrap();
        for b in [
            r#"{"messages":[{"role":"user","content":"a"}x]}"#,
            r#"{"messages":[{"role":"user","content":"a"},{"role":"user"#,
            r#"{"messages":[{"role":"user","content":"a"}"#,
        ] {
            assert!(
                messages_from(b.as_bytes(), s.prefix_end, s.count, false, &s.starts).is_none(),
                "{b}"
            );
        }
        assert!(shape(br#"{"messages":[]}"#, "messages").is_none());
        assert!(shape(br#"{"input":"a string"}"#, "input").is_none());
        assert!(shape(b"not json", "messages").is_none());
    }
}
