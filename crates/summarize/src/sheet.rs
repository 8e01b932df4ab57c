//! The offline briefing: a fact sheet rendered in sections, fitted to a token
//! budget by dropping the oldest, least important items first, and merged
//! with the previous briefing when compactions chain.

use abridge_tokens::TokenizerKind;
use serde_json::Value;

use crate::facts::{Facts, clip};

/// One section of the sheet.
#[derive(Debug, Clone)]
struct Section {
    title: String,
    items: Vec<String>,
    /// Lower is trimmed first; `u8::MAX` is never trimmed.
    priority: u8,
    /// Items kept however tight the budget (the newest ones).
    keep: usize,
    /// Render items as one comma-separated line of `code` spans.
    inline: bool,
    omitted: usize,
}

impl Section {
    fn new(title: &str, priority: u8, keep: usize, items: Vec<String>) -> Self {
        Section {
            title: title.to_owned(),
            items,
            priority,
            keep,
            inline: false,
            omitted: 0,
        }
    }

    fn render(&self, out: &mut String) {
        if self.items.is_empty() {
            return;
        }
        out.push_str("## ");
        out.push_str(&self.title);
        out.push('\n');
        if self.omitted > 0 {
            out.push_str(&format!("- ({} older items omitted)\n", self.omitted));
        }
        if self.inline {
            let ids: Vec<String> = self.items.iter().map(|i| format!("`{i}`")).collect();
            out.push_str(&ids.join(", "));
            out.push('\n');
        } else if self.priority == u8::MAX {
            for i in &self.items {
                out.push_str(i);
                out.push('\n');
            }
        } else {
            for i in &self.items {
                out.push_str("- ");
                // One line per item, so that a chained briefing parses back.
                out.push_str(&i.replace('\n', " ⏎ "));
                out.push('\n');
            }
        }
        out.push('\n');
    }
}

/// Titles, so that a previous sheet can be parsed back.
const TASK: &str = "Task";
const TODO: &str = "Task list (as last written by the agent)";
const DECISIONS: &str = "Decisions and corrections from the user";
const FILES: &str = "Files";
const COMMANDS: &str = "Commands run";
const CALLS: &str = "Other tool calls";
const ERRORS: &str = "Errors (first lines, oldest first)";
const LATEST_ERROR: &str = "Latest error (verbatim)";
const IDS: &str = "Identifiers used";
const RESULT_IDS: &str = "Identifiers seen in tool results";
const USERS: &str = "User messages";
const EARLIER: &str = "Earlier briefing";
const LAST: &str = "Last state before this briefing";

/// Renders the facts (and the task) as a sheet within `budget` tokens,
/// merged with `previous` (an earlier briefing's text) when given.
pub fn render(
    task: &str,
    facts: &Facts,
    previous: Option<&str>,
    budget: usize,
    kind: TokenizerKind,
) -> String {
    let mut sections = sections(task, facts);
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
        .map(|s| format!("{} ({})", s.title, s.omitted))
        .collect();
    if !gone.is_empty() {
        out.push_str(&format!("({OMITTED}{})\n", gone.join(", ")));
    }
    out.trim_end().to_owned()
}

const OMITTED: &str = "Left out for space: ";

const ROOT_NOTE: &str = "Paths below are relative to ";

/// Writes absolute paths under the directory that most of them share
/// relative to it (named once at the top): the same facts in fewer tokens.
fn relativize(sections: &mut [Section]) -> Option<String> {
    let is_path_section = |s: &Section| s.title == FILES || s.title.starts_with("Identifiers");
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

fn sections(task: &str, f: &Facts) -> Vec<Section> {
    let fixed = |t: &str, items: Vec<String>| Section::new(t, u8::MAX, usize::MAX, items);
    let files = f
        .files
        .iter()
        .map(|x| {
            let mut ops = Vec::new();
            for (n, what) in [
                (x.edited, "edited"),
                (x.written, "written"),
                (x.read, "read"),
                (x.failed, "failed"),
            ] {
                match n {
                    0 => {}
                    1 => ops.push(what.to_owned()),
                    n => ops.push(format!("{what} {n}×")),
                }
            }
            format!("{} · {}", ops.join(", "), x.path)
        })
        .collect();
    // Paths already listed under Files are not repeated as identifiers.
    let listed: Vec<&str> = f.files.iter().map(|x| x.path.as_str()).collect();
    let used: Vec<String> = f
        .used_ids
        .iter()
        .filter(|i| !listed.contains(&i.as_str()))
        .cloned()
        .collect();
    let mut ids = Section::new(IDS, 6, 40, used);
    ids.inline = true;
    let mut result_ids = Section::new(RESULT_IDS, 2, 0, f.result_ids.clone());
    result_ids.inline = true;
    vec![
        fixed(TASK, vec![task.trim().to_owned()]),
        fixed(
            TODO,
            f.todo
                .as_ref()
                .map(|(_, args)| todo_lines(args))
                .unwrap_or_default(),
        ),
        Section::new(DECISIONS, 8, 10, f.decisions.clone()),
        Section::new(FILES, 7, 10, files),
        Section::new(COMMANDS, 3, 3, f.commands.clone()),
        Section::new(CALLS, 1, 0, f.other_calls.clone()),
        Section::new(ERRORS, 4, 1, f.errors.clone()),
        fixed(LATEST_ERROR, f.latest_error.iter().cloned().collect()),
        ids,
        result_ids,
        Section::new(USERS, 5, 2, f.user_messages.clone()),
        Section::new(EARLIER, 0, 0, Vec::new()),
        fixed(LAST, f.last_state.iter().cloned().collect()),
    ]
}

/// `- [status] content` lines of a TodoWrite-style call, or its JSON.
fn todo_lines(args: &Value) -> Vec<String> {
    let list = ["todos", "items", "tasks", "plan"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_array));
    match list {
        Some(items) => items
            .iter()
            .map(|t| {
                let text = ["content", "step", "title", "task", "description"]
                    .iter()
                    .find_map(|k| t.get(*k).and_then(Value::as_str))
                    .map_or_else(|| t.to_string(), str::to_owned);
                let status = t.get("status").and_then(Value::as_str).unwrap_or("?");
                format!("- [{status}] {text}")
            })
            .collect(),
        None => vec![clip(&args.to_string(), 2_000, 0)],
    }
}

/// Folds a previous briefing in: its items come first (older) and
/// duplicates keep their newest form. A previous text that is not a sheet
/// (an LLM briefing) becomes the "Earlier briefing" section.
fn merge(sections: &mut [Section], previous: &str) {
    let parsed = parse(previous);
    if parsed.is_empty() {
        if let Some(s) = sections.iter_mut().find(|s| s.title == EARLIER) {
            s.items = previous
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect();
        }
        return;
    }
    for (title, old) in parsed {
        let Some(s) = sections.iter_mut().find(|s| s.title == title) else {
            continue;
        };
        match s.title.as_str() {
            // The task stays as first restated; the newest state wins elsewhere.
            TASK => s.items = old,
            TODO | LATEST_ERROR | LAST => {
                if s.items.is_empty() {
                    s.items = old;
                }
            }
            _ => {
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

/// Sections of a sheet: title and items (bullets, inline ids or lines).
fn parse(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            out.push((title.trim().to_owned(), Vec::new()));
            continue;
        }
        let Some((title, items)) = out.last_mut() else {
            continue;
        };
        if line.trim().is_empty()
            || line.starts_with("- (") && line.ends_with("older items omitted)")
        {
            continue;
        }
        if title.starts_with("Identifiers") {
            items.extend(line.split(", ").map(|i| i.trim_matches('`').to_owned()));
        } else if let Some(item) = line.strip_prefix("- ").filter(|_| title != TODO) {
            items.push(item.to_owned());
        } else {
            items.push(line.to_owned());
        }
    }
    out
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
    let mut total: usize = sections.iter().map(|s| cost(&s.title) + 2).sum::<usize>()
        + costs.iter().flatten().sum::<usize>();
    let mut trim = |sections: &mut [Section], total: &mut usize, floor: bool| {
        while *total > budget {
            let victim = sections
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    s.priority < u8::MAX && s.items.len() > if floor { 0 } else { s.keep }
                })
                .min_by_key(|(_, s)| s.priority)
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
            .filter(|s| s.title == LATEST_ERROR || s.title == LAST)
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
