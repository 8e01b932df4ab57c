//! The offline briefing: a fact sheet rendered in sections, fitted to a token
//! budget by dropping the oldest, least important items first, and merged
//! with the previous briefing when compactions chain.
//!
//! The sheet is data — a [`Sheet`] of sections and items, each item with
//! the key it merges by (a file's absolute path) — rendered to text. A
//! chained compaction merges the previous sheet's data; only a briefing
//! that abridge did not keep as data (an LLM's, one stored by an earlier
//! release, one in a history the caller brought) is parsed back from its
//! text, by heading.

use abridge_tokens::TokenizerKind;
use serde::{Deserialize, Serialize};

use crate::facts::Facts;

mod content;
mod fit;
use content::sections;
use fit::fit;

/// A briefing sheet as data: what the offline summarizer rendered, before its paths were
/// shortened for display.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Sheet {
    /// Its sections, in the order they render (empty ones included).
    pub sections: Vec<SheetSection>,
}

/// One section of a [`Sheet`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SheetSection {
    /// What it holds.
    pub kind: SectionKind,
    /// Its items, oldest first.
    pub items: Vec<SheetItem>,
    /// Older items left out for space.
    #[serde(default)]
    pub omitted: usize,
}

/// One item of a section: its text and, when it is not the text itself,
/// the key a later sheet's item replaces it by (a file's path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SheetItem {
    /// The item as written (absolute paths).
    pub text: String,
    /// What identifies it across sheets, when not its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl SheetItem {
    /// An item identified by its text.
    pub fn new(text: impl Into<String>) -> Self {
        SheetItem {
            text: text.into(),
            key: None,
        }
    }

    /// An item identified by `key`.
    pub fn keyed(text: impl Into<String>, key: impl Into<String>) -> Self {
        SheetItem {
            text: text.into(),
            key: Some(key.into()),
        }
    }

    /// What identifies it.
    pub fn key(&self) -> &str {
        self.key.as_deref().unwrap_or(&self.text)
    }
}

/// What a section holds. The kind, not its heading, identifies a section:
/// headings are presentation, and a heading renamed later still parses back
/// through its legacy titles, so briefings already stored as
/// text keep merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SectionKind {
    /// The task (written by older releases; dropped when a briefing merges them).
    /// Written by older releases; dropped when a briefing merges them.
    Task,
    /// Output of the commands the task named.
    Details,
    /// The task list as the agent last wrote it.
    Todo,
    /// What the agent's calls created, with the ids they returned.
    Created,
    /// What the agent's commands record as done.
    Progress,
    /// The agent's last words.
    Last,
    /// Decisions and corrections from the user.
    Decisions,
    /// What the agent said it did.
    Narrative,
    /// Errors and what came of them.
    Errors,
    /// Files and what was done to them.
    Files,
    /// Commands run.
    Commands,
    /// Other tool calls.
    Calls,
    /// The latest error, verbatim.
    LatestError,
    /// Identifiers the agent used.
    Ids,
    /// Identifiers seen in tool results (written by older releases;
    /// dropped when a briefing merges them).
    ResultIds,
    /// The user's messages.
    Users,
    /// Lines of the replaced results that the engine wrote into the room
    /// a briefing left (dropped when a briefing merges them: their results
    /// are one recall away).
    ResultLines,
    /// An earlier briefing's text that is not a known section.
    Earlier,
}

use SectionKind as Kind;

/// How a section's items are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// One `- item` per line (newlines inside an item folded to ` ⏎ `).
    Bullets,
    /// Items as one comma-separated line of `code` spans.
    Inline,
    /// Items as lines, verbatim (the task, the task list, verbatim text).
    Lines,
}

/// How a previous briefing's items combine with the new ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Merge {
    /// Neither stays: a section of older briefings no longer written (the
    /// task, which stays verbatim above the briefing).
    Drop,
    /// The newest items win; the previous ones only fill an empty section.
    Newest,
    /// Previous items first, duplicates in their newest form.
    Append,
}

impl SectionKind {
    /// Every kind, in the order the sheet renders them: the task, its
    /// progress and the current state first.
    pub const ALL: [Kind; 18] = [
        Kind::Task,
        Kind::Details,
        Kind::Todo,
        Kind::Created,
        Kind::Progress,
        Kind::Last,
        Kind::Decisions,
        Kind::Narrative,
        Kind::Errors,
        Kind::Files,
        Kind::Commands,
        Kind::Calls,
        Kind::LatestError,
        Kind::Ids,
        Kind::ResultIds,
        Kind::Users,
        Kind::ResultLines,
        Kind::Earlier,
    ];

    /// Its heading.
    pub fn title(self) -> &'static str {
        match self {
            Kind::Task => "Task",
            Kind::Details => "Task details (output of the commands the task named)",
            Kind::Todo => "Task list (as last written by the agent)",
            Kind::Created => "Created (ids the agent's calls returned: do not create them again)",
            Kind::Progress => "Done (as the agent's commands record it)",
            Kind::Decisions => "Decisions and corrections from the user",
            Kind::Narrative => "What the agent did (its own words, oldest first)",
            Kind::Files => "Files",
            Kind::Commands => "Commands (each once: runs and last outcome)",
            Kind::Calls => "Other tool calls",
            Kind::Errors => "Errors and what came of them",
            Kind::LatestError => "Latest error (verbatim)",
            Kind::Ids => "Identifiers used",
            Kind::ResultIds => "Identifiers seen in tool results",
            Kind::Users => "User messages",
            Kind::ResultLines => "Lines from the replaced results (recall a handle for the rest)",
            Kind::Earlier => "Earlier briefing",
            Kind::Last => "Current state (the agent's last words)",
        }
    }

    /// Its heading where the model has no recall tool (only the result
    /// lines' says to recall).
    pub fn title_without_recall(self) -> &'static str {
        match self {
            Kind::ResultLines => "Lines from the replaced results",
            _ => self.title(),
        }
    }

    /// Headings this kind was written under by earlier versions. When a
    /// title changes, its old text goes here.
    fn legacy_titles(self) -> &'static [&'static str] {
        match self {
            Kind::Commands => &["Commands run"],
            Kind::Errors => &["Errors (first lines, oldest first)"],
            Kind::Last => &["Last state before this briefing"],
            _ => &[],
        }
    }

    fn from_heading(heading: &str) -> Option<Kind> {
        let heading = heading.trim();
        Kind::ALL.into_iter().find(|k| {
            k.title() == heading
                || k.title_without_recall() == heading
                || k.legacy_titles().contains(&heading)
        })
    }

    /// Trim order (lower first; `u8::MAX` is never trimmed) and how many of
    /// the newest items survive any budget short of the last resort.
    fn priority_and_keep(self) -> (u8, usize) {
        match self {
            Kind::Task | Kind::Todo | Kind::LatestError | Kind::Last => (u8::MAX, usize::MAX),
            Kind::Details => (10, 1),
            Kind::Progress => (9, 10),
            Kind::Created => (9, 20),
            Kind::Decisions => (8, 10),
            Kind::Files => (7, 10),
            Kind::Errors => (7, 3),
            Kind::Ids => (6, 40),
            Kind::Narrative => (5, 6),
            Kind::Users => (4, 2),
            Kind::Commands => (3, 3),
            Kind::ResultIds => (2, 0),
            Kind::Calls => (1, 0),
            Kind::ResultLines => (0, 0),
            Kind::Earlier => (0, 0),
        }
    }

    fn layout(self) -> Layout {
        match self {
            Kind::Ids | Kind::ResultIds => Layout::Inline,
            Kind::Task
            | Kind::Details
            | Kind::Todo
            | Kind::LatestError
            | Kind::Last
            | Kind::ResultLines => Layout::Lines,
            _ => Layout::Bullets,
        }
    }

    fn merge(self) -> Merge {
        match self {
            Kind::Task | Kind::ResultIds | Kind::ResultLines => Merge::Drop,
            Kind::Details | Kind::Todo | Kind::LatestError | Kind::Last => Merge::Newest,
            _ => Merge::Append,
        }
    }

    /// Sections whose items are (or end in, or name) paths.
    fn holds_paths(self) -> bool {
        matches!(
            self,
            Kind::Files | Kind::Ids | Kind::ResultIds | Kind::Errors
        )
    }
}

type Section = SheetSection;

impl SheetSection {
    fn new(kind: Kind, items: Vec<SheetItem>) -> Self {
        SheetSection {
            kind,
            items,
            omitted: 0,
        }
    }

    fn priority(&self) -> u8 {
        self.kind.priority_and_keep().0
    }

    /// Appends the section's text, its paths shown under `root`.
    fn render(&self, root: &Root, out: &mut String) {
        if self.items.is_empty() {
            return;
        }
        out.push_str("## ");
        out.push_str(self.kind.title());
        out.push('\n');
        if self.omitted > 0 {
            out.push_str(&format!("- ({} older items omitted)\n", self.omitted));
        }
        let shown = |i: &SheetItem| root.show(self.kind, &i.text).into_owned();
        match self.kind.layout() {
            Layout::Inline => {
                let ids: Vec<String> = self
                    .items
                    .iter()
                    .map(|i| format!("`{}`", shown(i)))
                    .collect();
                out.push_str(&ids.join(", "));
                out.push('\n');
            }
            Layout::Lines => {
                for i in &self.items {
                    out.push_str(&shown(i));
                    out.push('\n');
                }
            }
            Layout::Bullets => {
                for i in &self.items {
                    out.push_str("- ");
                    // One line per item, so that a chained briefing parses back.
                    out.push_str(&shown(i).replace('\n', " ⏎ "));
                    out.push('\n');
                }
            }
        }
        out.push('\n');
    }
}

/// The previous briefing a sheet merges, when compactions chain.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Previous<'a> {
    /// A sheet abridge kept as data.
    Sheet(&'a Sheet),
    /// A briefing's text (an LLM's, or one not kept as data): parsed back.
    Text(&'a str),
}

/// Renders the facts as a sheet within `budget` tokens, merged with the
/// `previous` briefing when given; the text, and the sheet as data. The
/// task is not restated: its message stays verbatim above the briefing.
pub(crate) fn render(
    facts: Facts,
    previous: Option<Previous<'_>>,
    budget: usize,
    kind: TokenizerKind,
) -> (String, Sheet) {
    let mut sections = sections(facts, budget);
    match previous {
        Some(Previous::Sheet(prev)) => merge(&mut sections, prev.sections.clone(), Vec::new()),
        Some(Previous::Text(prev)) => {
            let (known, foreign) = parse(prev);
            merge(&mut sections, known, foreign);
        }
        None => {}
    }
    let root = Root::of(&sections);
    // The fit counts items and the headings it writes; the lines it does
    // not (the root note, "older items omitted", what was left out) are
    // found by writing the sheet and counting it. A sheet over its budget
    // is fitted again that much smaller; one that left items out and room
    // unused, that much larger (each try from the whole sheet): the room
    // a briefing is given is used.
    let mut room = budget;
    let mut best: Option<(String, Vec<Section>, usize)> = None;
    for _ in 0..FIT_TRIES {
        let mut fitted = sections.clone();
        let kept = fit(&mut fitted, &root, room, kind);
        let mut out = write(&fitted, &root, false);
        let mut count = kind.count(&out);
        if count > budget {
            // Over: what was left out said in few words, if that is less.
            let terse = write(&fitted, &root, true);
            let terse_count = kind.count(&terse);
            if terse_count < count {
                (out, count) = (terse, terse_count);
            }
        }
        if count > budget {
            // Below what this fit kept, so the next one keeps less.
            room = kept.saturating_sub(count - budget);
        } else if best.as_ref().is_none_or(|b| count > b.2) {
            let unused = budget - count;
            let complete = fitted == sections;
            best = Some((out, fitted, count));
            if complete || unused <= budget / 64 {
                break;
            }
            room += unused;
        } else {
            break;
        }
        if room == 0 {
            break;
        }
    }
    match best {
        Some((out, sections, _)) => (out, Sheet { sections }),
        None => {
            // Nothing more to drop: what was left out, said in few words.
            fit(&mut sections, &root, room, kind);
            (write(&sections, &root, true), Sheet { sections })
        }
    }
}

/// Fits of a sheet at most: the first, then corrections by what writing
/// it showed the fit does not count (a few tokens after the second).
const FIT_TRIES: usize = 4;

/// The sheet's text; what was left out in a few words when `terse`.
fn write(sections: &[Section], root: &Root, terse: bool) -> String {
    let mut out = String::new();
    if let Some(dir) = root.0.as_deref().map(|p| p.trim_end_matches('/')) {
        out.push_str(&format!("{ROOT_NOTE}`{dir}`.\n\n"));
    }
    for s in sections {
        s.render(root, &mut out);
    }
    let gone: Vec<&Section> = sections
        .iter()
        .filter(|s| s.items.is_empty() && s.omitted > 0)
        .collect();
    if !gone.is_empty() {
        let what = match terse {
            true => {
                let items: usize = gone.iter().map(|s| s.omitted).sum();
                format!("{items} items of {} sections", gone.len())
            }
            false => gone
                .iter()
                .map(|s| format!("{} ({})", s.kind.title(), s.omitted))
                .collect::<Vec<_>>()
                .join(", "),
        };
        out.push_str(&format!("({OMITTED}{what})\n"));
    }
    out.trim_end().to_owned()
}

const OMITTED: &str = "Left out for space: ";

const ROOT_NOTE: &str = "Paths below are relative to ";

/// The directory a briefing's paths are shown relative to, as its first
/// line names it (`Paths below are relative to \`/w/app\`.`), with its
/// trailing `/`: what follows the briefing can show its paths the same way.
pub fn root_of(briefing: &str) -> Option<String> {
    // After a focus note, if any.
    let line = briefing
        .lines()
        .take(4)
        .find(|l| l.starts_with(ROOT_NOTE))?;
    let dir = line.strip_prefix(ROOT_NOTE)?.strip_prefix('`')?;
    let dir = dir.strip_suffix("`.")?;
    Some(format!("{}/", dir.trim_end_matches('/')))
}

/// Opens a briefing written for an agent's `compact_history` focus.
pub(crate) const FOCUS_NOTE: &str = "Focus requested by the agent: ";

/// The directory that most of the sheet's absolute paths share, named once
/// at the top: paths under it are shown relative to it, the same facts in
/// fewer tokens. The sheet's data keeps them absolute.
/// Holds the directory with its trailing `/`, as paths are shown under it.
struct Root(Option<String>);

impl Root {
    fn of(sections: &[Section]) -> Root {
        let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
        for item in sections
            .iter()
            .filter(|s| s.kind.holds_paths())
            .flat_map(|s| s.items.iter())
        {
            let path = item.key();
            if !path.starts_with('/') {
                continue;
            }
            // Every ancestor directory at least three levels deep.
            for (pos, _) in path.match_indices('/').skip(3) {
                *counts.entry(&path[..pos]).or_default() += 1;
            }
        }
        // The directory that saves the most characters.
        let best = counts
            .into_iter()
            .max_by_key(|(dir, n)| (dir.len() + 1) * n)
            .filter(|(_, n)| *n >= 3);
        // Name the root's parent, so every relative path keeps its last two
        // components (`app/mix.exs`, not a bare `mix.exs`).
        Root(best.and_then(|(root, _)| Some(format!("{}/", root.rsplit_once('/')?.0))))
    }

    /// An item's text as shown: paths under the root relative to it.
    fn show<'t>(&self, kind: Kind, text: &'t str) -> std::borrow::Cow<'t, str> {
        match &self.0 {
            Some(prefix) if kind.holds_paths() && text.contains(prefix.as_str()) => {
                text.replace(prefix.as_str(), "").into()
            }
            _ => text.into(),
        }
    }
}

/// Folds a previous briefing in, section by section as [`Merge`] says;
/// `foreign` (text under headings this sheet does not know: an LLM
/// briefing, or a section since removed) becomes the "Earlier briefing".
fn merge(sections: &mut [Section], previous: Vec<Section>, foreign: Vec<SheetItem>) {
    if !foreign.is_empty()
        && let Some(s) = sections.iter_mut().find(|s| s.kind == Kind::Earlier)
    {
        s.items = foreign;
    }
    for old in previous {
        let Some(s) = sections.iter_mut().find(|s| s.kind == old.kind) else {
            continue;
        };
        match old.kind.merge() {
            Merge::Drop => {}
            Merge::Newest => {
                if s.items.is_empty() {
                    s.items = old.items;
                }
            }
            Merge::Append => {
                let mut merged: Vec<SheetItem> = old
                    .items
                    .into_iter()
                    .filter(|o| !s.items.iter().any(|n| n.key() == o.key()))
                    .collect();
                merged.append(&mut s.items);
                s.items = merged;
            }
        }
    }
}

/// A previous sheet's text: the items of each known section, and the
/// non-empty lines of everything else (foreign headings included). A
/// bullet written as `what · path` is keyed by its path.
fn parse(text: &str) -> (Vec<Section>, Vec<SheetItem>) {
    let mut known: Vec<Section> = Vec::new();
    let mut foreign: Vec<SheetItem> = Vec::new();
    let mut current: Option<Kind> = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            current = Kind::from_heading(heading);
            match current {
                Some(kind) => known.push(Section::new(kind, Vec::new())),
                None => foreign.push(SheetItem::new(line)),
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty()
            || trimmed.starts_with(ROOT_NOTE)
            || trimmed.starts_with(FOCUS_NOTE)
            || trimmed.starts_with(&format!("({OMITTED}"))
            || line.starts_with("- (") && line.ends_with("older items omitted)")
        {
            continue;
        }
        let (Some(kind), Some(section)) = (current, known.last_mut()) else {
            foreign.push(SheetItem::new(line));
            continue;
        };
        let items = &mut section.items;
        match kind.layout() {
            Layout::Inline => items.extend(
                line.split(", ")
                    .map(|i| SheetItem::new(i.trim_matches('`'))),
            ),
            Layout::Bullets => {
                let item = line.strip_prefix("- ").unwrap_or(line);
                items.push(match item.rsplit_once(" · ") {
                    Some((_, path)) => SheetItem::keyed(item, path),
                    None => SheetItem::new(item),
                });
            }
            Layout::Lines => items.push(SheetItem::new(line)),
        }
    }
    (known, foreign)
}

#[cfg(test)]
mod tests;
