//! The room a briefing leaves. A briefing that says all it has to, beside
//! a tail that cannot grow by its next older iteration (a long user
//! message, an iteration that does not fit even with its results
//! clipped), leaves part of the target unused, while the results the
//! briefing replaced hold names the agent may need again. That room goes
//! to their lines that name the most of what the history does not already
//! hold, under each result's label and handle, in a section of the
//! briefing before its index: the rest of each result stays one recall
//! away, and nothing is added that the history says already.

use std::collections::HashSet;

use abridge_model::{Message, Part};
use abridge_summarize::SectionKind;
use abridge_summarize::ident::prose_identifiers;
use abridge_summarize::wrapper::{defuse, unwrap, wrap};
use abridge_tokens::{Counted, TokenCounter};

use crate::recall::{Original, OriginalKind, index};
use crate::refill::{held_names, text_of};
use crate::slot::Slot;

/// Longest piece of a line (bytes) quoted on its own: a longer line (a
/// JSON document on one line, a long log line) is quoted in pieces cut
/// after its commas, each gap said.
const LONGEST_PIECE: usize = 240;

/// Most lines read from the replaced results, newest first: bounds the
/// work a huge region costs.
const MOST_LINES: usize = 20_000;

/// Tokens a gap between kept lines (`…`) and a line's newline take.
const GAP: u64 = 2;

/// Tries at a smaller budget when the section, counted in place, is over.
const TRIES: usize = 4;

/// Most bytes a token of quoted text takes (o200k and cl100k average about
/// four): what bounds a line's tokens from below before it is counted.
const BYTES_PER_TOKEN_AT_MOST: usize = 12;

/// A line of a replaced result, or a piece of a long one, that names
/// something new.
struct Candidate<'t> {
    /// Which of the results (newest first).
    result: usize,
    /// Its line among the result's lines.
    line: usize,
    /// Where in the line it starts and ends (bytes), and the line's length.
    span: (usize, usize, usize),
    text: &'t str,
    /// Names it holds that the history does not.
    names: Vec<String>,
}

impl Candidate<'_> {
    fn ends_line(&self) -> bool {
        self.span.1 == self.span.2
    }
}

/// The replaced results a briefing quotes, and how it names them.
pub(crate) struct Quoted<'o> {
    /// Their originals.
    pub(crate) originals: &'o [Original],
    /// The tags the briefing is wrapped in.
    pub(crate) wrapper: &'o str,
    /// Whether the model can recall them: each result's lines are headed by
    /// its label and handle, else by its label alone.
    pub(crate) named: bool,
}

/// Writes the lines of the results `quoted` into the briefing
/// `messages[at]`, in at most `room` tokens; returns how many results it
/// quoted and the tokens it added. `counts` and `total` are kept up to
/// date; nothing changes when no line fits or the briefing is not one.
pub(crate) fn fill(
    messages: &mut [Slot<'_>],
    (counts, total): (&mut [Counted], &mut Counted),
    at: usize,
    quoted: &Quoted<'_>,
    room: Counted,
    counter: &mut TokenCounter,
) -> (usize, Counted) {
    let Quoted {
        originals,
        wrapper,
        named,
    } = *quoted;
    // Newest first, until they hold MOST_LINES: a huge region is not copied.
    let mut lines = 0;
    let texts: Vec<(&Original, String)> = originals
        .iter()
        .rev()
        .filter(|o| o.kind == OriginalKind::ToolResult)
        .filter_map(|o| Some((o, text_of(o)?)))
        .take_while(|(_, t)| {
            let within = lines < MOST_LINES;
            lines += t.lines().count();
            within
        })
        .collect();
    let held = held_names(messages);
    let candidates = candidates(&texts, &held);
    if candidates.is_empty() {
        return (0, Counted::ZERO);
    }
    let old = counts[at];
    let mut budget = room;
    // Each candidate's tokens, counted once over the tries.
    let mut tokens = vec![None; candidates.len()];
    for _ in 0..TRIES {
        let chosen = choose(&candidates, &texts, named, budget, (counter, &mut tokens));
        if chosen.is_empty() {
            break;
        }
        let section = render(&texts, &candidates, &chosen, named);
        let Some(m) = with_section(&messages[at], &section, wrapper) else {
            break;
        };
        let now = counter.count_message(&m).total();
        if now <= old + room {
            let results = chosen
                .iter()
                .map(|&c| candidates[c].result)
                .collect::<HashSet<_>>()
                .len();
            counts[at] = now;
            *total = total.saturating_sub(old) + now;
            messages[at] = m.into();
            return (results, now.saturating_sub(old));
        }
        budget = Counted::new(budget.get() * 4 / 5);
    }
    (0, Counted::ZERO)
}

/// The lines of `texts` (newest result first, up to [`MOST_LINES`]), or
/// their pieces, that name something `held` does not.
fn candidates<'t>(texts: &'t [(&Original, String)], held: &HashSet<String>) -> Vec<Candidate<'t>> {
    let mut out = Vec::new();
    let lines = texts
        .iter()
        .enumerate()
        .flat_map(|(result, (_, text))| text.lines().enumerate().map(move |(i, l)| (result, i, l)))
        .take(MOST_LINES);
    for (result, line, l) in lines {
        // A heading would read as one of the briefing's own.
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        for (start, end) in pieces(l) {
            let text = &l[start..end];
            let names: Vec<String> = prose_identifiers(text)
                .into_iter()
                .filter(|n| !held.contains(n))
                .collect();
            if !names.is_empty() {
                out.push(Candidate {
                    result,
                    line,
                    span: (start, end, l.len()),
                    text,
                    names,
                });
            }
        }
    }
    out
}

/// `line` cut after commas (or anywhere, at a character's edge, where a
/// run has none) into pieces of at most [`LONGEST_PIECE`] bytes.
fn pieces(line: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    while line.len() - start > LONGEST_PIECE {
        let mut end = start + LONGEST_PIECE;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        if let Some(comma) = line[start..end].rfind(',').filter(|&c| c > 0) {
            end = start + comma + 1;
        }
        out.push((start, end));
        start = end;
    }
    out.push((start, line.len()));
    out
}

/// The candidates kept in about `budget` tokens: the most new names per
/// token first (the newer result first among equals), each only while it
/// names something the ones kept before it do not; every result quoted
/// pays for its heading. A candidate is counted (into `tokens`) only when
/// a lower bound of its tokens fits what is left.
fn choose(
    candidates: &[Candidate<'_>],
    texts: &[(&Original, String)],
    named: bool,
    budget: Counted,
    (counter, tokens): (&TokenCounter, &mut [Option<u64>]),
) -> Vec<usize> {
    let heading = counter.count_text(title(named)).get() + 4;
    let room = budget.get().saturating_sub(heading);
    // Ranked by an estimate (a token is about four bytes); counted only
    // where what is left may hold it.
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    let density = |c: &Candidate| c.names.len() as f64 / (c.text.len() / 4 + 1) as f64;
    order.sort_by(|&a, &b| density(&candidates[b]).total_cmp(&density(&candidates[a])));
    let mut said: HashSet<&str> = HashSet::new();
    let mut quoted = vec![false; texts.len()];
    let (mut used, mut chosen) = (0, Vec::new());
    for i in order {
        let c = &candidates[i];
        let left = room.saturating_sub(used);
        if left <= GAP {
            break;
        }
        // At least this many tokens: a line longer than what is left is not counted.
        let at_least = (c.text.len() / BYTES_PER_TOKEN_AT_MOST) as u64;
        if at_least + GAP > left || c.names.iter().all(|n| said.contains(n.as_str())) {
            continue;
        }
        let text_tokens = *tokens[i].get_or_insert_with(|| counter.count_text(c.text).get());
        let mut cost = text_tokens + GAP;
        if !quoted[c.result] {
            cost += counter
                .count_text(&result_heading(texts[c.result].0, named))
                .get()
                + GAP;
        }
        if used + cost > room {
            continue;
        }
        used += cost;
        quoted[c.result] = true;
        said.extend(c.names.iter().map(String::as_str));
        chosen.push(i);
    }
    chosen
}

/// The section's title: without recall it says no handle recalls the rest.
fn title(named: bool) -> &'static str {
    match named {
        true => SectionKind::ResultLines.title(),
        false => SectionKind::ResultLines.title_without_recall(),
    }
}

/// `[label · handle]` (without recall, `[label]`): which result the lines
/// below it are from.
fn result_heading(o: &Original, named: bool) -> String {
    match named {
        true => format!("[{} · {}]", o.label, o.handle),
        false => format!("[{}]", o.label),
    }
}

/// The section: the results quoted, oldest first, each under its heading
/// with its chosen lines (and pieces) in their order and each gap said.
fn render(
    texts: &[(&Original, String)],
    candidates: &[Candidate<'_>],
    chosen: &[usize],
    named: bool,
) -> String {
    let mut by_result: Vec<Vec<&Candidate>> = vec![Vec::new(); texts.len()];
    for &i in chosen {
        by_result[candidates[i].result].push(&candidates[i]);
    }
    let mut out = format!("## {}", title(named));
    for (result, mut quoted) in by_result.into_iter().enumerate().rev() {
        if quoted.is_empty() {
            continue;
        }
        quoted.sort_by_key(|c| (c.line, c.span.0));
        out.push('\n');
        out.push_str(&result_heading(texts[result].0, named));
        let mut prev: Option<&Candidate> = None;
        for c in quoted {
            match prev {
                Some(p) if p.line == c.line && p.span.1 == c.span.0 => {}
                Some(p) if p.line == c.line => out.push_str(" … "),
                _ => {
                    if prev.is_some_and(|p| !p.ends_line()) {
                        out.push_str(" …");
                    }
                    if c.line > prev.map_or(0, |p| p.line + 1) {
                        out.push_str("\n…");
                    }
                    out.push('\n');
                    if c.span.0 > 0 {
                        out.push_str("… ");
                    }
                }
            }
            out.push_str(c.text);
            prev = Some(c);
        }
        if let Some(p) = prev {
            if !p.ends_line() {
                out.push_str(" …");
            }
            if texts[result].1.lines().count() > p.line + 1 {
                out.push_str("\n…");
            }
        }
    }
    out
}

/// The briefing `m` with `section` before its index (at its end without
/// one), or `None` when `m` is not a briefing wrapped in `wrapper`.
fn with_section(m: &Message, section: &str, wrapper: &str) -> Option<Message> {
    let text = m.text_content();
    let body = unwrap(wrapper, &text)?;
    let (sheet, index) = index::split(body);
    // Quoted lines never open or close a briefing.
    let section = defuse(wrapper, section);
    let body = match index {
        Some(index) => format!("{sheet}\n\n{section}\n\n{index}"),
        None => format!("{sheet}\n\n{section}"),
    };
    let mut out = m.clone();
    out.parts = vec![Part::text(wrap(wrapper, &body))];
    Some(out)
}
