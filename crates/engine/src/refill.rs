//! Using the room a compaction leaves. Clipping replaces a tool result
//! whole, so a history can land far under its target: one large result
//! clipped is the difference between keeping all of it and none. Once the
//! steps have reached the target, the results this compaction clipped that
//! are still in the history get their content back, newest first: whole
//! when it fits what is left of the target, else as an excerpt sized to it
//! — its first lines, its last lines and, between them, the lines that
//! name the most of what the history does not already hold, each gap
//! said — headed by what it is and its handle, so the whole stays one
//! recall away. A result is never all-or-nothing. Then clipped tool
//! arguments (the agent's own edits) come back whole where what the
//! results left holds them, newest first. Before all of it, a clipped
//! call's note names more of what its arguments held ([`name_more`]): a
//! few tokens each, and the agent's own names are the ones it uses again.

use std::collections::HashSet;

use abridge_model::{Arguments, Message, Part};
use abridge_summarize::ident::prose_identifiers;
use abridge_tokens::{Counted, TokenCounter};

use crate::placeholder::{self, args_handle, excerpt_header};
use crate::policy::naming_more;
use crate::recall::{Handle, Original, OriginalKind};
use crate::slot::Slot;

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

/// Shares of an excerpt's room for its first lines and its last ones; the
/// rest goes to the lines between that name the most.
const HEAD_SHARE: f64 = 0.5;
const TAIL_SHARE: f64 = 0.2;

/// A clipped result or call still in the history: where it is, and its
/// original.
struct Clipped<'o> {
    message: usize,
    part: usize,
    original: &'o Original,
}

impl Clipped<'_> {
    fn is_call(&self) -> bool {
        self.original.kind == OriginalKind::Arguments
    }
}

/// Gives the room under `target` back to the results and calls clipped
/// into `originals`, newest first; returns how many it gave back and the tokens
/// it added. `counts` are the tokens of each of `messages` and `total`
/// those of the history (tools included); both are kept up to date.
pub(crate) fn refill(
    messages: &mut [Slot<'_>],
    counts: &mut [Counted],
    total: &mut Counted,
    target: Counted,
    originals: &[Original],
    counter: &mut TokenCounter,
) -> (usize, Counted) {
    let before = *total;
    let mut given = 0;
    let mut clipped = clipped(messages, originals);
    // Results first: an excerpt sized to the room keeps the lines that
    // name the most, where arguments come back whole or not at all.
    clipped.sort_by_key(Clipped::is_call);
    if clipped.is_empty() || target.saturating_sub(*total) < min_room(target) {
        return (0, Counted::ZERO);
    }
    let mut held = held_names(messages);
    for c in clipped {
        let room = target.saturating_sub(*total);
        if room < min_room(target) {
            break;
        }
        let Some(text) = text_of(c.original) else {
            continue;
        };
        let old = counts[c.message];
        let mut m = Message::clone(&messages[c.message]);
        let names = match c.is_call() {
            true => match restore_call(&mut m.parts[c.part], &text) {
                Some(()) => prose_identifiers(&text),
                None => continue,
            },
            false => {
                // What the placeholder takes now comes back with the room.
                let Some(new) = fit(
                    &text,
                    &c.original.handle,
                    room + placeholder_tokens(&messages[c.message], c.part, counter),
                    &held,
                    counter,
                ) else {
                    continue;
                };
                let Part::ToolResult(r) = &mut m.parts[c.part] else {
                    continue;
                };
                let names = prose_identifiers(&new);
                r.replace_with_text(new);
                names
            }
        };
        let now = counter.count_message(&m).total();
        let after = total.saturating_sub(old) + now;
        if after > target {
            continue;
        }
        *total = after;
        held.extend(names);
        counts[c.message] = now;
        messages[c.message] = m.into();
        given += 1;
    }
    (given, total.saturating_sub(before))
}

/// Gives the room under `target` to the notes of the calls clipped into
/// `originals`, newest first: each names more of what its arguments held
/// ([`naming_more`]) where the room holds the longer note. Returns how
/// many notes grew and the tokens they added; `counts` and `total` as in
/// [`refill`].
pub(crate) fn name_more(
    messages: &mut [Slot<'_>],
    counts: &mut [Counted],
    total: &mut Counted,
    target: Counted,
    originals: &[Original],
    counter: &mut TokenCounter,
) -> (usize, Counted) {
    let before = *total;
    let mut named = 0;
    for c in clipped(messages, originals).iter().filter(|c| c.is_call()) {
        if *total >= target {
            break;
        }
        let Some(text) = text_of(c.original) else {
            continue;
        };
        let mut m = Message::clone(&messages[c.message]);
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
        let now = counter.count_message(&m).total();
        let after = total.saturating_sub(counts[c.message]) + now;
        if after > target {
            continue;
        }
        *total = after;
        counts[c.message] = now;
        messages[c.message] = m.into();
        named += 1;
    }
    (named, total.saturating_sub(before))
}

/// The results and calls of `messages` clipped into `originals` (their
/// placeholder names one), newest first. A read that a later read
/// supersedes stays clipped: its file is in the history again.
fn clipped<'o>(messages: &[Slot<'_>], originals: &'o [Original]) -> Vec<Clipped<'o>> {
    let by_handle: std::collections::HashMap<&Handle, &Original> = originals
        .iter()
        .filter(|o| match o.kind {
            OriginalKind::ToolResult => true,
            // Arguments kept with the text stripped beside them stay
            // clipped: the text would not come back with them.
            OriginalKind::Arguments => o.pieces.len() == 1,
            _ => false,
        })
        .map(|o| (&o.handle, o))
        .collect();
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate().rev() {
        for (j, p) in m.parts.iter().enumerate().rev() {
            let handle = match p {
                Part::ToolResult(r) => match r.parts.as_slice() {
                    [Part::Text(t)] if gives_back(&t.text) => placeholder::handle_in(&t.text),
                    _ => None,
                },
                Part::ToolCall(c) => args_handle(&c.arguments),
                _ => None,
            };
            let original = handle.and_then(|h| by_handle.get(&h));
            if let Some(original) = original {
                out.push(Clipped {
                    message: i,
                    part: j,
                    original,
                });
            }
        }
    }
    out
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

/// Tokens of part `j` of `m` as it is (a placeholder).
fn placeholder_tokens(m: &Message, j: usize, counter: &TokenCounter) -> Counted {
    match &m.parts[j] {
        Part::ToolResult(r) => counter.count_text(&r.text()),
        _ => Counted::ZERO,
    }
}

/// The result's text whole when it fits `room`, else an excerpt that does
/// (its lines naming what `held` lacks first); `None` when not even a few
/// lines do.
fn fit(
    text: &str,
    handle: &Handle,
    room: Counted,
    held: &HashSet<String>,
    counter: &TokenCounter,
) -> Option<String> {
    // A little for the framing a part's text gets in a message.
    let room = room.saturating_sub(Counted::new(8));
    if counter.count_text(text) <= room {
        return Some(text.to_owned());
    }
    let lines: Vec<&str> = text.lines().collect();
    // Sized by an estimate, then checked: smaller each time it is over.
    let mut budget = room;
    for _ in 0..4 {
        let excerpt = excerpt(&lines, text, handle, budget, held, counter)?;
        if counter.count_text(&excerpt) <= room {
            return Some(excerpt);
        }
        budget = Counted::new(budget.get() * 4 / 5);
    }
    None
}

/// An excerpt of `lines` (of `text`) in about `budget` tokens: its header,
/// then the first lines, the lines between that name the most of what
/// neither `held` nor the lines already kept name, and the last lines, in
/// their order, each gap said.
fn excerpt(
    lines: &[&str],
    text: &str,
    handle: &Handle,
    budget: Counted,
    held: &HashSet<String>,
    counter: &TokenCounter,
) -> Option<String> {
    let header = excerpt_header(lines.len(), handle);
    let room = budget.saturating_sub(counter.count_text(&header) + Counted::new(16));
    if room < Counted::new(32) {
        return None;
    }
    if lines.len() < 3 {
        // One long line (a minified document): its beginning and end.
        let bytes =
            text.len() * room.get() as usize / counter.count_text(text).get().max(1) as usize;
        let clipped = abridge_model::text::clip(text, bytes, bytes / 4);
        return Some(format!("{header}\n{clipped}"));
    }
    let tokens: Vec<u64> = lines
        .iter()
        .map(|l| counter.count_text(l).get() + 1)
        .collect();
    let room = room.get();
    let mut keep = vec![false; lines.len()];
    let mut used = 0;
    // The first lines.
    let head_room = (room as f64 * HEAD_SHARE) as u64;
    for (i, t) in tokens.iter().enumerate() {
        if used + t > head_room {
            break;
        }
        keep[i] = true;
        used += t;
    }
    // The last lines.
    let tail_room = used + (room as f64 * TAIL_SHARE) as u64;
    for i in (0..lines.len()).rev() {
        if keep[i] || used + tokens[i] > tail_room {
            break;
        }
        keep[i] = true;
        used += tokens[i];
    }
    // Between them, the lines that name the most that is new (per
    // token), first first; a line whose names another kept line already
    // gave adds none. The room left goes to the lines that name the most,
    // new or not.
    let mut named: HashSet<String> = (0..lines.len())
        .filter(|&i| keep[i])
        .flat_map(|i| prose_identifiers(lines[i]))
        .collect();
    let new_names = |line: &str, named: &HashSet<String>| -> Vec<String> {
        prose_identifiers(line)
            .into_iter()
            .filter(|id| !held.contains(id) && !named.contains(id))
            .collect()
    };
    let order = densest_first(lines, &keep, &tokens, |l| new_names(l, &named).len());
    for i in order {
        let new = new_names(lines[i], &named);
        if !new.is_empty() && take(i, &tokens, &mut keep, &mut used, room) {
            named.extend(new);
        }
    }
    for i in densest_first(lines, &keep, &tokens, |l| prose_identifiers(l).len()) {
        take(i, &tokens, &mut keep, &mut used, room);
    }
    Some(kept_lines(header, lines, &keep))
}

/// The lines not kept that `names` counts some names in, the most per
/// token first, first first.
fn densest_first(
    lines: &[&str],
    keep: &[bool],
    tokens: &[u64],
    names: impl Fn(&str) -> usize,
) -> Vec<usize> {
    let mut found: Vec<(usize, usize)> = (0..lines.len())
        .filter(|&i| !keep[i])
        .map(|i| (i, names(lines[i])))
        .filter(|(_, n)| *n > 0)
        .collect();
    found.sort_by(|a, b| {
        let density = |(i, n): &(usize, usize)| *n as f64 / tokens[*i] as f64;
        density(b).total_cmp(&density(a)).then(a.0.cmp(&b.0))
    });
    found.into_iter().map(|(i, _)| i).collect()
}

/// Keeps line `i` when it and the gap it opens (said in a few tokens) fit
/// `room`; whether it did.
fn take(i: usize, tokens: &[u64], keep: &mut [bool], used: &mut u64, room: u64) -> bool {
    if keep[i] || *used + tokens[i] + 8 > room {
        return false;
    }
    keep[i] = true;
    *used += tokens[i] + 8;
    true
}

/// `header`, then the lines kept, in their order, each gap said.
fn kept_lines(header: String, lines: &[&str], keep: &[bool]) -> String {
    let mut out = header;
    let mut cut = 0;
    for (line, kept) in lines.iter().zip(keep) {
        if !kept {
            cut += 1;
            continue;
        }
        if cut > 0 {
            out.push_str(&format!("\n… [{cut} lines cut] …"));
            cut = 0;
        }
        out.push('\n');
        out.push_str(line);
    }
    if cut > 0 {
        out.push_str(&format!("\n… [{cut} lines cut] …"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use abridge_tokens::TokenizerKind;

    fn handle() -> Handle {
        Handle::parse("abr_0123456789").unwrap()
    }

    #[test]
    fn an_excerpt_keeps_the_ends_and_the_lines_that_name_the_most_within_its_room() {
        let counter = TokenCounter::new(TokenizerKind::O200kBase);
        let mut lines: Vec<String> = (0..400)
            .map(|i| format!("plain words on line {i}"))
            .collect();
        lines[200] = "fn parse_invoice_total(order: &OrderRecord) -> InvoiceTotal".into();
        let text = lines.join("\n");
        let whole = counter.count_text(&text);
        let room = Counted::new(whole.get() / 4);
        let e = fit(&text, &handle(), room, &HashSet::new(), &counter).unwrap();
        assert!(
            counter.count_text(&e) <= room,
            "{}",
            counter.count_text(&e).get()
        );
        assert!(e.starts_with("[excerpt of a tool result"), "{e}");
        assert!(e.contains("abr_0123456789"));
        assert!(e.contains("plain words on line 0\n"));
        assert!(e.contains("plain words on line 399"));
        assert!(
            e.contains("parse_invoice_total"),
            "the line that names the most"
        );
        assert!(e.contains("lines cut] …"));
        // With room for all of it, all of it.
        assert_eq!(
            fit(
                &text,
                &handle(),
                whole + Counted::new(9),
                &HashSet::new(),
                &counter
            ),
            Some(text.clone())
        );
        // Without room for a few lines, nothing.
        assert_eq!(
            fit(
                &text,
                &handle(),
                Counted::new(20),
                &HashSet::new(),
                &counter
            ),
            None
        );
    }

    #[test]
    fn a_long_line_is_cut_at_its_middle() {
        let counter = TokenCounter::new(TokenizerKind::O200kBase);
        let text = format!("{{\"a\": \"{}\", \"z\": 1}}", "x1 ".repeat(5000));
        let room = Counted::new(500);
        let e = fit(&text, &handle(), room, &HashSet::new(), &counter).unwrap();
        assert!(counter.count_text(&e) <= room);
        assert!(
            e.contains("{\"a\": \"x1") && e.ends_with("\"z\": 1}"),
            "{e}"
        );
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
            let mut slots: Vec<Slot<'_>> = crate::slot::borrowed(&messages);
            let mut counts: Vec<Counted> = messages
                .iter()
                .map(|m| counter.count_message(m).total())
                .collect();
            let mut total: Counted = counts.iter().copied().sum();
            let target = total + Counted::new(room);
            let (given, _) = refill(
                &mut slots,
                &mut counts,
                &mut total,
                target,
                &originals,
                counter,
            );
            assert!(total <= target);
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
            let mut slots: Vec<Slot<'_>> = crate::slot::borrowed(&messages);
            let mut counts: Vec<Counted> = messages
                .iter()
                .map(|m| counter.count_message(m).total())
                .collect();
            let mut total: Counted = counts.iter().copied().sum();
            let target = total + Counted::new(room);
            let (named, _) = name_more(
                &mut slots,
                &mut counts,
                &mut total,
                target,
                &originals,
                &mut counter,
            );
            assert!(total <= target);
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

    /// Where the room holds one of two lines, the one naming something
    /// the history lacks wins over a denser one whose names it holds.
    #[test]
    fn an_excerpt_prefers_the_names_the_history_does_not_hold() {
        let counter = TokenCounter::new(TokenizerKind::O200kBase);
        let mut lines: Vec<String> = (0..400)
            .map(|i| format!("plain words on line {i}"))
            .collect();
        let known = [
            "alpha_one",
            "beta_two",
            "gamma_three",
            "delta_four",
            "epsilon_five",
        ];
        lines[100] = known.join(" ");
        lines[300] = "zeta_six".into();
        let text = lines.join("\n");
        let held: HashSet<String> = known.iter().map(|s| s.to_string()).collect();
        let has = |e: &str, name: &str| e.contains(name);
        // The first room whose excerpt, knowing nothing held, takes the
        // denser line and not the other.
        let one_of_two = (60..400)
            .map(Counted::new)
            .find(|&room| {
                let e = fit(&text, &handle(), room, &HashSet::new(), &counter).unwrap_or_default();
                has(&e, "alpha_one") && !has(&e, "zeta_six")
            })
            .expect("a room that holds one of the two lines");
        let e = fit(&text, &handle(), one_of_two, &held, &counter).unwrap();
        assert!(has(&e, "zeta_six") && !has(&e, "alpha_one"), "{e}");
    }
}
