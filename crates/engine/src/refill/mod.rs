//! Using the room a compaction leaves. Clipping replaces a tool result or
//! a wrapped block (a page snapshot) whole, so a history can land far under
//! its target: one large result clipped is the difference between keeping
//! all of it and none. Once the steps have reached the target, the results
//! and blocks this compaction clipped that are still in the history get
//! their content back, newest first: whole when it fits what is left of
//! the target, else as an excerpt sized to it ([`excerpt`]) headed by what
//! it is and its handle, so the whole stays one recall away. A result is
//! never all-or-nothing. Then clipped tool
//! arguments (the agent's own edits) come back whole where what the
//! results left holds them, newest first. Before all of it, a clipped
//! call's note names more of what its arguments held ([`name_more`]): a
//! few tokens each, and the agent's own names are the ones it uses again.

use std::collections::HashSet;

use abridge_model::{Arguments, Message, Part};
use abridge_summarize::ident::prose_identifiers;
use abridge_tokens::{Counted, TokenCounter};

use crate::placeholder::{self, args_handle, block_excerpt_header, excerpt_header, external_body};
use crate::policy::naming_more;
use crate::recall::{Handle, Original, OriginalKind};
use crate::slot::Slot;
use excerpt::fit;

mod excerpt;

/// Room under which nothing is given back: a few lines are not worth a
/// prefix the provider's cache would miss...
const MIN_ROOM: Counted = Counted::new(200);

/// ...unless the target is so small that those few lines are a tenth of
/// it: room that large is not left unused.
const MIN_ROOM_SHARE: f64 = 0.1;

/// The least room under `target` worth giving back.
pub(crate) fn min_room(target: Counted) -> Counted {
    MIN_ROOM.min(target.scaled(MIN_ROOM_SHARE))
}

/// A clipped result, call or wrapped block still in the history: where it
/// is (a block: in the text part `part`, or in text part `sub` of the
/// result `part`), and its original.
struct Clipped<'o> {
    message: usize,
    part: usize,
    sub: Option<usize>,
    original: &'o Original,
}

impl Clipped<'_> {
    fn is_call(&self) -> bool {
        self.original.kind == OriginalKind::Arguments
    }
}

/// The history a refill grows: its messages, the tokens of each and of
/// the whole (tools included), kept up to date, and the target it stays
/// within.
pub(crate) struct Room<'w, 's> {
    pub(crate) messages: &'w mut [Slot<'s>],
    pub(crate) counts: &'w mut [Counted],
    pub(crate) total: &'w mut Counted,
    pub(crate) target: Counted,
}

impl Room<'_, '_> {
    /// What the target leaves.
    fn left(&self) -> Counted {
        self.target.saturating_sub(*self.total)
    }

    /// Puts `m` in place of message `i` when the history still fits the
    /// target with it; whether it did.
    fn replace(&mut self, i: usize, m: Message, counter: &mut TokenCounter) -> bool {
        let now = counter.count_message(&m).total();
        let after = self.total.saturating_sub(self.counts[i]) + now;
        if after > self.target {
            return false;
        }
        *self.total = after;
        self.counts[i] = now;
        self.messages[i] = m.into();
        true
    }
}

/// Gives what `room` leaves to what this compaction clipped into
/// `originals`, newest first: to the notes of its calls when `more_names`
/// ([`name_more`]), then back to its results, wrapped blocks and calls;
/// returns how many it gave room to and the tokens it added.
pub(crate) fn refill(
    room: &mut Room<'_, '_>,
    originals: &[Original],
    counter: &mut TokenCounter,
    more_names: bool,
) -> (usize, Counted) {
    let before = *room.total;
    let least = min_room(room.target);
    let mut clipped = clipped(room.messages, originals);
    let mut given = match more_names {
        true => name_more(room, &clipped, counter),
        false => 0,
    };
    // Results and blocks first: an excerpt sized to the room keeps the
    // lines that name the most, where arguments come back whole or not at
    // all.
    clipped.sort_by_key(Clipped::is_call);
    if clipped.is_empty() || room.left() < least {
        return (given, room.total.saturating_sub(before));
    }
    let mut held = held_names(room.messages);
    for c in clipped {
        let left = room.left();
        if left < least {
            break;
        }
        let Some(text) = text_of(c.original) else {
            continue;
        };
        let mut m = Message::clone(&room.messages[c.message]);
        let Some(names) = give_back(&c, &mut m, &text, left, &held, counter) else {
            continue;
        };
        if room.replace(c.message, m, counter) {
            held.extend(names);
            given += 1;
        }
    }
    (given, room.total.saturating_sub(before))
}

/// Gives what `room` leaves to the notes of the calls of `clipped`, in
/// its order (newest first): each names more of what its arguments held
/// ([`naming_more`]) where the room holds the longer note. Returns how
/// many notes grew.
fn name_more(
    room: &mut Room<'_, '_>,
    clipped: &[Clipped<'_>],
    counter: &mut TokenCounter,
) -> usize {
    let mut named = 0;
    for c in clipped.iter().filter(|c| c.is_call()) {
        if room.left() == Counted::ZERO {
            break;
        }
        let Some(text) = text_of(c.original) else {
            continue;
        };
        let mut m = Message::clone(&room.messages[c.message]);
        let mut original = m.parts[c.part].clone();
        let (Some(()), Part::ToolCall(call)) =
            (restore_call(&mut original, &text), &mut m.parts[c.part])
        else {
            continue;
        };
        let Part::ToolCall(original) = original else {
            continue;
        };
        let more = naming_more(&original.arguments, &c.original.handle);
        if more == call.arguments {
            continue;
        }
        call.arguments = more;
        named += usize::from(room.replace(c.message, m, counter));
    }
    named
}

/// Puts `text`, the original of `c`, back into `m` (a copy of its
/// message) within `room`: a call's arguments whole, a result's or a
/// block's content whole or as an excerpt. The names it brought back, or
/// `None` when it does not fit.
fn give_back(
    c: &Clipped<'_>,
    m: &mut Message,
    text: &str,
    room: Counted,
    held: &HashSet<String>,
    counter: &TokenCounter,
) -> Option<Vec<String>> {
    let handle = &c.original.handle;
    // What a placeholder takes now comes back with the room.
    match c.original.kind {
        OriginalKind::Arguments => {
            restore_call(&mut m.parts[c.part], text)?;
            Some(prose_identifiers(text))
        }
        OriginalKind::External => {
            let clipped = format!("\n{}\n", external_body(Some(handle)));
            let room = room + counter.count_text(&clipped);
            let header = |n| block_excerpt_header(n, handle);
            let new = fit(text, &header, room, held, counter)?;
            let new = match new == text {
                true => new,
                false => format!("\n{new}\n"),
            };
            let body = text_at(m, c.part, c.sub)?;
            let at = body.find(&clipped)?;
            body.replace_range(at..at + clipped.len(), &new);
            Some(prose_identifiers(&new))
        }
        _ => {
            let Part::ToolResult(r) = &mut m.parts[c.part] else {
                return None;
            };
            let room = room + counter.count_text(&r.text());
            let new = fit(text, &|n| excerpt_header(n, handle), room, held, counter)?;
            let names = prose_identifiers(&new);
            r.replace_with_text(new);
            Some(names)
        }
    }
}

/// The text of part `part` of `m`, or of its part `sub` when it is a
/// result.
fn text_at(m: &mut Message, part: usize, sub: Option<usize>) -> Option<&mut String> {
    let p = match (&mut m.parts[part], sub) {
        (Part::ToolResult(r), Some(k)) => r.parts.get_mut(k)?,
        (p, None) => p,
        _ => return None,
    };
    match p {
        Part::Text(t) => Some(&mut t.text),
        _ => None,
    }
}

/// The results, calls and wrapped blocks of `messages` clipped into
/// `originals` (their placeholder names one of the kind it replaces),
/// newest first. A read that a later read supersedes stays clipped: its
/// file is in the history again.
fn clipped<'o>(messages: &[Slot<'_>], originals: &'o [Original]) -> Vec<Clipped<'o>> {
    let by_handle: std::collections::HashMap<&Handle, &Original> = originals
        .iter()
        .filter(|o| match o.kind {
            OriginalKind::ToolResult | OriginalKind::External => true,
            // Arguments kept with the text stripped beside them stay
            // clipped: the text would not come back with them.
            OriginalKind::Arguments => o.pieces.len() == 1,
            _ => false,
        })
        .map(|o| (&o.handle, o))
        .collect();
    let mut out = Vec::new();
    let mut push = |message, part, sub, handle: Option<Handle>, kind| {
        let original = handle.and_then(|h| by_handle.get(&h).copied());
        if let Some(original) = original.filter(|o| o.kind == kind) {
            out.push(Clipped {
                message,
                part,
                sub,
                original,
            });
        }
    };
    for (i, m) in messages.iter().enumerate().rev() {
        for (j, p) in m.parts.iter().enumerate().rev() {
            match p {
                Part::ToolResult(r) => {
                    if let [Part::Text(t)] = r.parts.as_slice()
                        && gives_back(&t.text)
                    {
                        let handle = placeholder::handle_in(&t.text);
                        push(i, j, None, handle, OriginalKind::ToolResult);
                    }
                    for (k, q) in r.parts.iter().enumerate().rev() {
                        for h in q.as_text().map(blocks_in).unwrap_or_default() {
                            push(i, j, Some(k), Some(h), OriginalKind::External);
                        }
                    }
                }
                Part::Text(t) => {
                    for h in blocks_in(&t.text) {
                        push(i, j, None, Some(h), OriginalKind::External);
                    }
                }
                Part::ToolCall(c) => {
                    push(
                        i,
                        j,
                        None,
                        args_handle(&c.arguments),
                        OriginalKind::Arguments,
                    );
                }
                _ => {}
            }
        }
    }
    out
}

/// The handles of the clipped block bodies in `text`, last first.
fn blocks_in(text: &str) -> Vec<Handle> {
    if !placeholder::may_hold_external_body(text) {
        return Vec::new();
    }
    let mut found: Vec<Handle> = Handle::find_all(text)
        .filter(|h| text.contains(&format!("\n{}\n", external_body(Some(h)))))
        .collect();
    found.reverse();
    found
}

/// Whether a result whose text is `text` takes room back: a placeholder
/// (not of a read the history holds again), or a newest result the floor
/// ladder cut to fit before the steps left room.
fn gives_back(text: &str) -> bool {
    (placeholder::is_result_placeholder(text) && !placeholder::is_superseded(text))
        || placeholder::is_cut_result(text)
}

/// The names the history's text, calls and results hold as they are.
pub(crate) fn held_names(messages: &[Slot<'_>]) -> HashSet<String> {
    let mut held = HashSet::new();
    for m in messages {
        for p in &m.parts {
            match p {
                Part::Text(t) => held.extend(prose_identifiers(&t.text)),
                Part::ToolCall(c) => held.extend(prose_identifiers(&c.arguments.to_json_text())),
                Part::ToolResult(r) => held.extend(prose_identifiers(&r.text())),
                _ => {}
            }
        }
    }
    held
}

/// An original's text, when it is all text.
pub(crate) fn text_of(o: &Original) -> Option<String> {
    let mut out = String::new();
    for p in &o.pieces {
        match p {
            crate::recall::Piece::Text { text } => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
            crate::recall::Piece::Image { .. } => return None,
        }
    }
    Some(out)
}

/// Puts the arguments `text` back into the call `part`, in the form its
/// placeholder has; `None` when it is not a call or they do not parse.
fn restore_call(part: &mut Part, text: &str) -> Option<()> {
    let Part::ToolCall(call) = part else {
        return None;
    };
    call.arguments = match &call.arguments {
        Arguments::Json(_) => Arguments::Json(text.to_owned()),
        Arguments::Value(_) => Arguments::Value(serde_json::from_str(text).ok()?),
        Arguments::Custom(_) => Arguments::Custom(text.to_owned()),
    };
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use abridge_tokens::TokenizerKind;

    /// The refill (naming more when `more_names`) over `messages` with
    /// `room` under its target: the history after it and how many items it
    /// gave room to. The target is never passed.
    fn with_room<'m>(
        more_names: bool,
        messages: &'m [Message],
        originals: &[Original],
        room: u64,
        counter: &mut TokenCounter,
    ) -> (Vec<Slot<'m>>, usize) {
        let mut slots = crate::slot::borrowed(messages);
        let mut counts: Vec<Counted> = messages
            .iter()
            .map(|m| counter.count_message(m).total())
            .collect();
        let mut total: Counted = counts.iter().copied().sum();
        let target = total + Counted::new(room);
        let mut room = Room {
            messages: &mut slots,
            counts: &mut counts,
            total: &mut total,
            target,
        };
        let (given, _) = refill(&mut room, originals, counter, more_names);
        assert!(total <= target, "{total:?} > {target:?}");
        (slots, given)
    }

    /// A call and its result, both clipped: the history and the
    /// originals.
    fn clipped_pair() -> (Vec<Message>, Vec<Original>) {
        let content = "pub fn write_ledger_entry() {}\n".repeat(30);
        let args = serde_json::json!({"path": "src/ledger.rs", "content": content});
        let body = serde_json::json!({"model": "gpt-4o", "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "write_file", "arguments": args.to_string()}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "fn read_back() {}\n".repeat(40)},
        ]});
        let mut messages = abridge_model::decode(body.to_string().as_bytes())
            .unwrap()
            .remove(0)
            .messages;
        let call = messages[1].tool_calls().next().unwrap().clone();
        let Part::ToolResult(r) = &messages[2].parts[0] else {
            unreachable!()
        };
        let originals = vec![
            Original::arguments(&call),
            Original::tool_result(r, Some(&call)),
        ];
        let Part::ToolCall(c) = &mut messages[1].parts[0] else {
            unreachable!()
        };
        let note = placeholder::args_json(
            "1 long argument clipped for brevity",
            Some(&originals[0].handle),
        );
        c.arguments = Arguments::Json(note);
        let Part::ToolResult(r) = &mut messages[2].parts[0] else {
            unreachable!()
        };
        r.replace_with_text(placeholder::result(Some(&originals[1].handle)));
        (messages, originals)
    }

    /// Clipped arguments come back whole when the room holds them, after
    /// the results: with room for both, both; with room for the result
    /// only, the result.
    #[test]
    fn arguments_come_back_whole_after_the_results() {
        let mut counter = TokenCounter::new(TokenizerKind::O200kBase);
        let (messages, originals) = clipped_pair();
        let run = |room: u64, counter: &mut TokenCounter| {
            let (slots, given) = with_room(false, &messages, &originals, room, counter);
            let args = slots[1]
                .tool_calls()
                .next()
                .unwrap()
                .arguments
                .to_json_text()
                .into_owned();
            (
                given,
                args.contains("write_ledger_entry"),
                slots[2]
                    .tool_results()
                    .next()
                    .unwrap()
                    .text()
                    .contains("read_back"),
            )
        };
        let whole = |o: &Original| counter.count_text(&text_of(o).unwrap()).get();
        let (args, result) = (whole(&originals[0]), whole(&originals[1]));
        assert_eq!(run(args + result + 100, &mut counter), (2, true, true));
        let (given, args_back, result_back) = run(result + 60, &mut counter);
        assert_eq!((given, args_back, result_back), (1, false, true));
    }

    /// A clipped call's note names more of what its arguments held where
    /// the room holds the longer note, and stays as it is where it does
    /// not: the target is never passed for a name.
    #[test]
    fn a_clipped_calls_note_names_more_only_where_the_room_holds_it() {
        let mut counter = TokenCounter::new(TokenizerKind::O200kBase);
        let plan: String = (0..20)
            .map(|i| format!("Call `ledger_step_{i}`.\n{}\n", "Check it. ".repeat(100)))
            .collect();
        let args = serde_json::json!({"path": "docs/plan.md", "content": plan});
        let body = serde_json::json!({"model": "gpt-4o", "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "write_file", "arguments": args.to_string()}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]});
        let mut messages = abridge_model::decode(body.to_string().as_bytes())
            .unwrap()
            .remove(0)
            .messages;
        let originals = vec![Original::arguments(
            messages[1].tool_calls().next().unwrap(),
        )];
        let Part::ToolCall(c) = &mut messages[1].parts[0] else {
            unreachable!()
        };
        c.arguments = Arguments::Json(placeholder::args_json(
            "1 long argument clipped for brevity",
            Some(&originals[0].handle),
        ));
        let mut run = |room: u64| {
            let (slots, named) = with_room(true, &messages, &originals, room, &mut counter);
            let note = slots[1]
                .tool_calls()
                .next()
                .unwrap()
                .arguments
                .to_json_text();
            assert!(note.contains(originals[0].handle.as_str()), "{note}");
            (named, note.matches("ledger_step_").count())
        };
        let (named, names) = run(500);
        assert_eq!(named, 1);
        assert!(names > 8, "{names} names");
        assert_eq!(run(0), (0, 0));
        assert_eq!(run(5), (0, 0));
    }
}
