//! `clip_tool_args`: long arguments of old tool calls are clipped; the tool
//! name, the call id and short scalar arguments (a path, an id, a short
//! command) stay, so pairing is intact, the API still accepts the call, and
//! the agent still sees what it did: `{"file_path": "src/lib.rs",
//! "_abridged": "2 long arguments clipped for brevity; recall abr_…"}`.
//! With `blank_args` no argument stays; with `strip_reasoning` the text of
//! the message that made the calls goes too, kept with the first call's
//! arguments for recall (Pilo #437).

use std::ops::Range;

use abridge_model::{Arguments, Message, Part, Role};
use serde_json::{Map, Value};

use crate::config::PolicyConfig;
use crate::placeholder::{ARGS_KEY, ARGS_NOTE, args_json, with_handle};
use crate::recall::{Found, Handle, Original, keep};
use crate::slot::Slot;

/// Longest string argument kept as it is.
const KEEP_CHARS: usize = 100;

pub(super) fn apply(
    messages: &mut [Slot<'_>],
    region: Range<usize>,
    cfg: &PolicyConfig,
    mut found: Option<Found<'_>>,
) -> usize {
    let mut changed = 0;
    for slot in &mut messages[region] {
        if slot.meta.pinned || slot.role != Role::Assistant || !has_work(slot, cfg) {
            continue;
        }
        // Clipped in a copy, kept only when it changed: a message left as
        // it was stays the history's own.
        let mut m = Message::clone(slot);
        let n = clip_message(&mut m, cfg, &mut found);
        if n > 0 {
            *slot = m.into();
            changed += n;
        }
    }
    changed
}

/// Whether [`clip_message`] may change `m`: it calls a tool, and either
/// its text is taken out or a call's arguments are long enough to clip.
fn has_work(m: &Message, cfg: &PolicyConfig) -> bool {
    let mut calls = m.tool_calls().peekable();
    if calls.peek().is_none() {
        return false;
    }
    let said = m
        .parts
        .iter()
        .filter_map(Part::as_text)
        .any(|t| !t.trim().is_empty());
    (cfg.strip_reasoning && said)
        || calls.any(|c| {
            let short = c.arguments.to_json_text().len() < cfg.min_args_chars && !cfg.blank_args;
            !short && !is_placeholder(&c.arguments)
        })
}

/// Clips the arguments of one assistant message's calls (and takes out
/// its text, when configured); returns how many items it changed.
fn clip_message(m: &mut Message, cfg: &PolicyConfig, found: &mut Option<Found<'_>>) -> usize {
    let mut changed = 0;
    let mut stripped = match cfg.strip_reasoning {
        true => strip_text(m),
        false => None,
    };
    changed += usize::from(stripped.is_some());
    for p in &mut m.parts {
        let Part::ToolCall(call) = p else { continue };
        let text = call.arguments.to_json_text();
        // Stripped text goes with the first call's arguments.
        let with_text = stripped.take();
        let short = text.len() < cfg.min_args_chars && !cfg.blank_args;
        if with_text.is_none() && (short || is_placeholder(&call.arguments)) {
            continue;
        }
        let mut original = Original::arguments(call);
        if let Some(t) = &with_text {
            original = original.after_text(t);
        }
        let h = found.is_some().then(|| original.handle.clone());
        let clipped = match &call.arguments {
            Arguments::Json(s) => match serde_json::from_str::<Value>(s) {
                Ok(v) => Arguments::Json(clip(&v, h.as_ref(), cfg.blank_args).to_string()),
                Err(_) => Arguments::Json(args_json(h.as_ref())),
            },
            Arguments::Value(v) => Arguments::Value(clip(v, h.as_ref(), cfg.blank_args)),
            Arguments::Custom(_) => {
                Arguments::Custom(format!("[{}]", with_handle(ARGS_NOTE, h.as_ref())))
            }
        };
        let smaller = clipped.to_json_text().len() < text.len();
        if smaller || with_text.is_some() {
            keep(found, || original);
        }
        if smaller || (with_text.is_some() && !is_placeholder(&call.arguments)) {
            call.arguments = clipped;
            changed += 1;
        }
    }
    changed
}

/// Takes the text out of an assistant message that calls tools; what it
/// said, when it said anything.
fn strip_text(m: &mut Message) -> Option<String> {
    if !m.parts.iter().any(|p| matches!(p, Part::ToolCall(_))) {
        return None;
    }
    let said: Vec<String> = m
        .parts
        .iter()
        .filter_map(Part::as_text)
        .filter(|t| !t.trim().is_empty())
        .map(str::to_owned)
        .collect();
    if said.is_empty() {
        return None;
    }
    m.parts.retain(|p| p.as_text().is_none());
    Some(said.join("\n"))
}

/// Short scalars of an object kept, the rest replaced by a count.
fn clip(v: &Value, handle: Option<&Handle>, blank: bool) -> Value {
    let mut out = Map::new();
    let mut dropped = 0;
    if let Value::Object(m) = v {
        for (k, x) in m.iter().filter(|(k, _)| *k != ARGS_KEY) {
            let short = !blank
                && match x {
                    Value::String(s) => s.chars().count() <= KEEP_CHARS && !s.contains('\n'),
                    Value::Number(_) | Value::Bool(_) | Value::Null => true,
                    _ => false,
                };
            if short {
                out.insert(k.clone(), x.clone());
            } else {
                dropped += 1;
            }
        }
    }
    let note = match dropped {
        _ if blank => ARGS_NOTE.to_owned(),
        0 => ARGS_NOTE.to_owned(),
        1 => "1 long argument clipped for brevity".to_owned(),
        n => format!("{n} long arguments clipped for brevity"),
    };
    out.insert(
        ARGS_KEY.to_owned(),
        Value::String(with_handle(&note, handle)),
    );
    Value::Object(out)
}

fn is_placeholder(a: &Arguments) -> bool {
    match a {
        Arguments::Json(s) => s.contains(&format!("\"{ARGS_KEY}\"")),
        Arguments::Value(v) => v.get(ARGS_KEY).is_some(),
        Arguments::Custom(s) => s.contains(ARGS_NOTE),
    }
}

#[cfg(test)]
mod tests {
    use abridge_model::decode;
    use serde_json::json;

    use super::*;

    /// Assistant messages with and without text, with short, long,
    /// already clipped and unparsable arguments.
    fn messages() -> Vec<Message> {
        let long = json!({"path": "src/a.rs", "content": "x".repeat(300)}).to_string();
        let clipped = args_json(None);
        let mut body = vec![json!({"role": "user", "content": "go"})];
        for (text, args) in [
            ("", r#"{"path":"a"}"#.to_owned()),
            ("Reading it.", r#"{"path":"a"}"#.to_owned()),
            ("", long.clone()),
            ("Writing it.", long),
            ("Again.", clipped),
            ("", format!("not json {}", "y".repeat(300))),
        ] {
            body.push(
                json!({"role": "assistant", "content": text, "tool_calls": [{"id": "c",
                "type": "function", "function": {"name": "write", "arguments": args}}]}),
            );
            body.push(json!({"role": "tool", "tool_call_id": "c", "content": "ok"}));
        }
        body.push(json!({"role": "assistant", "content": "Done."}));
        let body = json!({"model": "gpt-4o", "messages": body}).to_string();
        decode(body.as_bytes()).unwrap().remove(0).messages
    }

    #[test]
    fn a_message_skipped_as_having_no_work_is_one_clipping_would_not_change() {
        let mut cfgs = Vec::new();
        for strip_reasoning in [false, true] {
            for blank_args in [false, true] {
                cfgs.push(PolicyConfig {
                    strip_reasoning,
                    blank_args,
                    ..PolicyConfig::default()
                });
            }
        }
        let mut skipped = 0;
        for cfg in &cfgs {
            for m in messages().iter().filter(|m| m.role == Role::Assistant) {
                let changes = clip_message(&mut m.clone(), cfg, &mut None);
                if !has_work(m, cfg) {
                    skipped += 1;
                    assert_eq!(changes, 0, "skipped {m:?} under {cfg:?}");
                }
            }
        }
        assert!(skipped > 0, "every message was worked on");
    }
}
