//! `abridge savings`: what a proxy's requests added up to, from its store —
//! tokens the clients sent and tokens forwarded, the providers' reports, and
//! dollars with abridge and (estimated) without, per day, tenant or model.

use std::io::Write;
use std::process::ExitCode;

use abridge_store::{GroupBy, Totals};
use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::snapshots::StoreArgs;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum By {
    Day,
    Tenant,
    Model,
    All,
}

#[derive(Debug, Args)]
pub(crate) struct SavingsArgs {
    /// A line per day, tenant (its hashed id), model, or all three.
    #[arg(long, value_enum, default_value = "day")]
    by: By,
    /// Most lines, newest day first.
    #[arg(long, default_value_t = 30, value_name = "N")]
    limit: usize,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

pub(crate) fn run(args: &SavingsArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let by = match args.by {
        By::Day => GroupBy::Day,
        By::Tenant => GroupBy::Tenant,
        By::Model => GroupBy::Model,
        By::All => GroupBy::All,
    };
    let lines = args.store.read()?.totals(by, args.limit)?;
    if args.json {
        for l in &lines {
            serde_json::to_writer(&mut *out, l)?;
            writeln!(out)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if lines.is_empty() {
        writeln!(
            out,
            "no requests recorded: a proxy (abridge serve or abridge run) with this store records them"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:<44} {:>8} {:>9} {:>14} {:>14} {:>7} {:>10} {:>10} {:>10} {:>5}",
        "group",
        "requests",
        "rewritten",
        "client tok",
        "forwarded tok",
        "saved",
        "$ with",
        "$ without",
        "$ saved",
        "over"
    )?;
    let mut all = Totals::default();
    for l in &lines {
        all.merge(l);
        row(out, &key(l), l)?;
    }
    if lines.len() > 1 {
        row(out, "total (lines shown)", &all)?;
    }
    writeln!(
        out,
        "\n$ with and $ without compare the requests priced both ways (a known model, a usage report, within its window); \
         \"over\" counts requests the client sent over the model's window, which it would not have answered"
    )?;
    Ok(ExitCode::SUCCESS)
}

fn key(l: &Totals) -> String {
    let parts: Vec<&str> = [l.day.as_str(), l.tenant.as_str(), l.model.as_str()]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    match parts.is_empty() {
        true => "(no model)".to_owned(),
        false => parts.join(" "),
    }
}

fn row(out: &mut dyn Write, key: &str, l: &Totals) -> Result<()> {
    let share = match l.client_tokens {
        0 => 0.0,
        n => 100.0 * l.tokens_saved() as f64 / n as f64,
    };
    writeln!(
        out,
        "{key:<44} {:>8} {:>9} {:>14} {:>14} {:>6.1}% {:>10.4} {:>10.4} {:>10.4} {:>5}",
        l.requests,
        l.compacted,
        l.client_tokens,
        l.forwarded_tokens,
        share,
        l.cost_compared,
        l.cost_without,
        l.saved(),
        l.over_window
    )?;
    Ok(())
}
