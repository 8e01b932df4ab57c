//! What goes into each section of the sheet, from the facts.

use abridge_model::text::clip;

use super::{Kind, Section, SheetItem};
use crate::facts::{Facts, FileFact};
use crate::ident::{function_of, mentions};
use crate::progress::CommandFact;
use crate::tasks::TaskList;

/// Characters of the task details together, per token of budget: about a
/// quarter of the sheet at most.
const DETAIL_CHARS_PER_TOKEN: usize = 1;

/// Names a file's line lists of where the agent worked in it, at most.
const SYMBOLS: usize = 8;

/// The sheet's sections in order, filled from the facts (before a previous
/// briefing is merged in and the whole is fitted). The facts' lists move
/// into the sections: a long region's are not held twice.
pub(super) fn sections(mut f: Facts, budget: usize) -> Vec<Section> {
    let detail_chars = budget * DETAIL_CHARS_PER_TOKEN / f.details.len().max(1);
    let files: Vec<SheetItem> = f
        .files
        .iter()
        .map(|x| SheetItem::keyed(file_line(x), &x.path))
        .collect();
    let todo = f.todo.as_ref().map(TaskList::lines).unwrap_or_default();
    let mut sections: Vec<Section> = Kind::ALL
        .into_iter()
        .map(|kind| {
            let take = std::mem::take::<Vec<String>>;
            let texts: Vec<String> = match kind {
                // The task message stays verbatim above the briefing.
                Kind::Task => Vec::new(),
                Kind::Details => f
                    .details
                    .iter()
                    .map(|d| clip(&d.text(), detail_chars.max(200), 0))
                    .collect(),
                Kind::Todo => todo.clone(),
                Kind::Created => take(&mut f.created),
                Kind::Files => return Section::new(kind, files.clone()),
                Kind::Decisions => take(&mut f.decisions),
                Kind::Progress => take(&mut f.progress),
                Kind::Narrative => take(&mut f.narrative),
                // A command is listed once: with its failure, or as run.
                Kind::Commands => f
                    .commands
                    .iter()
                    .filter(|c| c.failure.is_none())
                    .map(CommandFact::line)
                    .collect(),
                Kind::Errors => f
                    .errors
                    .iter()
                    .cloned()
                    .chain(
                        f.commands
                            .iter()
                            .filter(|c| c.failure.is_some())
                            .map(CommandFact::line),
                    )
                    .collect(),
                Kind::Calls => take(&mut f.other_calls),
                Kind::LatestError => f.latest_error.iter().cloned().collect(),
                Kind::Ids => Vec::new(),
                Kind::ResultIds => Vec::new(),
                Kind::Users => take(&mut f.user_messages),
                Kind::ResultLines | Kind::Earlier => Vec::new(),
                Kind::Last => f.last_state.iter().cloned().collect(),
            };
            Section::new(kind, texts.into_iter().map(SheetItem::new).collect())
        })
        .collect();
    fill_ids(&mut sections, &f.used_ids);
    sections
}

/// The identifiers section: the ids used, less those a section trimmed
/// after it already names, and a function under another arity
/// (`with_span/3`, `with_span/4`) only once.
fn fill_ids(sections: &mut [Section], used_ids: &[String]) {
    let ids_priority = Kind::Ids.priority_and_keep().0;
    let named: String = sections
        .iter()
        .filter(|s| s.priority() > ids_priority)
        .flat_map(|s| s.items.iter())
        .map(|i| i.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(ids) = sections.iter_mut().find(|s| s.kind == Kind::Ids) {
        let mut seen = Vec::new();
        ids.items = used_ids
            .iter()
            .filter(|i| {
                let name = function_of(i).unwrap_or(i);
                let new = !mentions(&named, name) && !seen.contains(&name);
                seen.push(name);
                new
            })
            .map(SheetItem::new)
            .collect();
    }
}

/// A file's line: what was done to it, the names it touched, its path.
fn file_line(x: &FileFact) -> String {
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
    let recent = &x.symbols[x.symbols.len().saturating_sub(SYMBOLS)..];
    let symbols: Vec<String> = recent.iter().map(|s| format!("`{s}`")).collect();
    if symbols.is_empty() {
        format!("{} · {}", ops.join(", "), x.path)
    } else {
        format!("{} ({}) · {}", ops.join(", "), symbols.join(", "), x.path)
    }
}
