//! Recognising a session's next request by its bytes.
//!
//! A client that resends its history sends the same bytes up to the end of
//! its last message, then the messages it added and the same closing
//! fields. The proxy keeps, per session, where the previous body's
//! `messages` array ended and a hash of everything before; a body that
//! starts with those bytes only needs its new messages parsed. Anything
//! else takes the full decode.

use std::ops::Range;

use serde_json::Value;
use serde_json::value::RawValue;
use xxhash_rust::xxh3::xxh3_64;

/// Where a body's `messages` array sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    /// One past the last byte of the last message.
    pub(crate) prefix_end: usize,
    /// From the array's closing `]` to the end of the body.
    pub(crate) post: Range<usize>,
    /// Messages in the array.
    pub(crate) count: usize,
}

/// The shape of a whole body (one scan), when it is an object with a
/// non-empty `messages` array.
pub(crate) fn shape(body: &[u8]) -> Option<Shape> {
    let top: std::collections::HashMap<String, &RawValue> = serde_json::from_slice(body).ok()?;
    let array = top.get("messages")?;
    let items: Vec<&RawValue> = serde_json::from_str(array.get()).ok()?;
    let last = items.last()?;
    let close = offset(body, array.get()) + array.get().len() - 1;
    Some(Shape {
        prefix_end: offset(body, last.get()) + last.get().len(),
        post: close..body.len(),
        count: items.len(),
    })
}

fn offset(body: &[u8], part: &str) -> usize {
    part.as_ptr() as usize - body.as_ptr() as usize
}

/// A hash of the bytes before `end`.
pub(crate) fn prefix_hash(body: &[u8], end: usize) -> u64 {
    xxh3_64(&body[..end])
}

/// What a body adds after a known prefix: its new messages and its shape,
/// or `None` when it does not continue the array there.
pub(crate) fn extension(
    body: &[u8],
    prefix_end: usize,
    count: usize,
) -> Option<(Vec<Value>, Shape)> {
    let mut pos = prefix_end;
    let mut end = prefix_end;
    let mut added = Vec::new();
    loop {
        pos = skip_ws(body, pos);
        match body.get(pos)? {
            b',' => {
                let start = skip_ws(body, pos + 1);
                let mut values =
                    serde_json::Deserializer::from_slice(body.get(start..)?).into_iter::<Value>();
                let value = values.next()?.ok()?;
                end = start + values.byte_offset();
                pos = end;
                added.push(value);
            }
            b']' => {
                let shape = Shape {
                    prefix_end: end,
                    post: pos..body.len(),
                    count: count + added.len(),
                };
                return Some((added, shape));
            }
            _ => return None,
        }
    }
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
            let first = shape(a.as_bytes()).unwrap();
            assert_eq!(first.count, 1);
            assert_eq!(
                prefix_hash(a.as_bytes(), first.prefix_end),
                prefix_hash(b.as_bytes(), first.prefix_end)
            );
            let (added, next) = extension(b.as_bytes(), first.prefix_end, first.count).unwrap();
            assert_eq!(next, shape(b.as_bytes()).unwrap());
            assert_eq!(added.len(), next.count - 1);
            assert_eq!(
                &a.as_bytes()[first.post.clone()],
                &b.as_bytes()[next.post.clone()]
            );
        }
    }

    #[test]
    fn anything_else_is_not_an_extension() {
        let a = r#"{"messages":[{"role":"user","content":"a"}]}"#;
        let s = shape(a.as_bytes()).unwrap();
        for b in [
            r#"{"messages":[{"role":"user","content":"a"}x]}"#,
            r#"{"messages":[{"role":"user","content":"a"},{"role":"user"#,
            r#"{"messages":[{"role":"user","content":"a"}"#,
        ] {
            assert!(
                extension(b.as_bytes(), s.prefix_end, s.count).is_none(),
                "{b}"
            );
        }
        assert!(shape(br#"{"messages":[]}"#).is_none());
        assert!(shape(b"not json").is_none());
    }
}
