//! The task's own details: what the commands the task told the agent to run
//! printed (`Run bd show APP-1 to see the issue details`), and the latest
//! output of the same command for another item (the subtask in progress,
//! `bd show APP-1.3`). A briefing that keeps them keeps the specification,
//! not only what was done about it.

use std::collections::HashMap;

use abridge_model::text::clip;
use abridge_model::{Message, Part};

use crate::config::FactConfig;
use crate::ident::is_identifier;
use crate::outcome::{CallOutcome, outcome};
use crate::progress::closed_item;
use crate::tools::{ToolKind, classify};

/// One command's output, kept as the task's details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    /// The command, as the agent ran it.
    pub command: String,
    /// What it printed (clipped to `DETAIL_CHARS`).
    pub output: String,
}

impl Detail {
    /// The command as a heading line, then its output quoted (`> ` on
    /// every line, so that its own headings stay inside it).
    pub fn text(&self) -> String {
        let quoted: Vec<String> = self
            .output
            .trim_end()
            .lines()
            .map(|l| format!("> {l}").trim_end().to_owned())
            .collect();
        format!("`{}`:\n{}", self.command, quoted.join("\n"))
    }
}

/// Each one-line shell command in `messages` whose result shows success,
/// with that result's text, in order.
pub(crate) fn successful_commands(messages: &[Message], cfg: &FactConfig) -> Vec<(String, String)> {
    let mut commands: HashMap<&str, String> = HashMap::new();
    let mut out = Vec::new();
    for p in messages.iter().flat_map(|m| &m.parts) {
        match p {
            Part::ToolCall(c) => {
                if let ToolKind::Shell(cmd) = classify(&c.name, &c.arguments.fields())
                    && !cmd.trim().contains('\n')
                {
                    commands.insert(c.id.as_str(), cmd.trim().to_owned());
                }
            }
            Part::ToolResult(r) => {
                if let Some(cmd) = commands.remove(r.call_id.as_str()) {
                    let text = r.text();
                    if outcome(r, &text, &cfg.error_prefixes) == CallOutcome::Ok {
                        out.push((cmd, text.into_owned()));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Most characters of one command's output kept.
const DETAIL_CHARS: usize = 3_000;

/// The details of `task` found in `messages`: the latest successful output
/// of each command the task names, then, for each of them, the latest
/// output of the same program and subcommand run on something else,
/// unless `progress` (the region's [`Facts::progress`](crate::Facts))
/// records that item closed.
pub(crate) fn task_details(
    messages: &[Message],
    task: &str,
    cfg: &FactConfig,
    progress: &[String],
) -> Vec<Detail> {
    let mut named: Vec<Detail> = Vec::new();
    let mut related: Vec<(String, Detail)> = Vec::new();
    for (cmd, text) in successful_commands(messages, cfg) {
        let detail = Detail {
            output: clip(text.trim(), DETAIL_CHARS, 0),
            command: cmd,
        };
        if names_an_item(&detail.command) && task.contains(detail.command.as_str()) {
            named.retain(|d| d.command != detail.command);
            named.push(detail);
        } else if let Some(f) = family(&detail.command) {
            related.retain(|(g, _)| *g != f);
            related.push((f, detail));
        }
    }
    let families: Vec<String> = named.iter().filter_map(|d| family(&d.command)).collect();
    let closed = |d: &Detail| {
        let item = d.command.split_whitespace().last().unwrap_or_default();
        progress.iter().any(|p| closed_item(p) == Some(item))
    };
    related.retain(|(f, d)| families.contains(f) && !closed(d));
    named
        .into_iter()
        .chain(related.into_iter().map(|(_, d)| d))
        .collect()
}

/// True when the command is about one item: an argument after the
/// program is an identifier (`bd show APP-1`, not `ls -la` or `bd ready`).
fn names_an_item(cmd: &str) -> bool {
    cmd.split_whitespace().skip(1).any(is_identifier)
}

/// Program and subcommand (`bd show`), when the command names an item.
fn family(cmd: &str) -> Option<String> {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    (words.len() >= 3 && names_an_item(cmd)).then(|| format!("{} {}", words[0], words[1]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::exchange;

    fn run(id: &str, cmd: &str, out: &str) -> [Message; 2] {
        exchange(id, "Bash", serde_json::json!({ "command": cmd }), out)
    }

    #[test]
    fn the_named_command_and_the_item_in_progress_unless_closed() {
        let task = "Work on APP-1. Run bd show APP-1 for the details and ls -la to look around.";
        let messages: Vec<Message> = [
            run("a", "bd show APP-1", "## Goal\nShip it"),
            run("b", "ls -la", "total 0"),
            run("c", "bd show APP-1.2", "Subtask two"),
        ]
        .concat();
        let cfg = FactConfig::default();
        let details = task_details(&messages, task, &cfg, &[]);
        let commands: Vec<&str> = details.iter().map(|d| d.command.as_str()).collect();
        assert_eq!(commands, ["bd show APP-1", "bd show APP-1.2"]);
        // Its own headings stay inside the quote.
        assert_eq!(details[0].text(), "`bd show APP-1`:\n> ## Goal\n> Ship it");
        let closed = ["closed APP-1.2: done".to_owned()];
        let details = task_details(&messages, task, &cfg, &closed);
        assert_eq!(details.len(), 1);
    }
}
