//! The index of what a briefing replaced: one line per recallable original
//! — the tool and its naming argument, size, outcome, handle — ranked and
//! cut to a budget, appended to the briefing under one heading. A chained
//! briefing carries the earlier index's lines forward: what was recallable
//! stays recallable.

use std::collections::{HashMap, HashSet};

use abridge_model::{Message, Part, ToolCall, ToolResult};
use abridge_summarize::outcome::{CallOutcome, exit_code, failure_summary, outcome};
use abridge_summarize::{created, root_of};
use abridge_tokens::TokenizerKind;

use super::handle::{Handle, HandleKey};
use super::original::Original;

/// The heading the index goes under; the rest of its line names the tool.
const HEADING: &str = "## Recallable originals";

/// The heading of the index of a history whose model has no recall tool:
/// a list of what was replaced, for a reader, naming no tool and no handle.
const LISTED: &str = "## What this briefing replaced";

/// How the line of names the replaced region referred to begins.
const NAMES: &str = "  names there:";

/// Most characters of a failed result's reason on its index line.
const FAILURE_CHARS: usize = 60;

/// How a region's label ends (`the 12 replaced messages`).
const REGION: &str = " replaced message";

/// The label of a region a one-line index named by its handle alone.
const EARLIER_REGION: &str = "the earlier replaced messages";

/// An index line, before it is chosen.
struct Line {
    /// What it names (the label): one line per name, the newest.
    key: String,
    /// The naming argument, looked for in the recent history.
    argument: String,
    text: String,
}

/// The index of `replaced` (with the lines of an earlier index, from
/// `previous`), within `budget` tokens, and the originals it names. Lines
/// whose naming argument `recent` mentions come first, then the newest.
/// The line for the whole region is always there.
pub(crate) struct Index {
    /// The section, or empty when there is nothing to recall.
    pub(crate) text: String,
    /// Every original of the region (listed or not: the region's
    /// transcript holds them all).
    pub(crate) originals: Vec<Original>,
}

/// What an index is built from.
pub(crate) struct IndexInputs<'a> {
    pub(crate) replaced: &'a [Message],
    /// The earlier briefing's index section, if it had one.
    pub(crate) previous: Option<&'a str>,
    /// Text of the task and the kept tail.
    pub(crate) recent: &'a str,
    /// The recall tool, when the model can call it; `None`: the index is a
    /// list for a reader (no handles, no tool).
    pub(crate) tool: Option<&'a str>,
    /// The briefing it follows: names it holds are not listed again.
    pub(crate) briefing: &'a str,
    /// The names the agent referred to in the replaced region, most worth
    /// keeping first ([`Facts::referred`](abridge_summarize::facts::Facts)).
    pub(crate) referred: &'a [String],
    pub(crate) error_prefixes: &'a [String],
    pub(crate) budget: usize,
    pub(crate) tokenizer: TokenizerKind,
    /// The key handles are derived with (a shared proxy's tenant).
    pub(crate) key: Option<&'a HandleKey>,
}

pub(crate) fn build(inp: &IndexInputs<'_>) -> Index {
    let (mut lines, mut originals, by_place) = result_lines(inp);
    let results: HashMap<(usize, usize), &Handle> = by_place
        .iter()
        .map(|(place, i)| (*place, &originals[*i].handle))
        .collect();
    let region = (!inp.replaced.is_empty())
        .then(|| Original::region(inp.replaced, inp.previous, &results).scoped(inp.key));
    // Newest first: this region's lines, then the earlier index's.
    lines.reverse();
    lines.extend(inp.previous.map(earlier_lines).unwrap_or_default());
    let mut seen = HashSet::new();
    lines.retain(|l| seen.insert(l.key.clone()));
    rank(&mut lines, inp.recent);

    let Some(tool) = inp.tool else {
        return reader_list(&lines, inp);
    };
    let mut text = format!("{HEADING} ({tool})\n");
    if let Some(r) = &region {
        text.push_str(&format!(
            "- {} · {} · {}\n",
            r.label,
            size(r.bytes()),
            r.handle
        ));
    }
    let mut used = inp.tokenizer.count(&text);
    if let Some(r) = region.as_ref().filter(|_| used > inp.budget) {
        // Too small a briefing for a list: one line, the handle alone,
        // names everything (a handle is about ten tokens; words would be
        // more than the share of a briefing this small).
        let text = format!("(recall {})\n", r.handle);
        originals.extend(region);
        return Index { text, originals };
    }
    if region.is_some() {
        let names = names_line(inp, (inp.budget - used) / 3);
        used += inp.tokenizer.count(&names);
        text.push_str(&names);
    }
    fill(&mut text, used, lines.iter(), inp);
    if region.is_none() && !text.contains(super::handle::PREFIX) {
        // Only an earlier briefing was condensed again: its region line
        // stays whatever the budget, or nothing it replaced is reachable.
        match lines.iter().find(|l| l.key.contains(REGION)) {
            Some(l) => {
                text.push_str(&l.text);
                text.push('\n');
            }
            None => text.clear(),
        }
    }
    originals.extend(region);
    Index { text, originals }
}

/// Where in the replaced region a result was, and which original it became.
type Placed = Vec<((usize, usize), usize)>;

/// A line and an original for every recallable tool result of the
/// replaced region, oldest first.
fn result_lines(inp: &IndexInputs<'_>) -> (Vec<Line>, Vec<Original>, Placed) {
    let mut originals: Vec<Original> = Vec::new();
    let mut lines = Vec::new();
    let mut by_place = Vec::new();
    for (place, r, call, o) in replaced_results(inp.replaced, inp.key) {
        let text = r.text();
        let ok = outcome(r, &text, inp.error_prefixes);
        let failed = failure_note(ok, &text);
        let holds = holds(ok, call.map(|c| c.name.as_str()), &text, o.bytes());
        let text = match inp.tool {
            Some(_) => format!("- {} · {holds}{failed} · {}", o.label, o.handle),
            None => format!("- {} · {holds}{failed}", o.label),
        };
        lines.push(Line {
            key: o.label.clone(),
            argument: argument_of(&o.label).to_owned(),
            text,
        });
        by_place.push((place, originals.len()));
        originals.push(o);
    }
    (lines, originals, by_place)
}

/// Every tool result of `replaced` that has something to recall, oldest
/// first: where it was, the result, the call it answered and its
/// original.
fn replaced_results<'m>(
    replaced: &'m [Message],
    key: Option<&HandleKey>,
) -> impl Iterator<
    Item = (
        (usize, usize),
        &'m ToolResult,
        Option<&'m ToolCall>,
        Original,
    ),
> {
    let calls = super::answered_calls(replaced);
    replaced
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m.parts
                .iter()
                .enumerate()
                .filter_map(move |(j, p)| match p {
                    Part::ToolResult(r) => Some(((i, j), &**r)),
                    _ => None,
                })
        })
        .filter_map(move |(place, r)| {
            let call = calls.get(&place).copied();
            let o = Original::tool_result(r, call).scoped(key);
            (!o.pieces.is_empty()).then_some((place, r, call, o))
        })
}

/// The originals of the tool results of `replaced`, oldest first, when
/// no index names them (without recall: for the briefing to quote alone).
pub(crate) fn unindexed_results(replaced: &[Message], key: Option<&HandleKey>) -> Vec<Original> {
    replaced_results(replaced, key).map(|(.., o)| o).collect()
}

/// How a result failed (` · failed (exit 2): why`), so the model can tell
/// which output to recall; empty for a success.
fn failure_note(ok: CallOutcome, text: &str) -> String {
    let CallOutcome::Failed(code) = ok else {
        return String::new();
    };
    let exit = code.map_or(String::new(), |c| format!(" (exit {c})"));
    let why = failure_summary(text, FAILURE_CHARS).replace(" · ", " - ");
    // The exit code is said once: a banner that only repeats it goes.
    let banner = code.map(|c| format!("exit code {c}")).unwrap_or_default();
    let why = match why.get(..banner.len()) {
        Some(b) if !banner.is_empty() && b.eq_ignore_ascii_case(&banner) => why[banner.len()..]
            .trim_start_matches([' ', '…'])
            .to_owned(),
        _ => why,
    };
    match why.is_empty() {
        true => format!(" · failed{exit}"),
        false => format!(" · failed{exit}: {why}"),
    }
}

/// What a result holds: a command's exit (a failure's is said with it),
/// how many lines, how large, and what it created by the ids it returned
/// (not to be created again).
fn holds(ok: CallOutcome, tool: Option<&str>, text: &str, bytes: usize) -> String {
    let exit = match ok {
        CallOutcome::Ok => exit_code(text).map(|c| format!("exit {c}, ")),
        CallOutcome::Failed(_) => None,
    };
    let created = match (ok, tool) {
        (CallOutcome::Ok, Some(name)) => {
            let ids = created::ids(name, text);
            match ids.is_empty() {
                true => String::new(),
                false => format!(" · created {}", ids.join(", ")),
            }
        }
        _ => String::new(),
    };
    format!(
        "{}{} · {}{created}",
        exit.unwrap_or_default(),
        lines_of(text),
        size(bytes)
    )
}

/// The lines of an earlier briefing's index, carried forward.
fn earlier_lines(previous: &str) -> Vec<Line> {
    parse(previous)
        .into_iter()
        .map(|text| {
            let key = text
                .rsplit_once(" · ")
                .map_or(text.as_str(), |(k, _)| k)
                .trim_start_matches("- ")
                .to_owned();
            // Earlier regions are each their own, whatever their labels say.
            let key = match key.contains(REGION) {
                true => text.clone(),
                false => key,
            };
            Line {
                argument: argument_of(&key).to_owned(),
                key,
                text,
            }
        })
        .collect()
}

/// Stable: lines the recent text mentions first, each group newest first.
/// Mentions are looked up by word (one pass over the recent text, not one
/// per line): a path or a command's first word, as written there.
fn rank(lines: &mut [Line], recent: &str) {
    let words = words(recent);
    let mentioned = |l: &Line| {
        let first = l.argument.split_whitespace().next().unwrap_or("");
        first.len() >= 3 && words.contains(first)
    };
    lines.sort_by_key(|l| !mentioned(l));
}

/// For a model with no recall tool: what was replaced, for a reader, as far
/// as the budget goes.
fn reader_list(lines: &[Line], inp: &IndexInputs<'_>) -> Index {
    let mut text = format!("{LISTED}\n");
    let used = inp.tokenizer.count(&text);
    let unhandled = lines
        .iter()
        .filter(|l| Handle::find_all(&l.text).next().is_none());
    fill(&mut text, used, unhandled, inp);
    if !text.contains("\n- ") {
        text.clear();
    }
    Index {
        text,
        originals: Vec::new(),
    }
}

/// Appends `lines` in order to `text` (which counts `used` tokens) while
/// they fit the index's budget.
fn fill<'l>(
    text: &mut String,
    mut used: usize,
    lines: impl Iterator<Item = &'l Line>,
    inp: &IndexInputs<'_>,
) {
    for l in lines {
        let cost = inp.tokenizer.count(&l.text) + 1;
        if used + cost > inp.budget {
            break;
        }
        used += cost;
        text.push_str(&l.text);
        text.push('\n');
    }
}

/// The names the agent referred to in the replaced region that neither
/// the briefing nor the kept history holds, most worth keeping first, on
/// one line within `budget` tokens (empty when none fits): the region's
/// handle recalls where each was used. A name the briefing left out as
/// not live (referred to once, long ago) is found here.
fn names_line(inp: &IndexInputs<'_>, budget: usize) -> String {
    let mut line = String::from(NAMES);
    let mut used = inp.tokenizer.count(&line) + 1;
    let mut any = false;
    // Paths under the briefing's root, as the briefing shows them.
    let root = root_of(inp.briefing);
    for id in inp.referred {
        if inp.briefing.contains(id.as_str()) || inp.recent.contains(id.as_str()) {
            continue;
        }
        let shown = match &root {
            Some(r) => id.strip_prefix(r.as_str()).unwrap_or(id),
            None => id,
        };
        if shown.is_empty() || inp.briefing.contains(shown) {
            continue;
        }
        let item = format!(" `{shown}`");
        let cost = inp.tokenizer.count(&item);
        if used + cost > budget {
            break;
        }
        used += cost;
        line.push_str(&item);
        any = true;
    }
    match any {
        true => format!("{line}\n"),
        false => String::new(),
    }
}

/// The words of `text` that could name something: runs of letters,
/// digits and `_ . / - : ~ @`.
fn words(text: &str) -> HashSet<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || "_./-:~@".contains(c)))
        .filter(|w| w.len() >= 3)
        .collect()
}

/// Splits a briefing into its text and its index section (the index is
/// always last: a list under its heading, or its one-line form).
pub(crate) fn split(briefing: &str) -> (&str, Option<&str>) {
    if let Some(at) = briefing.trim_end().rfind('\n').map(|i| i + 1)
        && compact_line(briefing[at..].trim_end()).is_some()
    {
        return (briefing[..at].trim_end(), Some(&briefing[at..]));
    }
    let at = [HEADING, LISTED]
        .iter()
        .filter_map(|h| briefing.find(h))
        .find(|&at| at == 0 || briefing[..at].ends_with('\n'));
    match at {
        Some(at) => (briefing[..at].trim_end(), Some(&briefing[at..])),
        None => (briefing, None),
    }
}

/// The lines of an index section that name a handle (its one-line form
/// read as the list's region line).
fn parse(section: &str) -> Vec<String> {
    if let Some((label, handle)) = compact_line(section.trim()) {
        return vec![format!("- {label} · {handle}")];
    }
    section
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("- ") && Handle::find_all(l).next().is_some())
        .map(str::to_owned)
        .collect()
}

/// `(recall abr_…)`, or as earlier releases wrote it `(the 104 replaced
/// messages: recall abr_…)`: its label and handle.
fn compact_line(line: &str) -> Option<(&str, Handle)> {
    let inner = line.strip_prefix('(')?.strip_suffix(')')?;
    if let Some(handle) = inner.strip_prefix("recall ") {
        return Some((EARLIER_REGION, Handle::parse(handle)?));
    }
    let (label, handle) = inner.rsplit_once(": recall ")?;
    (label.contains(REGION) && !label.contains('\n')).then_some(())?;
    Some((label, Handle::parse(handle)?))
}

/// The part of a label after the tool's name: a path, a command, a URL.
fn argument_of(label: &str) -> &str {
    label
        .split_once(' ')
        .map_or("", |(_, rest)| rest)
        .trim_start_matches([' ', '"'])
        .trim_end_matches(['"', ')'])
        .trim_end_matches(" (arguments")
}

/// `1 line`, `42 lines`.
fn lines_of(text: &str) -> String {
    match text.lines().count() {
        1 => "1 line".to_owned(),
        n => format!("{n} lines"),
    }
}

/// `840 B`, `12 KB`, `3.4 MB`.
fn size(bytes: usize) -> String {
    match bytes {
        b if b < 1_000 => format!("{b} B"),
        b if b < 1_000_000 => format!("{} KB", b.div_ceil(1_000)),
        b => format!("{:.1} MB", b as f64 / 1e6),
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
