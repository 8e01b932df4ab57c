//! The offline briefing: a fact sheet rendered in sections, fitted to a token
//! budget by dropping the oldest, least important items first, and merged
//! with the previous briefing when compactions chain.

use abridge_model::text::clip;
use abridge_tokens::TokenizerKind;

use crate::facts::Facts;

mod content;
use content::sections;

/// What a section holds. The kind, not its heading, identifies a section:
/// headings are presentation, and a heading renamed later still parses back
/// through [`Kind::legacy_titles`], so briefings already stored keep merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Written by older releases; dropped when a briefing merges them.
    Task,
    Details,
    Todo,
    Progress,
    Last,
    Decisions,
    Narrative,
    Errors,
    Files,
    Commands,
    Calls,
    LatestError,
    Ids,
    ResultIds,
    Users,
    Earlier,
}

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

impl Kind {
    /// Every kind, in the order the sheet renders them: the task, its
    /// progress and the current state first.
    const ALL: [Kind; 16] = [
        Kind::Task,
        Kind::Details,
        Kind::Todo,
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
        Kind::Earlier,
    ];

    fn title(self) -> &'static str {
        match self {
            Kind::Task => "Task",
            Kind::Details => "Task details (output of the commands the task named)",
            Kind::Todo => "Task list (as last written by the agent)",
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
            Kind::Earlier => "Earlier briefing",
            Kind::Last => "Current state (the agent's last words)",
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
        Kind::ALL
            .into_iter()
            .find(|k| k.title() == heading || k.legacy_titles().contains(&heading))
    }

    /// Trim order (lower first; `u8::MAX` is never trimmed) and how many of
    /// the newest items survive any budget short of the last resort.
    fn priority_and_keep(self) -> (u8, usize) {
        match self {
            Kind::Task | Kind::Todo | Kind::LatestError | Kind::Last => (u8::MAX, usize::MAX),
            Kind::Details => (10, 1),
            Kind::Progress => (9, 10),
            Kind::Decisions => (8, 10),
            Kind::Files => (7, 10),
            Kind::Errors => (7, 3),
            Kind::Ids => (6, 40),
            Kind::Narrative => (5, 6),
            Kind::Users => (4, 2),
            Kind::Commands => (3, 3),
            Kind::ResultIds => (2, 0),
            Kind::Calls => (1, 0),
            Kind::Earlier => (0, 0),
        }
    }

    fn layout(self) -> Layout {
        match self {
            Kind::Ids | Kind::ResultIds => Layout::Inline,
            Kind::Task | Kind::Details | Kind::Todo | Kind::LatestError | Kind::Last => {
                Layout::Lines
            }
            _ => Layout::Bullets,
        }
    }

    fn merge(self) -> Merge {
        match self {
            Kind::Task => Merge::Drop,
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

/// One section of the sheet.
#[derive(Debug, Clone)]
struct Section {
    kind: Kind,
    items: Vec<String>,
    omitted: usize,
}

impl Section {
    fn new(kind: Kind, items: Vec<String>) -> Self {
        Section {
            kind,
            items,
            omitted: 0,
        }
    }

    fn priority(&self) -> u8 {
        self.kind.priority_and_keep().0
    }

    fn render(&self, out: &mut String) {
        if self.items.is_empty() {
            return;
        }
        out.push_str("## ");
        out.push_str(self.kind.title());
        out.push('\n');
        if self.omitted > 0 {
            out.push_str(&format!("- ({} older items omitted)\n", self.omitted));
        }
        match self.kind.layout() {
            Layout::Inline => {
                let ids: Vec<String> = self.items.iter().map(|i| format!("`{i}`")).collect();
                out.push_str(&ids.join(", "));
                out.push('\n');
            }
            Layout::Lines => {
                for i in &self.items {
                    out.push_str(i);
                    out.push('\n');
                }
            }
            Layout::Bullets => {
                for i in &self.items {
                    out.push_str("- ");
                    // One line per item, so that a chained briefing parses back.
                    out.push_str(&i.replace('\n', " ⏎ "));
                    out.push('\n');
                }
            }
        }
        out.push('\n');
    }
}

/// Renders the facts as a sheet within `budget` tokens, merged with
/// `previous` (an earlier briefing's text) when given. The task is not
/// restated: its message stays verbatim above the briefing.
pub fn render(facts: &Facts, previous: Option<&str>, budget: usize, kind: TokenizerKind) -> String {
    let mut sections = sections(facts, budget);
    if let Some(prev) = previous {
        merge(&mut sections, prev);
    }
    let root = relativize(&mut sections);
    fit(&mut sections, budget, kind);
    let mut out = String::new();
    if let Some(root) = root {
        out.push_str(&format!("{ROOT_NOTE}`{root}`.\n\n"));
    }
    for s in &sections {
        s.render(&mut out);
    }
    let gone: Vec<String> = sections
        .iter()
        .filter(|s| s.items.is_empty() && s.omitted > 0)
        .map(|s| format!("{} ({})", s.kind.title(), s.omitted))
        .collect();
    if !gone.is_empty() {
        out.push_str(&format!("({OMITTED}{})\n", gone.join(", ")));
    }
    out.trim_end().to_owned()
}

const OMITTED: &str = "Left out for space: ";

const ROOT_NOTE: &str = "Paths below are relative to ";

/// Opens a briefing written for an agent's `compact_history` focus.
pub(crate) const FOCUS_NOTE: &str = "Focus requested by the agent: ";

/// Writes absolute paths under the directory that most of them share
/// relative to it (named once at the top): the same facts in fewer tokens.
fn relativize(sections: &mut [Section]) -> Option<String> {
    let is_path_section = |s: &Section| s.kind.holds_paths();
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for item in sections
        .iter()
        .filter(|s| is_path_section(s))
        .flat_map(|s| s.items.iter())
    {
        let path = item.rsplit(" · ").next().unwrap_or(item);
        if !path.starts_with('/') {
            continue;
        }
        // Every ancestor directory at least three levels deep.
        for (pos, _) in path.match_indices('/').skip(3) {
            *counts.entry(&path[..pos]).or_default() += 1;
        }
    }
    // The directory that saves the most characters.
    let (root, n) = counts
        .into_iter()
        .max_by_key(|(dir, n)| (dir.len() + 1) * n)?;
    if n < 3 {
        return None;
    }
    // Name the root's parent, so every relative path keeps its last two
    // components (`app/mix.exs`, not a bare `mix.exs`).
    let parent = root.rsplit_once('/')?.0.to_owned();
    let prefix = format!("{parent}/");
    for s in sections.iter_mut().filter(|s| is_path_section(s)) {
        for item in &mut s.items {
            if item.contains(&prefix) {
                *item = item.replace(&prefix, "");
            }
        }
    }
    Some(parent)
}

/// Folds a previous briefing in, section by section as [`Merge`] says.
/// Text under headings this sheet does not know (an LLM briefing, or a
/// section since removed) becomes the "Earlier briefing" section.
fn merge(sections: &mut [Section], previous: &str) {
    let (known, foreign) = parse(previous);
    if !foreign.is_empty()
        && let Some(s) = sections.iter_mut().find(|s| s.kind == Kind::Earlier)
    {
        s.items = foreign;
    }
    for (kind, old) in known {
        let Some(s) = sections.iter_mut().find(|s| s.kind == kind) else {
            continue;
        };
        match kind.merge() {
            Merge::Drop => {}
            Merge::Newest => {
                if s.items.is_empty() {
                    s.items = old;
                }
            }
            Merge::Append => {
                let key = |i: &str| i.rsplit(" · ").next().unwrap_or(i).to_owned();
                let mut merged: Vec<String> = old
                    .into_iter()
                    .filter(|o| !s.items.iter().any(|n| key(n) == key(o)))
                    .collect();
                merged.append(&mut s.items);
                s.items = merged;
            }
        }
    }
}

/// A previous sheet: the items of each known section, and the non-empty
/// lines of everything else (foreign headings included).
fn parse(text: &str) -> (Vec<(Kind, Vec<String>)>, Vec<String>) {
    let mut known: Vec<(Kind, Vec<String>)> = Vec::new();
    let mut foreign: Vec<String> = Vec::new();
    let mut current: Option<Kind> = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            current = Kind::from_heading(heading);
            match current {
                Some(kind) => known.push((kind, Vec::new())),
                None => foreign.push(line.to_owned()),
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
        let (Some(kind), Some((_, items))) = (current, known.last_mut()) else {
            foreign.push(line.to_owned());
            continue;
        };
        match kind.layout() {
            Layout::Inline => {
                items.extend(line.split(", ").map(|i| i.trim_matches('`').to_owned()))
            }
            Layout::Bullets => items.push(line.strip_prefix("- ").unwrap_or(line).to_owned()),
            Layout::Lines => items.push(line.to_owned()),
        }
    }
    (known, foreign)
}

/// Makes the sheet fit: first the oldest items of the least important
/// sections beyond their kept minimum, then the verbatim error and last
/// state are shortened, then the minimums go too.
fn fit(sections: &mut [Section], budget: usize, kind: TokenizerKind) {
    let cost = |s: &str| kind.count(s) + 2;
    let mut costs: Vec<Vec<usize>> = sections
        .iter()
        .map(|s| s.items.iter().map(|i| cost(i)).collect())
        .collect();
    let mut total: usize = sections
        .iter()
        .map(|s| cost(s.kind.title()) + 2)
        .sum::<usize>()
        + costs.iter().flatten().sum::<usize>();
    let mut trim = |sections: &mut [Section], total: &mut usize, floor: bool| {
        while *total > budget {
            let victim = sections
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    let (priority, keep) = s.kind.priority_and_keep();
                    priority < u8::MAX && s.items.len() > if floor { 0 } else { keep }
                })
                .min_by_key(|(_, s)| s.priority())
                .map(|(i, _)| i);
            let Some(i) = victim else { break };
            sections[i].items.remove(0);
            sections[i].omitted += 1;
            *total -= costs[i].remove(0);
        }
    };
    trim(sections, &mut total, false);
    if total > budget {
        for s in sections
            .iter_mut()
            .filter(|s| matches!(s.kind, Kind::LatestError | Kind::Last))
        {
            for item in &mut s.items {
                let short = clip(item, 200, 0);
                total -= cost(item).saturating_sub(cost(&short));
                *item = short;
            }
        }
    }
    trim(sections, &mut total, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_parses_back_as_its_kind() {
        let sections: Vec<Section> = Kind::ALL
            .into_iter()
            .map(|k| Section::new(k, vec!["src/lib.rs".into(), "APP-1432 done".into()]))
            .collect();
        let mut text = String::new();
        for s in &sections {
            s.render(&mut text);
        }
        let (known, foreign) = parse(&text);
        assert!(foreign.is_empty(), "{foreign:?}");
        let kinds: Vec<Kind> = known.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, Kind::ALL);
        for (kind, items) in known {
            assert_eq!(items, ["src/lib.rs", "APP-1432 done"], "{kind:?}");
        }
    }

    #[test]
    fn foreign_headings_become_the_earlier_briefing() {
        let mut sections = vec![
            Section::new(Kind::Files, vec!["read · a.rs".into()]),
            Section::new(Kind::Earlier, Vec::new()),
        ];
        merge(
            &mut sections,
            "## Summary\nThe agent fixed APP-1.\n## Files\n- edited · b.rs\n",
        );
        assert_eq!(sections[0].items, ["edited · b.rs", "read · a.rs"]);
        assert_eq!(sections[1].items, ["## Summary", "The agent fixed APP-1."]);
    }
}
