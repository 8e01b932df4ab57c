//! `lossless`: what costs no information goes first. A JSON tool result or
//! JSON arguments lose the whitespace between their tokens (strings,
//! numbers and key order stay as written), and a result that a later
//! result repeats word for word becomes a reference to that one. Both are
//! deterministic: the same history gives the same bytes, so a compacted
//! prefix stays the provider's cached one.

use std::collections::HashMap;
use std::ops::Range;

use abridge_model::{Arguments, Part, ToolResult};

use crate::placeholder;
use crate::slot::Slot;

/// Results shorter than this are left to repeat: a reference is not much
/// shorter.
const MIN_REPEATED: usize = 256;

/// A document minified must save at least this share of its bytes (and
/// [`MIN_SAVED`]): indentation, not the odd space.
const MIN_SAVED_SHARE: usize = 10;
const MIN_SAVED: usize = 64;

pub(super) fn apply(messages: &mut [Slot<'_>], region: Range<usize>) -> usize {
    let later = repeated_later(messages, &region);
    let mut changes: Vec<(usize, usize, Change)> = Vec::new();
    for i in region {
        let m = &messages[i];
        if m.meta.pinned {
            continue;
        }
        for (j, p) in m.parts.iter().enumerate() {
            match p {
                Part::ToolResult(r) => {
                    if let Some(id) = later.get(&(i, j)) {
                        changes.push((i, j, Change::Text(placeholder::repeated(id))));
                    } else if let Some(text) = single_text(r).and_then(minified) {
                        changes.push((i, j, Change::Text(text)));
                    }
                }
                Part::ToolCall(c) => {
                    if let Arguments::Json(s) = &c.arguments
                        && let Some(text) = minified(s)
                    {
                        changes.push((i, j, Change::Arguments(text)));
                    }
                }
                _ => {}
            }
        }
    }
    let n = changes.len();
    for (i, j, change) in changes {
        match (&mut messages[i].make_mut().parts[j], change) {
            (Part::ToolResult(r), Change::Text(t)) => r.replace_with_text(t),
            (Part::ToolCall(c), Change::Arguments(t)) => c.arguments = Arguments::Json(t),
            _ => {}
        }
    }
    n
}

enum Change {
    Text(String),
    Arguments(String),
}

/// A result's text when it is one text part.
fn single_text(r: &ToolResult) -> Option<&str> {
    match r.parts.as_slice() {
        [Part::Text(t)] => Some(&t.text),
        _ => None,
    }
}

/// The results in `region` that a later result (anywhere after them)
/// repeats exactly, with the call id of that later one.
fn repeated_later(messages: &[Slot<'_>], region: &Range<usize>) -> HashMap<(usize, usize), String> {
    let mut newest: HashMap<&str, &str> = HashMap::new();
    let mut out = HashMap::new();
    for (i, m) in messages.iter().enumerate().skip(region.start).rev() {
        for (j, p) in m.parts.iter().enumerate().rev() {
            let Part::ToolResult(r) = p else { continue };
            let Some(text) = single_text(r).filter(|t| t.len() >= MIN_REPEATED) else {
                continue;
            };
            if placeholder::is_result_placeholder(text) {
                continue;
            }
            match newest.get(text) {
                Some(id) if region.contains(&i) && !m.meta.pinned => {
                    out.insert((i, j), (*id).to_owned());
                }
                Some(_) => {}
                None => {
                    newest.insert(text, &r.call_id);
                }
            }
        }
    }
    out
}

/// A JSON document's text without the whitespace between its tokens, when
/// that saves enough; `None` for anything else (not JSON, already tight).
fn minified(text: &str) -> Option<String> {
    let first = text.trim_start().as_bytes().first()?;
    if !matches!(first, b'{' | b'[') {
        return None;
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    let saved = text.len() - out.len();
    (saved >= MIN_SAVED && saved * 100 >= text.len() * MIN_SAVED_SHARE).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_loses_its_whitespace_and_nothing_else() {
        let fields: Vec<String> = (0..8).map(|i| format!("    \"field_{i}\": {i}")).collect();
        let doc = format!(
            "{{\n    \"name\": \"a  b\",\n    \"n\": 0.70,\n    \"esc\": \"q\\\" x \",\n{},\n    \"list\": [\n        1,\n        2\n    ]\n}}",
            fields.join(",\n")
        );
        let tight = minified(&doc).unwrap();
        let fields: Vec<String> = (0..8).map(|i| format!("\"field_{i}\":{i}")).collect();
        assert_eq!(
            tight,
            format!(
                "{{\"name\":\"a  b\",\"n\":0.70,\"esc\":\"q\\\" x \",{},\"list\":[1,2]}}",
                fields.join(",")
            )
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&tight).unwrap(),
            serde_json::from_str::<serde_json::Value>(&doc).unwrap()
        );
        assert_eq!(minified("not json {"), None);
        assert_eq!(minified(r#"{"a": 1}"#), None, "too little to save");
        assert_eq!(
            minified(&doc[..doc.len() - 1]),
            None,
            "not a whole document"
        );
    }
}
