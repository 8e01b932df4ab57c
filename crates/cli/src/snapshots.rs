//! `abridge log`, `show`, `restore` and `replay`: the snapshot store.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use abridge::Compactor;
use abridge_store::Store;
use anyhow::{Context, Result, anyhow};
use clap::Args;
use serde_json::{Value, json};

use crate::engine_args::EngineArgs;
use crate::stats::thousands;

/// Where snapshots are kept.
#[derive(Debug, Clone, Args)]
pub(crate) struct StoreArgs {
    /// Snapshot database (default: abridge/snapshots.sqlite under the user's data directory).
    #[arg(long, value_name = "PATH")]
    pub(crate) store: Option<PathBuf>,
    /// Do not record a snapshot.
    #[arg(long, conflicts_with = "store")]
    pub(crate) no_store: bool,
}

impl StoreArgs {
    fn path(&self) -> Option<PathBuf> {
        if self.no_store {
            return None;
        }
        self.store.clone().or_else(Store::default_path)
    }

    /// The store for recording, or `None` (with a note) when it cannot open:
    /// compaction goes on without it.
    pub(crate) fn open(&self, source: &str) -> Option<Store> {
        let path = self.path()?;
        match Store::open(&path) {
            Ok(s) => Some(s.with_source(source)),
            Err(e) => {
                eprintln!("abridge: snapshots off: {e}");
                None
            }
        }
    }

    fn read(&self) -> Result<Store> {
        let path = self
            .path()
            .ok_or_else(|| anyhow!("no snapshot store: give --store PATH"))?;
        if !path.exists() {
            return Err(anyhow!("{}: no snapshot store there yet", path.display()));
        }
        Store::open(&path).map_err(Into::into)
    }
}

/// Arguments of `abridge log`.
#[derive(Debug, Args)]
pub(crate) struct LogArgs {
    /// How many to list.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

/// A snapshot id and the store.
#[derive(Debug, Args)]
pub(crate) struct IdArgs {
    /// Snapshot id (see `abridge log`).
    id: i64,
    #[command(flatten)]
    store: StoreArgs,
}

/// Arguments of `abridge replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// Snapshot id (see `abridge log`).
    id: i64,
    /// System prompt file for the LLM summarizers (default: the built-in prompt.md).
    #[arg(long, value_name = "FILE")]
    prompt: Option<PathBuf>,
    /// Print both results as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    store: StoreArgs,
}

pub(crate) fn log(args: &LogArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let store = args.store.read()?;
    for e in store.list(args.limit)? {
        if args.json {
            serde_json::to_writer(&mut *out, &e)?;
            writeln!(out)?;
        } else {
            writeln!(
                out,
                "{:>5}  {}  {:>9} → {:<9} {:<24} {}",
                e.id,
                e.created_at,
                thousands(e.tokens_before as u64),
                thousands(e.tokens_after as u64),
                e.summarizer.as_deref().unwrap_or("clipping only"),
                e.source.as_deref().unwrap_or("")
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn show(args: &IdArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let s = args.store.read()?.get(args.id)?;
    let view = json!({
        "id": s.entry.id,
        "created_at": s.entry.created_at,
        "source": s.entry.source,
        "model": s.entry.model,
        "tokens_before": s.entry.tokens_before,
        "tokens_after": s.entry.tokens_after,
        "target": s.target,
        "summarizer": s.entry.summarizer,
        "attempts": s.attempts,
        "policies": s.report["policies"],
        "messages_before": s.before["messages"].as_array().map(Vec::len),
        "messages_after": s.after["messages"].as_array().map(Vec::len),
        "briefing": s.briefing,
    });
    serde_json::to_writer_pretty(&mut *out, &view)?;
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn restore(args: &IdArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let s = args.store.read()?.get(args.id)?;
    serde_json::to_writer_pretty(&mut *out, &s.before)?;
    writeln!(out)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn replay(args: &ReplayArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let s = args.store.read()?.get(args.id)?;
    let conv = s.history()?;
    let mut config = s.config()?;
    args.engine.apply(&mut config)?;
    let prompt = match &args.prompt {
        Some(p) => Some(
            std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()))?,
        ),
        None => None,
    };
    let mut compactor = Compactor::new(config)?;
    compactor.set_summarizers(args.engine.summarizers(prompt.as_deref()));
    let outcome = compactor
        .compact(&conv)
        .with_context(|| format!("snapshot {}: cannot replay", s.entry.id))?;
    let r = &outcome.report;
    let tag = &compactor.config().summary.wrapper;
    let new_briefing = outcome
        .conversation
        .messages
        .iter()
        .map(abridge::model::Message::text_content)
        .find_map(|t| abridge::summarize::unwrap(tag, &t).map(str::to_owned));
    let stored = json!({"summarizer": s.entry.summarizer, "tokens_after": s.entry.tokens_after,
        "briefing": s.briefing, "attempts": s.attempts});
    let replayed = json!({"summarizer": r.summarizer, "tokens_after": r.tokens_after,
        "briefing": new_briefing, "attempts": r.attempts});
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
fn side_by_side(left: &Value, right: &Value, out: &mut dyn Write) -> Result<()> {
    let head = |v: &Value, what: &str| {
        format!(
            "{what}: {} ({} tokens after)",
            v["summarizer"].as_str().unwrap_or("clipping only"),
            v["tokens_after"]
        )
    };
    let lines = |v: &Value| -> Vec<String> {
        let text = v["briefing"].as_str().unwrap_or("(no briefing)");
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
        for a in v["attempts"].as_array().into_iter().flatten() {
            let status = if a["ok"] == true {
                "used".to_owned()
            } else {
                format!("failed: {}", a["error"].as_str().unwrap_or("?"))
            };
            writeln!(
                out,
                "  {} ({} ms): {status}",
                a["summarizer"].as_str().unwrap_or("?"),
                a["ms"]
            )?;
            if let Some(ver) = a.get("verification").filter(|v| !v.is_null()) {
                writeln!(
                    out,
                    "    verification: {} facts appended, {} missing, {} unverified claims",
                    ver["appended_facts"].as_array().map_or(0, Vec::len),
                    ver["missing_facts"].as_array().map_or(0, Vec::len),
                    ver["unverified_claims"].as_array().map_or(0, Vec::len)
                )?;
            }
        }
    }
    Ok(())
}

fn wrap(line: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(width).map(|c| c.iter().collect()).collect()
}
