//! Excerpts sized to a room: a text's first lines, its last lines and,
//! between them, the lines that name the most of what the history does
//! not already hold, each gap said, under a header that names the whole.

use std::collections::HashSet;

use abridge_summarize::ident::prose_identifiers;
use abridge_tokens::{Counted, TokenCounter};

/// Shares of an excerpt's room for its first lines and its last ones; the
/// rest goes to the lines between that name the most.
const HEAD_SHARE: f64 = 0.5;
const TAIL_SHARE: f64 = 0.2;

/// `text` whole when it fits `room`, else an excerpt that does, headed
/// by `header` of its number of lines (its lines naming what `held` lacks
/// first); `None` when not even a few lines do.
pub(super) fn fit(
    text: &str,
    header: &dyn Fn(usize) -> String,
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
        let excerpt = excerpt(&lines, text, header, budget, held, counter)?;
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
    header: &dyn Fn(usize) -> String,
    budget: Counted,
    held: &HashSet<String>,
    counter: &TokenCounter,
) -> Option<String> {
    let header = header(lines.len());
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
    use crate::placeholder::excerpt_header;
    use crate::recall::Handle;
    use abridge_tokens::TokenizerKind;

    fn header(lines: usize) -> String {
        excerpt_header(lines, &Handle::parse("abr_0123456789").unwrap())
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
        let e = fit(&text, &header, room, &HashSet::new(), &counter).unwrap();
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
                &header,
                whole + Counted::new(9),
                &HashSet::new(),
                &counter
            ),
            Some(text.clone())
        );
        // Without room for a few lines, nothing.
        assert_eq!(
            fit(&text, &header, Counted::new(20), &HashSet::new(), &counter),
            None
        );
    }

    #[test]
    fn a_long_line_is_cut_at_its_middle() {
        let counter = TokenCounter::new(TokenizerKind::O200kBase);
        let text = format!("{{\"a\": \"{}\", \"z\": 1}}", "x1 ".repeat(5000));
        let room = Counted::new(500);
        let e = fit(&text, &header, room, &HashSet::new(), &counter).unwrap();
        assert!(counter.count_text(&e) <= room);
        assert!(
            e.contains("{\"a\": \"x1") && e.ends_with("\"z\": 1}"),
            "{e}"
        );
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
                let e = fit(&text, &header, room, &HashSet::new(), &counter).unwrap_or_default();
                has(&e, "alpha_one") && !has(&e, "zeta_six")
            })
            .expect("a room that holds one of the two lines");
        let e = fit(&text, &header, one_of_two, &held, &counter).unwrap();
        assert!(has(&e, "zeta_six") && !has(&e, "alpha_one"), "{e}");
    }
}
