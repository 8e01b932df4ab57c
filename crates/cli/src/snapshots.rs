//! `abridge log`, `show`, `restore`, `recall` and `prune`: the snapshot store.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use abridge::{Attempt, SnapshotId, SnapshotSink, StoreConfig};
use abridge_store::{Entry, PgStore, SnapshotStore, Store};
use anyhow::{Context, Result, anyhow};
use clap::Args;
use serde_json::json;

use crate::stats::thousands;

/// Where snapshots are kept.
#[derive(Debug, Clone, Args)]
pub(crate) struct StoreArgs {
    /// Snapshot store: a SQLite file (default: abridge/snapshots.sqlite under
    /// the user's data directory) or postgres://user@host:port/db.
    #[arg(long, value_name = "PATH|URL")]
    pub(crate) store: Option<String>,
    /// Do not record a snapshot, nor the originals recall needs (`compact`
    /// then names no handles and declares no recall tool).
    #[arg(long, conflicts_with = "store")]
    pub(crate) no_store: bool,
}

/// Where a store is.
pub(crate) enum Location {
    File(PathBuf),
    Postgres(String),
}

impl Location {
    /// Where a `--store` value points: a PostgreSQL URL, a SQLite file, or
    /// (none given) the default file in the user's data directory.
    pub(crate) fn of(store: Option<&str>) -> Option<Location> {
        match store {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Some(Location::Postgres(url.to_owned()))
            }
            Some(p) => Some(Location::File(PathBuf::from(p))),
            None => Store::default_path().map(Location::File),
        }
    }
}

impl StoreArgs {
    /// ` --store PATH` when one was given, for hints that name commands.
    pub(crate) fn flag(&self) -> String {
        match &self.store {
            Some(p) => format!(" --store {p}"),
            None => String::new(),
        }
    }

    fn location(&self) -> Option<Location> {
        if self.no_store {
            return None;
        }
        Location::of(self.store.as_deref())
    }

    /// The store for recording, or `None` (with a note) when it cannot open:
    /// compaction goes on without it.
    pub(crate) fn open(
        &self,
        source: &str,
        retention: StoreConfig,
    ) -> Option<Box<dyn SnapshotSink>> {
        let opened: Result<Box<dyn SnapshotSink>> = match self.location()? {
            Location::File(path) => Store::open(&path)
                .map(|s| Box::new(s.with_source(source).with_retention(retention)) as Box<_>)
                .map_err(Into::into),
            Location::Postgres(url) => {
                postgres(&url).map(|s| Box::new(s.with_source(source)) as Box<_>)
            }
        };
        match opened {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("abridge: snapshots and recall off: {e:#}");
                None
            }
        }
    }

    pub(crate) fn read(&self) -> Result<Box<dyn SnapshotStore>> {
        Ok(match self.existing()? {
            (_, Opened::File(s)) => Box::new(s),
            (_, Opened::Postgres(s)) => Box::new(s),
        })
    }

    /// The store, which must exist, and where it is.
    fn existing(&self) -> Result<(String, Opened)> {
        match self
            .location()
            .ok_or_else(|| anyhow!("no snapshot store: give --store PATH"))?
        {
            Location::File(path) => {
                if !path.exists() {
                    return Err(anyhow!("{}: no snapshot store there yet", path.display()));
                }
                Ok((
                    path.display().to_string(),
                    Opened::File(Store::open(&path)?),
                ))
            }
            Location::Postgres(url) => Ok((
                "the PostgreSQL store".into(),
                Opened::Postgres(postgres(&url)?),
            )),
        }
    }
}

/// An opened store.
enum Opened {
    File(Store),
    Postgres(PgStore),
}

/// Connects to a PostgreSQL store on the command line's runtime.
fn postgres(url: &str) -> Result<PgStore> {
    static RUNTIME: std::sync::OnceLock<std::io::Result<tokio::runtime::Runtime>> =
        std::sync::OnceLock::new();
    let rt = RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
        })
        .as_ref()
        .map_err(|e| anyhow!("cannot start the runtime: {e}"))?;
    Ok(rt.block_on(PgStore::connect(url))?)
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

/// Arguments of `abridge prune`.
#[derive(Debug, Args)]
pub(crate) struct PruneArgs {
    /// Config whose `[store]` retention applies (default: 256 MB, 30 days).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Keep at most this many megabytes of snapshots (0: no limit).
    #[arg(long, value_name = "N")]
    max_mb: Option<u64>,
    /// Remove snapshots older than this many days (0: keep them).
    #[arg(long, value_name = "N")]
    max_age_days: Option<u64>,
    #[command(flatten)]
    store: StoreArgs,
}

pub(crate) fn prune(args: &PruneArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let mut retention = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read", path.display()))?;
            abridge::Config::from_toml(&text)
                .with_context(|| path.display().to_string())?
                .store
        }
        None => StoreConfig::default(),
    };
    if let Some(n) = args.max_mb {
        retention.max_megabytes = n;
    }
    if let Some(n) = args.max_age_days {
        retention.max_age_days = n;
    }
    let (at, opened) = args.store.existing()?;
    let (pruned, file) = match opened {
        Opened::File(mut store) => {
            let size = || std::fs::metadata(&at).map_or(0, |m| m.len());
            let before = size();
            let pruned = store.prune(&retention)?;
            store.vacuum()?;
            let file = format!(
                "; file {:.1} MB → {:.1} MB",
                before as f64 / 1e6,
                size() as f64 / 1e6
            );
            (pruned, file)
        }
        Opened::Postgres(mut store) => (store.prune(&retention)?, String::new()),
    };
    writeln!(
        out,
        "{at}: removed {} snapshot(s) and {} session(s), {} snapshot(s) left ({} MB occupied){file}",
        pruned.removed,
        pruned.sessions,
        pruned.kept,
        pruned.bytes / 1_000_000,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `abridge show`.
#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    id: IdArgs,
    /// Every field as JSON.
    #[arg(long)]
    json: bool,
}

/// A snapshot id and the store.
#[derive(Debug, Args)]
pub(crate) struct IdArgs {
    /// Snapshot id (see `abridge log`).
    id: SnapshotId,
    #[command(flatten)]
    store: StoreArgs,
}

/// Arguments of `abridge recall`.
#[derive(Debug, Args)]
pub(crate) struct RecallArgs {
    /// The handle, as a placeholder or a briefing's index writes it.
    handle: String,
    /// Page of a large original (1 when absent).
    #[arg(long)]
    page: Option<usize>,
    /// Characters of text per page.
    #[arg(long, default_value_t = abridge::RecallConfig::default().page_chars)]
    page_chars: usize,
    #[command(flatten)]
    store: StoreArgs,
}

pub(crate) fn log(args: &LogArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let store = args.store.read()?;
    let entries = store.list(args.limit)?;
    if args.json {
        for e in &entries {
            serde_json::to_writer(&mut *out, e)?;
            writeln!(out)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:>5}  {:<24}  {:>9}   {:<9} {:<34} SOURCE",
        "ID", "RECORDED (UTC)", "BEFORE", "AFTER", "WHAT IT DID"
    )?;
    for e in &entries {
        writeln!(
            out,
            "{:>5}  {:<24}  {:>9} → {:<9} {:<34} {}",
            e.id,
            e.created_at,
            thousands(e.tokens_before.get()),
            thousands(e.tokens_after.get()),
            how(e),
            e.source.as_deref().unwrap_or("")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What a compaction did, in a few words.
fn how(e: &Entry) -> String {
    let dropped = match e.dropped_iterations {
        0 => None,
        1 => Some("dropped 1 iteration".to_owned()),
        n => Some(format!("dropped {n} iterations")),
    };
    match (&e.summarizer, dropped) {
        (Some(s), Some(d)) => format!("briefing by {s}, {d}"),
        (Some(s), None) => format!("briefing by {s}"),
        (None, Some(d)) => format!("clipped, {d}"),
        (None, None) => "clipping only".to_owned(),
    }
}

pub(crate) fn show(args: &ShowArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let s = args.id.store.read()?.get(args.id.id)?;
    let messages = |body: &serde_json::Value| body["messages"].as_array().map_or(0, Vec::len);
    if args.json {
        let view = json!({
            "id": s.entry.id,
            "created_at": s.entry.created_at,
            "source": s.entry.source,
            "model": s.entry.model,
            "family": s.entry.family,
            "tokens_before": s.entry.tokens_before,
            "tokens_after": s.entry.tokens_after,
            "target": s.report.target,
            "summarizer": s.entry.summarizer,
            "attempts": s.report.attempts,
            "policies": s.report.policies,
            "messages_before": messages(&s.before),
            "messages_after": messages(&s.after),
            "briefing": s.briefing,
        });
        serde_json::to_writer_pretty(&mut *out, &view)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let e = &s.entry;
    writeln!(
        out,
        "snapshot {} · {} · {}",
        e.id,
        e.created_at,
        e.source.as_deref().unwrap_or("(no source)")
    )?;
    writeln!(
        out,
        "model     {} ({} API)",
        e.model.as_deref().unwrap_or("unknown"),
        e.family
    )?;
    let target = s
        .report
        .target
        .map(|t| format!(" (target {})", thousands(t.get())))
        .unwrap_or_default();
    writeln!(
        out,
        "tokens    {} → {}{target} · messages {} → {}",
        thousands(e.tokens_before.get()),
        thousands(e.tokens_after.get()),
        messages(&s.before),
        messages(&s.after)
    )?;
    writeln!(out, "did       {}", how(e))?;
    for p in &s.report.policies {
        writeln!(
            out,
            "          {} {} (−{} tokens)",
            p.policy,
            p.items,
            thousands(p.tokens_saved.get())
        )?;
    }
    if !s.report.attempts.is_empty() {
        writeln!(out, "summarizers")?;
        write_attempts(&s.report.attempts, out)?;
    }
    if let Some(b) = &s.briefing {
        writeln!(out, "briefing")?;
        for line in b.lines() {
            writeln!(out, "  {line}")?;
        }
    }
    writeln!(
        out,
        "\n(abridge restore {}{} prints the history before it; --json for all fields)",
        e.id,
        args.id.store.flag()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Each attempt with its latency, outcome and verification.
pub(crate) fn write_attempts(attempts: &[Attempt], out: &mut dyn Write) -> Result<()> {
    for a in attempts {
        let status = match a.error() {
            None => "used".to_owned(),
            Some(e) => format!("failed: {e}"),
        };
        let cost = a.usage.map_or(String::new(), |u| {
            format!(
                ", {} prompt and {} completion tokens",
                u.prompt_tokens(),
                u.output_tokens
            )
        });
        writeln!(out, "  {} ({} ms{cost}): {status}", a.summarizer, a.ms)?;
        if let Some(ver) = a.verification() {
            writeln!(
                out,
                "    verification: {} facts appended, {} missing, {} unverified claims, {} task statuses restated",
                ver.appended_facts.len(),
                ver.missing_facts.len(),
                ver.unverified_claims.len(),
                ver.restated_tasks.len()
            )?;
        }
    }
    Ok(())
}

pub(crate) fn restore(args: &IdArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let s = args.store.read()?.get(args.id)?;
    crate::write_json(out, &s.before, true)?;
    Ok(ExitCode::SUCCESS)
}

/// `abridge recall`: the original from the store, in pages; exit 1 when
/// there is none.
pub(crate) fn recall(args: &RecallArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let store = args.store.read()?;
    let mut failed = None;
    let input = abridge::recall::RecallInput {
        handle: Some(args.handle.clone()),
        query: None,
        page: args.page,
    };
    let answer = abridge::recall::answer(
        "abridge recall",
        Ok(input),
        |h| match store.recall(h) {
            Ok(o) => o.map(|s| std::sync::Arc::new(s.original)),
            Err(e) => {
                failed = Some(e.to_string());
                None
            }
        },
        &[],
        args.page_chars,
    );
    if let Some(e) = failed {
        return Err(anyhow!("cannot read the store: {e}"));
    }
    writeln!(out, "{}", answer.text())?;
    Ok(if answer.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
