//! `abridge replay`: a stored compaction run again, with another prompt or
//! settings, beside what was stored.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use abridge::{Attempt, Compactor, SnapshotId};
use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use serde_json::json;

use crate::engine_args::EngineArgs;
use crate::snapshots::{StoreArgs, write_attempts};

/// Arguments of `abridge replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// Snapshot id (see `abridge log`).
    id: SnapshotId,
    /// System prompt file for the LLM summarizers (default: the built-in prompt.md).
    #[arg(long, value_name = "FILE")]
    prompt: Option<PathBuf>,
    /// Print both results as one JSON object.
    #[arg(long)]
    json: bool,
    /// Write a playground bundle (system prompt, user message, serialized
    /// history, the stored output, metadata) under this directory instead,
    /// calling no summarizer.
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    store: StoreArgs,
}

/// One side of `replay`: which summarizer, what it made, how each attempt went.
#[derive(Debug, Serialize)]
struct Side {
    summarizer: Option<String>,
    tokens_after: abridge::tokens::Counted,
    briefing: Option<String>,
    attempts: Vec<Attempt>,
}

pub(crate) fn replay(args: &ReplayArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let s = args.store.read()?.get(args.id)?;
    let conv = s.history()?;
    let mut config = s.config.clone();
    args.engine.apply(&mut config)?;
    let prompt = match &args.prompt {
        Some(p) => Some(
            std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()))?,
        ),
        None => None,
    };
    if let Some(text) = &prompt {
        for spec in &mut config.summarizers {
            spec.prompt = Some(text.clone());
        }
    }
    if let Some(dir) = &args.bundle {
        let w = crate::bundle::write(&s, config, prompt, dir)?;
        writeln!(out, "{}: {}", w.dir.display(), w.files.join(", "))?;
        return Ok(ExitCode::SUCCESS);
    }
    let summarizers = abridge_llm::cascade(&config.summarizers, None);
    let mut compactor = Compactor::new(config)?;
    compactor.set_summarizers(summarizers);
    let outcome = compactor
        .compact(&conv)
        .with_context(|| format!("snapshot {}: cannot replay", s.entry.id))?;
    let tag = &compactor.config().summary.wrapper;
    let new_briefing = outcome.report.briefing_text(&outcome.conversation, tag);
    let stored = Side {
        summarizer: s.entry.summarizer,
        tokens_after: s.entry.tokens_after,
        briefing: s.briefing,
        attempts: s.report.attempts,
    };
    let r = outcome.report;
    let replayed = Side {
        summarizer: r.summarizer,
        tokens_after: r.tokens_after,
        briefing: new_briefing,
        attempts: r.attempts,
    };
    if args.json {
        serde_json::to_writer(
            &mut *out,
            &json!({"id": s.entry.id, "stored": stored, "replayed": replayed}),
        )?;
        writeln!(out)?;
    } else {
        side_by_side(&stored, &replayed, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

const COLUMN: usize = 60;

/// Two briefings in columns, then each one's attempts and verification.
fn side_by_side(left: &Side, right: &Side, out: &mut dyn Write) -> Result<()> {
    let head = |v: &Side, what: &str| {
        format!(
            "{what}: {} ({} tokens after)",
            v.summarizer.as_deref().unwrap_or("clipping only"),
            v.tokens_after
        )
    };
    let lines = |v: &Side| -> Vec<String> {
        let text = v.briefing.as_deref().unwrap_or("(no briefing)");
        text.lines().flat_map(|l| wrap(l, COLUMN)).collect()
    };
    let (l, r) = (lines(left), lines(right));
    writeln!(
        out,
        "{:<w$} │ {}",
        head(left, "stored"),
        head(right, "replayed"),
        w = COLUMN
    )?;
    writeln!(out, "{}─┼─{}", "─".repeat(COLUMN), "─".repeat(COLUMN))?;
    for i in 0..l.len().max(r.len()) {
        let a = l.get(i).map_or("", String::as_str);
        let b = r.get(i).map_or("", String::as_str);
        let pad = COLUMN.saturating_sub(a.chars().count());
        writeln!(out, "{a}{} │ {b}", " ".repeat(pad))?;
    }
    for (name, v) in [("stored", left), ("replayed", right)] {
        writeln!(out, "\n{name} attempts:")?;
        write_attempts(&v.attempts, out)?;
    }
    Ok(())
}

/// `line` in lines of at most `width` characters, broken at spaces (a word
/// longer than a line is cut).
fn wrap(line: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in line.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let cur = lines.last_mut().map_or(0, |l| l.chars().count());
            let sep = usize::from(cur > 0);
            if cur + sep + word.len() <= width {
                if let Some(l) = lines.last_mut() {
                    if sep == 1 {
                        l.push(' ');
                    }
                    l.extend(word.iter());
                }
                break;
            }
            if cur > 0 {
                lines.push(String::new());
                continue;
            }
            // A word longer than a whole line.
            let rest = word.split_off(width.min(word.len()));
            if let Some(l) = lines.last_mut() {
                l.extend(word.iter());
            }
            lines.push(String::new());
            word = rest;
            if word.is_empty() {
                lines.pop();
                break;
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wraps_at_word_boundaries() {
        assert_eq!(wrap("aa bb cc dd", 5), ["aa bb", "cc dd"]);
        assert_eq!(wrap("", 5), [""]);
        assert_eq!(wrap("abcdefghij k", 4), ["abcd", "efgh", "ij k"]);
        assert!(
            wrap(&"word ".repeat(40), 60)
                .iter()
                .all(|l| l.chars().count() <= 60)
        );
    }
}
