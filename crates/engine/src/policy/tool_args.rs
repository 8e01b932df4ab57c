//! `clip_tool_args`: long arguments of old tool calls are clipped; the tool
//! name, the call id and short scalar arguments (a path, an id, a short
//! command) stay, so pairing is intact, the API still accepts the call, and
//! the agent still sees what it did: `{"file_path": "src/lib.rs",
//! "_abridged": "2 long arguments clipped for brevity; recall abr_…"}`.
//! The note lists the first names the clipped arguments held that the
//! kept ones do not (a symbol an edit wrote, a path a patch touched): the
//! agent's own names are the ones it uses again. Where the compaction
//! leaves room, [`naming_more`] lists more of a long argument's names.
//! With `blank_args` no argument stays; with `strip_reasoning` the text of
//! the message that made the calls goes too, kept with the first call's
//! arguments for recall (Pilo #437).

use std::borrow::Cow;
use std::ops::Range;

use abridge_model::{Arguments, Message, Part, Role};
use abridge_summarize::ident::prose_identifiers;
use serde_json::{Map, Value};

use crate::config::PolicyConfig;
use crate::placeholder::{ARGS_KEY, ARGS_NOTE, args_json, is_args_placeholder, with_handle};
use crate::recall::{Found, Handle, Original, keep};
use crate::slot::Slot;

/// Longest string argument kept as it is.
const KEEP_CHARS: usize = 100;

/// Names of the clipped arguments a note lists while clipping, where the
/// room is not known yet...
const NAMES: usize = 8;

/// ...and, where the compaction leaves room, one more per this many
/// characters clipped (a document the agent wrote names more than a
/// one-line edit)...
const CHARS_PER_NAME: usize = 1_000;

/// ...up to this many: a note stays a note.
const MOST_NAMES: usize = 24;

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
            !short && !is_args_placeholder(&c.arguments)
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
        if with_text.is_none() && (short || is_args_placeholder(&call.arguments)) {
            continue;
        }
        let mut original = Original::arguments(call);
        if let Some(t) = &with_text {
            original = original.after_text(t);
        }
        let h = found.is_some().then(|| original.handle.clone());
        let clipped = clipped_form(&call.arguments, h.as_ref(), cfg.blank_args, false);
        let smaller = clipped.to_json_text().len() < text.len();
        if smaller || with_text.is_some() {
            keep(found, || original);
        }
        if smaller || (with_text.is_some() && !is_args_placeholder(&call.arguments)) {
            call.arguments = clipped;
            changed += 1;
        }
    }
    changed
}

/// A call's `original` arguments clipped under `handle`, the note naming
/// more than clipping does: one more name per [`CHARS_PER_NAME`]
/// characters clipped, at most [`MOST_NAMES`]. For the room a compaction
/// leaves ([`refill`](crate::refill)).
pub(crate) fn naming_more(original: &Arguments, handle: &Handle) -> Arguments {
    clipped_form(original, Some(handle), false, true)
}

/// `args` clipped, its note under `handle`; naming more (see
/// [`naming`]) when `more`.
fn clipped_form(args: &Arguments, handle: Option<&Handle>, blank: bool, more: bool) -> Arguments {
    // Text that is not an object of arguments is clipped whole.
    let whole = |s: &str| match blank {
        true => ARGS_NOTE.to_owned(),
        false => naming(ARGS_NOTE, &[s], "", more),
    };
    match args {
        Arguments::Json(s) => match serde_json::from_str::<Value>(s) {
            Ok(v) => Arguments::Json(clip(&v, handle, blank, more).to_string()),
            Err(_) => Arguments::Json(args_json(&whole(s), handle)),
        },
        Arguments::Value(v) => Arguments::Value(clip(v, handle, blank, more)),
        Arguments::Custom(s) => Arguments::Custom(format!("[{}]", with_handle(&whole(s), handle))),
    }
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
fn clip(v: &Value, handle: Option<&Handle>, blank: bool, more: bool) -> Value {
    let mut out = Map::new();
    let mut dropped = Vec::new();
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
                dropped.push(match x {
                    Value::String(s) => Cow::Borrowed(s.as_str()),
                    other => Cow::Owned(other.to_string()),
                });
            }
        }
    }
    let note = match dropped.len() {
        _ if blank => ARGS_NOTE.to_owned(),
        0 => ARGS_NOTE.to_owned(),
        1 => "1 long argument clipped for brevity".to_owned(),
        n => format!("{n} long arguments clipped for brevity"),
    };
    let note = match blank {
        true => note,
        false => naming(
            &note,
            &dropped,
            &serde_json::to_string(&out).unwrap_or_default(),
            more,
        ),
    };
    out.insert(
        ARGS_KEY.to_owned(),
        Value::String(with_handle(&note, handle)),
    );
    Value::Object(out)
}

/// `note`, then the first names `dropped` held that `kept` does not:
/// [`NAMES`], or when `more`, one more per [`CHARS_PER_NAME`] characters
/// dropped, at most [`MOST_NAMES`].
fn naming<S: AsRef<str>>(note: &str, dropped: &[S], kept: &str, more: bool) -> String {
    let chars: usize = dropped.iter().map(|t| t.as_ref().len()).sum();
    let most = match more {
        true => (NAMES + chars / CHARS_PER_NAME).min(MOST_NAMES),
        false => NAMES,
    };
    let mut names: Vec<String> = Vec::new();
    for text in dropped {
        for id in prose_identifiers(text.as_ref()) {
            if names.len() == most {
                break;
            }
            if !kept.contains(id.as_str()) && !names.contains(&id) {
                names.push(id);
            }
        }
    }
    match names.is_empty() {
        true => note.to_owned(),
        false => format!("{note}, naming {}", names.join(", ")),
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
        let clipped = args_json(ARGS_NOTE, None);
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

    /// The arguments of `conv`'s calls once clipped with `cfg`.
    fn notes_with(conv: &abridge_model::Conversation, cfg: &PolicyConfig) -> Vec<String> {
        let mut out = Vec::new();
        for m in conv.messages.iter().filter(|m| m.role == Role::Assistant) {
            let mut m = m.clone();
            clip_message(&mut m, cfg, &mut None);
            out.extend(
                m.tool_calls()
                    .map(|c| c.arguments.to_json_text().into_owned()),
            );
        }
        out
    }

    /// Clipping names [`NAMES`]; where there is room, the longer what a
    /// call's arguments lose, the more of its names the note keeps: a plan
    /// the agent wrote names more than a one-line edit, and the note stays
    /// a note.
    #[test]
    fn a_longer_clipped_argument_names_more_where_there_is_room_up_to_a_bound() {
        let count = |sections: usize| {
            let plan: String = (0..sections)
                .map(|i| {
                    format!(
                        "Call `plan_step_{i}`.\n{}\n",
                        "Then check it again. ".repeat(40)
                    )
                })
                .collect();
            let body = json!({"model": "gpt-4o", "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
                    "function": {"name": "write", "arguments":
                        json!({"path": "docs/plan.md", "content": plan}).to_string()}}]},
                {"role": "tool", "tool_call_id": "c", "content": "ok"}
            ]});
            let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
            let clipped = notes_with(&conv, &PolicyConfig::default());
            let call = conv.messages[1].tool_calls().next().unwrap();
            let more = naming_more(&call.arguments, &Handle::parse("abr_plan12").unwrap());
            let more = more.to_json_text();
            assert!(
                more.contains("docs/plan.md") && more.contains("abr_plan12"),
                "{more}"
            );
            let named = |s: &str| s.matches("plan_step_").count();
            (plan.len(), named(&clipped[0]), named(&more))
        };
        let (len, clipped, more) = count(12);
        assert_eq!(clipped, NAMES);
        assert_eq!(more, 12.min(NAMES + len / CHARS_PER_NAME), "{len} chars");
        assert!(more > NAMES, "{more} of 12");
        let (_, _, most) = count(60);
        assert_eq!(most, MOST_NAMES);
    }

    /// A clipped call's note lists the names its clipped arguments held
    /// that its kept ones do not, the first few, in JSON and free-form
    /// arguments alike; with `blank_args` nothing of them stays.
    #[test]
    fn a_clipped_calls_note_names_what_its_arguments_held() {
        let content = format!(
            "fn parse_invoice_total(order: &OrderRecord) {{}}\n// see src/a.rs\n{}\n{}",
            "plain words here ".repeat(20),
            (0..20)
                .map(|i| format!("helper_{i}()"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let patch = format!(
            "*** Begin Patch\n*** Update File: crates/billing/src/invoice.rs\n{}*** End Patch",
            "+ let total = 0;\n".repeat(20)
        );
        let body = json!({"model": "gpt-5", "input": [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "name": "write",
             "arguments": json!({"path": "src/a.rs", "content": content}).to_string()},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": patch},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"}
        ]});
        let conv = decode(body.to_string().as_bytes()).unwrap().remove(0);
        let notes = notes_with(&conv, &PolicyConfig::default());
        assert_eq!(notes.len(), 2, "{notes:?}");
        let write = &notes[0];
        assert!(
            write.contains(
                "1 long argument clipped for brevity, naming parse_invoice_total, helper_0,"
            ),
            "{write}"
        );
        assert_eq!(
            write.matches("src/a.rs").count(),
            1,
            "the kept path is not named again: {write}"
        );
        assert_eq!(
            write.matches("helper_").count(),
            NAMES - 1,
            "at most {NAMES} names: {write}"
        );
        assert!(!write.contains("plain"), "{write}");
        assert!(
            notes[1].contains("naming crates/billing/src/invoice.rs"),
            "{}",
            notes[1]
        );
        let blank = PolicyConfig {
            blank_args: true,
            ..PolicyConfig::default()
        };
        for note in notes_with(&conv, &blank) {
            assert!(!note.contains("naming"), "{note}");
        }
    }
}
