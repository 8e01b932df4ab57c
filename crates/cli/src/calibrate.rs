//! `abridge calibrate`: how close abridge's counts are to what providers
//! billed, on recorded runs that carry usage (Claude Code sessions,
//! mini-swe-agent trajectories), per tokenizer.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use abridge_model::Conversation;
use abridge_tokens::calibrate::{Accuracy, Growth, accuracy, growth};
use abridge_tokens::{Registry, TokenCounter, TokenizerKind};
use anyhow::Result;
use clap::Args;
use serde::Serialize;

use crate::input::{self, InputArgs};

/// Arguments of `abridge calibrate`.
#[derive(Debug, Args)]
pub(crate) struct CalibrateArgs {
    /// Recorded runs, or folders searched for `.json` / `.jsonl` files.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// One JSON object per family and tokenizer, one per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    input: InputArgs,
}

/// The accuracy of one tokenizer on one family of runs.
#[derive(Debug, Serialize)]
struct Row {
    family: String,
    models: Vec<String>,
    tokenizer: TokenizerKind,
    /// The tokenizer abridge picks for these models.
    chosen: bool,
    #[serde(flatten)]
    accuracy: Accuracy,
}

pub(crate) fn run(args: &CalibrateArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let registry = Registry::new();
    // Runs with usage, by input format.
    let mut families: BTreeMap<String, Vec<Conversation>> = BTreeMap::new();
    for file in input::expand(&args.paths)? {
        let shown = file.display().to_string();
        // A folder may hold other JSON: say so and go on.
        let convs = match input::all(&shown, &args.input) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("abridge: skipped {shown}: {e:#}");
                continue;
            }
        };
        for (_, conv) in convs {
            if conv.messages.iter().any(|m| m.meta.usage.is_some()) {
                families
                    .entry(conv.format.as_str().to_owned())
                    .or_default()
                    .push(conv);
            }
        }
    }
    let mut rows = Vec::new();
    for (family, convs) in &families {
        let mut models: Vec<String> = convs.iter().filter_map(|c| c.model.clone()).collect();
        models.sort();
        models.dedup();
        let chosen = registry.tokenizer_for(models.first().map(String::as_str));
        let mut kinds = vec![TokenizerKind::Estimate, TokenizerKind::O200kBase];
        if !kinds.contains(&chosen) {
            kinds.push(chosen);
        }
        for kind in kinds {
            let runs: Vec<Vec<Growth>> = convs
                .iter()
                .map(|c| growth(c, &mut TokenCounter::new(kind)))
                .collect();
            rows.push(Row {
                family: family.clone(),
                models: models.clone(),
                tokenizer: kind,
                chosen: kind == chosen,
                accuracy: accuracy(&runs),
            });
        }
    }
    if args.json {
        for r in &rows {
            serde_json::to_writer(&mut *out, r)?;
            writeln!(out)?;
        }
    } else {
        print_table(&rows, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(rows: &[Row], out: &mut dyn Write) -> Result<()> {
    if rows.is_empty() {
        writeln!(out, "no run with provider-reported usage found")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<16} {:<19} {:>6}   {:>10} {:>10}   {:>11} {:>10}",
        "family", "tokenizer", "steps", "step |err|", "under>10%", "total |err|", "under>10%"
    )?;
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    for r in rows {
        let a = &r.accuracy;
        let mark = if r.chosen { "*" } else { " " };
        writeln!(
            out,
            "{:<16} {:<19} {:>6}   {:>10} {:>10}   {:>11} {:>10}",
            r.family,
            format!("{}{mark}", r.tokenizer),
            a.steps,
            pct(a.median_abs_error),
            pct(a.under_10),
            pct(a.cumulative_median_abs_error),
            pct(a.cumulative_under_10)
        )?;
    }
    writeln!(
        out,
        "\n* the tokenizer abridge uses for these models. A step is the prompt growth between two\n  calls; a total is the growth from a run's first call (what a window threshold sees)."
    )?;
    Ok(())
}
