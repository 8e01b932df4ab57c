//! `abridge compact`: rewrite a conversation to fit a budget.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use abridge::model::{Conversation, Wire};
use abridge::{Compactor, Error as EngineError, Limits, PolicyKind, Report};
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
    /// Write the body here instead of stdout (`-`: stdout, as for input).
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Format of the output: openai, anthropic or ai-sdk (default: the input's).
    #[arg(long, value_name = "FORMAT")]
    to: Option<Wire>,
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
    let mut config = args.engine.config(&conv)?;
    let store = args.store.open(&label, config.store);
    // Without a store nothing keeps the originals past this process: the
    // output must not name handles, nor declare a tool, that lead nowhere.
    config.recall.enabled &= store.is_some();
    let mut compactor = Compactor::new(config)?;
    let specs = compactor.config().summarizer_specs(conv.family, None);
    compactor.set_summarizers(abridge_llm::cascade(&specs, None));
    if let Some(store) = store {
        compactor.set_store(store);
    }
    if args.events {
        compactor.subscribe(|e| {
            if let Ok(line) = serde_json::to_string(e) {
                eprintln!("{line}");
            }
        });
    }
    let limits = *compactor.limits();
    let tokens_before = compactor.count(&conv);
    let to = args.to.unwrap_or(Wire::of(conv.format));
    let outcome = match compactor.compact(&conv) {
        Ok(o) => o,
        Err(e @ EngineError::CannotShrink { .. }) => {
            eprintln!("abridge: {label}: {e}");
            let error = e.to_string();
            // What a proxy sends in its place: the smallest valid history
            // the engine reached, when it reached one, and its report.
            let (smallest, report) = match e {
                EngineError::CannotShrink {
                    smallest, report, ..
                } => (smallest, report),
                _ => (None, None),
            };
            if let (Some(s), Some(r)) = (&smallest, &report) {
                eprintln!("abridge: {label}: writing the smallest history it reached");
                tell(&label, r, &limits, &args.store);
                write_out(args, &label, s, to, out)?;
            }
            if let Some(path) = &args.report {
                let report = json!({"file": label, "error": error,
                    "tokens_before": tokens_before, "limits": limits, "report": report});
                write_report(path, &report)?;
            }
            return Ok(ExitCode::from(CANNOT_SHRINK));
        }
        Err(e) => return Err(e).with_context(|| format!("{label}: cannot compact")),
    };
    tell(&label, &outcome.report, &limits, &args.store);
    // The body first: a report that cannot be written must not cost it.
    write_out(args, &label, &outcome.conversation, to, out)?;
    if let Some(path) = &args.report {
        let report = json!({"file": label, "limits": limits, "report": outcome.report});
        write_report(path, &report)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `conv` as a `to` request body to `--output`, or to `out`.
fn write_out(
    args: &CompactArgs,
    label: &str,
    conv: &Conversation,
    to: Wire,
    out: &mut dyn Write,
) -> Result<()> {
    match args.output.as_ref().filter(|p| p.as_os_str() != "-") {
        Some(path) => {
            let mut file = std::fs::File::create(path)
                .with_context(|| format!("{}: cannot create", path.display()))?;
            write_body(label, conv, to, args.compact_json, &mut file)
                .with_context(|| format!("{}: cannot write", path.display()))
        }
        None => write_body(label, conv, to, args.compact_json, out),
    }
}

fn write_report(path: &Path, report: &serde_json::Value) -> Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("{}: cannot write the report", path.display()))
}

/// What happened, on stderr: the snapshot (with the commands to see it),
/// failed summarizers, and one line of figures.
fn tell(label: &str, r: &Report, limits: &Limits, store: &StoreArgs) {
    if let Some(id) = &r.snapshot {
        let at = store.flag();
        eprintln!(
            "abridge: {label}: snapshot {id} stored (abridge show {id}{at}, abridge restore {id}{at})"
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
    if let Some(u) = r.summarizer_usage() {
        eprintln!(
            "abridge: {label}: the summarizers' providers reported {} prompt and {} completion tokens",
            u.prompt_tokens(),
            u.output_tokens
        );
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
    let target = r
        .target
        .map(|t| format!("; target {t}"))
        .unwrap_or_default();
    let what = if steps.is_empty() {
        ", unchanged".to_owned()
    } else {
        format!(": {}", steps.join(", "))
    };
    eprintln!(
        "abridge: {label}: {} → {} tokens ({}{target}){what}",
        r.tokens_before, r.tokens_after, limits.tokenizer
    );
}
