//! `abridge eval`: compaction quality on real transcripts, strategies side by side.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use abridge::summarize::Summarizer;
use abridge_eval::{
    CutKind, CutReport, EvalOptions, SourceFigures, Strategy, by_source, evaluate, html,
};
use abridge_llm::LlmSummarizer;
use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::engine_args::EngineArgs;
use crate::input::{self, InputArgs};

/// Arguments of `abridge eval`.
#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// Transcripts, or folders searched for `.json` / `.jsonl` files.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Budget as a share of the tokens before each cut.
    #[arg(long, default_value_t = 0.1, value_name = "SHARE")]
    budget: f64,
    /// Print every cut and strategy as JSON (one array).
    #[arg(long)]
    json: bool,
    /// Print the figures per source (the folder of each transcript): each
    /// strategy's mean, spread and lowest cut, beside the mean over the
    /// other sources; JSON with `--json`.
    #[arg(long)]
    by_source: bool,
    /// Run every cut at budgets of 5% to 60% of its tokens, and print per
    /// source and budget the default pipeline's and the offline briefing's
    /// recall, the share of the budget they used, the cuts they left under
    /// 0.9 of it, the cuts whose recall fell as the budget rose, and the
    /// share of lost names a recall search finds; JSON with `--json`.
    #[arg(long, conflicts_with_all = ["budget", "by_source", "html", "probes"])]
    sweep: bool,
    /// Also write a self-contained HTML report here.
    #[arg(long, value_name = "REPORT.html")]
    html: Option<PathBuf>,
    /// Ask probe questions answered from each compacted history and graded
    /// against the full one, with the first `[[summarizers]]` model.
    #[arg(long)]
    probes: bool,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    input: InputArgs,
}

pub(crate) fn run(args: &EvalArgs, out: &mut dyn Write) -> Result<ExitCode> {
    if !(args.budget > 0.0 && args.budget <= 1.0) {
        anyhow::bail!("--budget must be a share in (0, 1], got {}", args.budget);
    }
    let mut config = abridge::Config::default();
    if let Some(path) = &args.engine.config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        config = abridge::Config::from_toml(&text).with_context(|| path.display().to_string())?;
    }
    args.engine.apply(&mut config)?;
    let opts = EvalOptions {
        budget: args.budget,
        config: config.clone(),
        ..EvalOptions::default()
    };
    let llm = || -> Vec<Box<dyn Summarizer>> { abridge_llm::cascade(&config.summarizers, None) };
    let judge = match (args.probes, config.summarizers.first()) {
        (false, _) => None,
        (true, Some(spec)) => Some(Judge(LlmSummarizer::from_spec(spec))),
        (true, None) => anyhow::bail!(
            "--probes needs a model: declare [[summarizers]] in --config or give --summarizer openai:MODEL"
        ),
    };
    let files = input::expand(&args.paths)?;
    let progress = ProgressBar::new(files.len() as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} files {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if args.sweep {
        let runs: Vec<(f64, Vec<CutReport>)> = abridge_eval::SWEEP
            .iter()
            .map(|&budget| {
                let opts = EvalOptions {
                    budget,
                    ..opts.clone()
                };
                progress.set_message(format!("budget {:.0}%", budget * 100.0));
                (
                    budget,
                    evaluate_files(&files, &args.input, &opts, &llm, None, &progress),
                )
            })
            .collect();
        progress.finish_and_clear();
        let rows = abridge_eval::sweep(&runs, &[Strategy::Pipeline, Strategy::Offline]);
        match args.json {
            true => crate::write_json(out, &rows, false)?,
            false => print_sweep(&rows, out)?,
        }
        return Ok(ExitCode::SUCCESS);
    }
    let judge = judge.as_ref().map(|j| j as &dyn abridge_eval::Llm);
    let reports = evaluate_files(&files, &args.input, &opts, &llm, judge, &progress);
    progress.finish_and_clear();
    if let Some(path) = &args.html {
        std::fs::write(path, html(&reports))
            .with_context(|| format!("{}: cannot write the report", path.display()))?;
    }
    match (args.by_source, args.json) {
        (true, true) => crate::write_json(out, &by_source(&reports), false)?,
        (true, false) => print_sources(&by_source(&reports), out)?,
        (false, true) => crate::write_json(out, &reports, false)?,
        (false, false) => print_table(&reports, out)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Every cut of every transcript of `files` with every strategy.
fn evaluate_files(
    files: &[PathBuf],
    input_args: &InputArgs,
    opts: &EvalOptions,
    llm: &dyn Fn() -> Vec<Box<dyn Summarizer>>,
    judge: Option<&dyn abridge_eval::Llm>,
    progress: &ProgressBar,
) -> Vec<CutReport> {
    progress.set_length(files.len() as u64);
    progress.set_position(0);
    let mut reports = Vec::new();
    for file in files {
        let shown = file.display().to_string();
        progress.set_message(shown.clone());
        match input::all(&shown, input_args) {
            Ok(convs) => {
                for (label, conv) in convs {
                    reports.extend(evaluate(&label, &conv, opts, llm, judge));
                }
            }
            Err(e) => progress.println(format!("abridge: skipped {shown}: {e:#}")),
        }
        progress.inc(1);
    }
    reports
}

/// The sweep: a block per source and kind of cut, a line per strategy and
/// budget.
fn print_sweep(rows: &[abridge_eval::SweepRow], out: &mut dyn Write) -> Result<()> {
    let mut last = None;
    for r in rows {
        let key = (r.source.as_str(), r.cuts, r.strategy);
        if last != Some(key) {
            writeln!(
                out,
                "\n{} — {} cuts — {}",
                r.source,
                r.cuts,
                r.strategy.label()
            )?;
            writeln!(
                out,
                "  budget  cuts  recall  used  under 0.9  fell  findable"
            )?;
            last = Some(key);
        }
        let findable = r.findable.map_or("—".to_owned(), |f| format!("{f:.3}"));
        writeln!(
            out,
            "  {:>5.0}%  {:>4}  {:.3}  {:>4.2}  {:>4}/{:<4}  {:>4}  {findable}",
            r.budget * 100.0,
            r.n,
            r.recall,
            r.used,
            r.under,
            r.reachable,
            r.fell
        )?;
    }
    Ok(())
}

/// The probe model: an LLM summarizer's client with the probes' prompts.
struct Judge(LlmSummarizer);

impl abridge_eval::Llm for Judge {
    fn complete(&self, system: &str, user: &str) -> Result<String, String> {
        self.0
            .complete_blocking(system, user, 2_000)
            .map_err(|e| e.to_string())
    }
}

/// The figures per source: a block per source and kind of cut, a row per
/// strategy (mean ± standard deviation, lowest cut, and the mean over the
/// other sources).
fn print_sources(sources: &[SourceFigures], out: &mut dyn Write) -> Result<()> {
    let f = |s: Option<abridge_eval::Spread>| match s {
        Some(s) => format!("{:.2} ±{:.2} ≥{:.2}", s.mean, s.sd, s.min),
        None => "-".to_owned(),
    };
    let o = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
    for src in sources {
        let at = match src.cuts.as_str() {
            "recorded" => "where the agent compacted",
            _ => "at 50% and 75% of the turns",
        };
        writeln!(
            out,
            "{} — {} transcript(s), cut {at}",
            src.source, src.transcripts
        )?;
        writeln!(
            out,
            "  {:<26} {:>5} {:>18} {:>7} {:>18} {:>7} {:>6} {:>5}",
            "strategy", "cuts", "recall", "others", "precision", "others", "kept", "over"
        )?;
        for s in &src.strategies {
            writeln!(
                out,
                "  {:<26} {:>5} {:>18} {:>7} {:>18} {:>7} {:>6} {:>5}",
                s.strategy.label(),
                s.cuts,
                f(s.recall),
                o(s.others_recall),
                f(s.precision),
                o(s.others_precision),
                s.kept.map_or("-".to_owned(), |k| format!("{:.2}", k.mean)),
                s.over_budget,
            )?;
            let m = s.missed_from;
            if m.total() > 0 {
                let share = |n: usize| format!("{:.0}%", 100.0 * n as f64 / m.total() as f64);
                writeln!(
                    out,
                    "    lost {} later-used identifier(s): {} only in tool results, {} the agent's, {} the user's, {} the head's; recall had nothing said been lost {}",
                    m.total(),
                    share(m.results),
                    share(m.agent),
                    share(m.user),
                    share(m.head),
                    s.recall_if_said_kept
                        .map_or("-".to_owned(), |r| format!("{:.2}", r.mean)),
                )?;
            }
            if !s.sections.is_empty() {
                let parts: Vec<String> = s
                    .sections
                    .iter()
                    .map(|x| {
                        let p = x.used as f64 / x.named.max(1) as f64;
                        format!("{} {}/{} ({p:.2})", x.section, x.used, x.named)
                    })
                    .collect();
                writeln!(
                    out,
                    "    by section (used again/named): {}",
                    parts.join(" · ")
                )?;
            }
        }
    }
    Ok(())
}

fn print_table(reports: &[CutReport], out: &mut dyn Write) -> Result<()> {
    let pct = |v: f64| format!("{:.1}%", v * 100.0);
    for r in reports {
        let cut = match r.cut {
            CutKind::Recorded => "where the agent compacted".to_owned(),
            CutKind::Fraction { percent } => format!("at {percent}%"),
        };
        writeln!(
            out,
            "{} — {cut}: {} tokens before, budget {}, {} identifiers referred to later",
            r.source, r.tokens_before, r.budget_tokens, r.later_used
        )?;
        if let Some(e) = &r.probe_error {
            writeln!(out, "  probes: none ({e})")?;
        }
        writeln!(
            out,
            "  {:<26} {:>9} {:>7} {:>6} {:>8} {:>10} {:>12} {:>10} {:>9} {:>6}",
            "strategy",
            "tokens",
            "kept",
            "valid",
            "recall",
            "with code",
            "recoverable",
            "precision",
            "briefing",
            "index"
        )?;
        for x in &r.results {
            if let Some(e) = &x.error {
                writeln!(out, "  {:<26} failed: {e}", x.strategy.label())?;
                continue;
            }
            writeln!(
                out,
                "  {:<26} {:>9} {:>7} {:>6} {:>8} {:>10} {:>12} {:>10} {:>9} {:>6}{}",
                x.strategy.label(),
                x.tokens,
                pct(x.kept),
                if x.valid { "yes" } else { "no" },
                pct(x.recall),
                pct(x.recall_with_code),
                x.recoverable.map_or("—".into(), pct),
                x.precision.map_or("—".into(), pct),
                x.briefing_tokens.map_or("—".into(), |t| t.to_string()),
                index_share(x).map_or("—".into(), pct),
                x.probe_score
                    .map_or(String::new(), |p| format!("  probes {}", pct(p)))
                    + if x.over_budget.is_some() {
                        "  over the budget: its smallest"
                    } else {
                        ""
                    }
            )?;
        }
        writeln!(out)?;
    }
    print_means(reports, out)
}

/// Each strategy's means over every cut it did not fail.
fn print_means(reports: &[CutReport], out: &mut dyn Write) -> Result<()> {
    let pct = |v: f64| format!("{:.1}%", v * 100.0);
    writeln!(out, "mean over {} cut(s):", reports.len())?;
    for s in Strategy::ALL {
        let rs: Vec<_> = reports
            .iter()
            .flat_map(|r| &r.results)
            .filter(|x| x.strategy == s && x.error.is_none())
            .collect();
        if rs.is_empty() {
            continue;
        }
        let mean = |f: &dyn Fn(&&abridge_eval::StrategyResult) -> Option<f64>| {
            let v: Vec<f64> = rs.iter().filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let over = rs.iter().filter(|x| x.over_budget.is_some()).count();
        writeln!(
            out,
            "  {:<26} kept {:>6}  recall {:>6}  with code {:>6}  recoverable {:>6} (lowest {:>6})  precision {:>6}  index {:>6} (highest {:>6}){}",
            s.label(),
            mean(&|x| Some(x.kept)).map_or("—".into(), pct),
            mean(&|x| Some(x.recall)).map_or("—".into(), pct),
            mean(&|x| Some(x.recall_with_code)).map_or("—".into(), pct),
            mean(&|x| x.recoverable).map_or("—".into(), pct),
            extreme(&rs, |x| x.recoverable, f64::min).map_or("—".into(), pct),
            mean(&|x| x.precision).map_or("—".into(), pct),
            mean(&|x| index_share(x)).map_or("—".into(), pct),
            extreme(&rs, index_share, f64::max).map_or("—".into(), pct),
            match over {
                0 => String::new(),
                n => format!("  ({n} of {} over the budget)", rs.len()),
            }
        )?;
    }
    Ok(())
}

/// The index's share of the briefing's tokens.
fn index_share(x: &abridge_eval::StrategyResult) -> Option<f64> {
    let (index, briefing) = (x.index_tokens?, x.briefing_tokens?);
    Some(index as f64 / briefing.max(1) as f64)
}

/// The lowest (or highest) of a figure over the results that have it.
fn extreme(
    rs: &[&abridge_eval::StrategyResult],
    f: impl Fn(&abridge_eval::StrategyResult) -> Option<f64>,
    pick: fn(f64, f64) -> f64,
) -> Option<f64> {
    rs.iter().filter_map(|x| f(x)).reduce(pick)
}
