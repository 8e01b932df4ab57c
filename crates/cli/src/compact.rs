//! `abridge compact`: rewrite a conversation to fit a budget.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use abridge::model::Family;
use abridge::{Compactor, Error as EngineError, PolicyKind};
use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;

use crate::engine_args::EngineArgs;
use crate::input::{self, InputArgs};
use crate::snapshots::StoreArgs;
use crate::write_body;

/// Arguments of `abridge compact`.
#[derive(Debug, Args)]
pub(crate) struct CompactArgs {
    /// File to compact (`-` for stdin; `FILE#N` picks the N-th conversation).
    file: String,
    /// Write the body here instead of stdout.
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Wire format of the output, openai or anthropic (default: the input's).
    #[arg(long, value_name = "FAMILY")]
    to: Option<Family>,
    /// Write the compaction report (JSON) here.
    #[arg(long, value_name = "REPORT.json")]
    report: Option<PathBuf>,
    /// Print engine events as JSON lines on stderr.
    #[arg(long)]
    events: bool,
    /// Print compact JSON instead of pretty.
    #[arg(long)]
    compact_json: bool,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    input: InputArgs,
}

/// Exit code when the history cannot shrink to the target.
const CANNOT_SHRINK: u8 = 3;

pub(crate) fn run(args: &CompactArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let (label, conv) = input::one(&args.file, &args.input)?;
    let config = args.engine.config(&conv)?;
    let mut compactor = Compactor::new(config)?;
    compactor.set_summarizers(args.engine.summarizers(compactor.config(), None));
    if let Some(store) = args.store.open(&label) {
        compactor.set_store(Box::new(store));
    }
    if args.events {
        compactor.subscribe(|e| {
            if let Ok(line) = serde_json::to_string(e) {
                eprintln!("{line}");
            }
        });
    }
    let limits = *compactor.limits();
    let outcome = match compactor.compact(&conv) {
        Ok(o) => o,
        Err(e @ EngineError::CannotShrink { .. }) => {
            eprintln!("abridge: {label}: {e}");
            if let Some(path) = &args.report {
                let report = json!({"file": label, "error": e.to_string(), "limits": limits});
                std::fs::write(path, serde_json::to_vec_pretty(&report)?)
                    .with_context(|| format!("{}: cannot write", path.display()))?;
            }
            return Ok(ExitCode::from(CANNOT_SHRINK));
        }
        Err(e) => return Err(e).with_context(|| format!("{label}: cannot compact")),
    };
    let r = &outcome.report;
    if let Some(id) = &r.snapshot {
        eprintln!(
            "abridge: {label}: snapshot {id} stored (abridge show {id}, abridge restore {id})"
        );
    }
    for e in &r.events {
        if let abridge::Event::SnapshotFailed { error } = e {
            eprintln!("abridge: {label}: snapshot not stored: {error}");
        }
    }
    for a in &r.attempts {
        if let Some(error) = a.error() {
            eprintln!(
                "abridge: {label}: summarizer {} failed: {error}",
                a.summarizer
            );
        }
    }
    let steps: Vec<String> = r
        .policies
        .iter()
        .map(|p| match (&r.summarizer, p.policy) {
            (Some(s), PolicyKind::Summarize) => format!(
                "summarize {} iterations with {s} (−{})",
                p.items, p.tokens_saved
            ),
            _ => format!("{} {} (−{})", p.policy, p.items, p.tokens_saved),
        })
        .collect();
    eprintln!(
        "abridge: {label}: {} → {} tokens{}{}",
        r.tokens_before,
        r.tokens_after,
        r.target
            .map(|t| format!(" (target {t})"))
            .unwrap_or_default(),
        if steps.is_empty() {
            ", unchanged".to_owned()
        } else {
            format!(": {}", steps.join(", "))
        }
    );
    if let Some(path) = &args.report {
        let report = json!({"file": label, "limits": limits, "report": r});
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    let family = args.to.unwrap_or(conv.family);
    match &args.output {
        Some(path) => {
            let mut file = std::fs::File::create(path)
                .with_context(|| format!("{}: cannot create", path.display()))?;
            write_body(
                &label,
                &outcome.conversation,
                family,
                args.compact_json,
                &mut file,
            )?;
        }
        None => write_body(
            &label,
            &outcome.conversation,
            family,
            args.compact_json,
            out,
        )?,
    }
    Ok(ExitCode::SUCCESS)
}
