//! `abridge simulate`: replay a run turn by turn, as a live agent would see it.
//!
//! At each assistant message the agent is about to call the model: the
//! history so far (with earlier compactions carried forward, as the agent's
//! own memory would be) goes through the engine, and what it returns is what
//! the model would be sent. The same run without compaction is the baseline.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use abridge::synth::{self, Spec};
use abridge::{Calibration, Compactor, History};
use abridge_model::{Conversation, Family, Role, head_len};
use abridge_tokens::{Calibrated, Counted, PRICES_AS_OF, Price, Registry};
use anyhow::{Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::json;

use crate::engine_args::EngineArgs;
use crate::input::{self, InputArgs};
use crate::stats::thousands;

/// Arguments of `abridge simulate`.
#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// Recorded run (`FILE#N` picks a run of a multi-run file); or use --synthetic.
    #[arg(required_unless_present = "synthetic")]
    file: Option<String>,
    /// Simulate a generated web-agent run of N iterations instead of a file.
    #[arg(long, value_name = "N", conflicts_with = "file")]
    synthetic: Option<usize>,
    /// Wire format of the synthetic run: openai or anthropic.
    #[arg(long, value_name = "FAMILY", default_value = "openai")]
    family: Family,
    /// Compact when the history exceeds N tokens (trigger.max_tokens).
    #[arg(long, value_name = "N")]
    trigger_tokens: Option<u64>,
    /// Print the summary and the per-turn series as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    input: InputArgs,
}

/// One model call of the replayed run.
#[derive(Debug, Clone, Serialize)]
struct Turn {
    /// 1-based turn number.
    turn: usize,
    /// Index of the assistant message in the recorded run.
    index: usize,
    /// Context tokens without compaction.
    baseline: Counted,
    /// Context tokens sent with abridge.
    tokens: Counted,
    /// Of those, the prefix unchanged since the previous turn (a cache read).
    cached: Counted,
    /// Of the baseline's, the previous turn's whole prompt.
    baseline_cached: Counted,
    /// A compaction happened this turn.
    compacted: bool,
    /// The engine could not compact (e.g. cannot shrink); the run went on.
    failed: bool,
    /// Engine time this turn: counting the new messages and evaluating.
    engine_us: f64,
}

pub(crate) fn run(args: &SimulateArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let (label, conv) = match (&args.file, args.synthetic) {
        (_, Some(n)) => {
            let spec = Spec {
                iterations: n,
                family: args.family,
                ..Spec::default()
            };
            (format!("synthetic run of {n} iterations"), synth::run(spec))
        }
        (Some(file), None) => input::one(file, &args.input)?,
        (None, None) => bail!("give a FILE or --synthetic N"),
    };
    let mut config = args.engine.config(&conv)?;
    if let Some(t) = args.trigger_tokens {
        config.trigger.max_tokens = Some(t);
    }
    let mut compactor = Compactor::new(config)?;
    compactor.set_summarizers(abridge_llm::cascade(&compactor.config().summarizers, None));
    let limits = *compactor.limits();
    let mut registry = Registry::new();
    registry.extend(compactor.config().models.clone());
    let model = compactor.config().model.clone();
    let price = model
        .as_deref()
        .and_then(|m| registry.lookup(m))
        .and_then(|i| i.price);
    let recall_tool = recall_tool_tokens(&mut compactor, &conv);
    let turns = replay(&conv, compactor);
    let mut summary = summarize(&turns, price);
    summary.recall_tool = recall_tool.map(|r| RecallDeclaration::priced(&turns, r, price));
    if args.json {
        let body = json!({"file": label, "model": conv.model, "limits": limits, "summary": summary, "turns": turns});
        crate::write_json(out, &body, false)?;
    } else {
        print_table(&label, &conv, &limits, &summary, &turns, out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Tokens of the recall tool's declaration, when a proxy would declare it
/// for this run: recall is on and the agent has tools of its own (declared,
/// or called where a log does not record the declarations).
fn recall_tool_tokens(compactor: &mut Compactor, conv: &Conversation) -> Option<Counted> {
    let declared = conv.tools.as_ref().is_some_and(|t| !t.is_empty());
    (declared || conv.messages.iter().any(|m| m.has_tool_calls())).then_some(())?;
    let tool = compactor.engine().recall_tool()?;
    let mut alone = conv.clone_envelope();
    alone.tools = Some(vec![tool.to_tool()]);
    Some(compactor.tool_tokens(&alone))
}

fn replay(conv: &Conversation, mut compactor: Compactor) -> Vec<Turn> {
    let head = head_len(&conv.messages);
    let calls = conv.messages[head..]
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    let progress = ProgressBar::new(calls as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} turns {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let tools = compactor.count(&conv.clone_envelope());
    let mut baseline = compactor
        .message_tokens(&conv.messages[..head])
        .iter()
        .sum::<Counted>()
        + tools;
    let mut start = conv.clone_envelope();
    start.messages = conv.messages[..head].to_vec();
    let mut session = History::new(compactor, start);
    let mut turns: Vec<Turn> = Vec::with_capacity(calls);
    let mut pending = Duration::ZERO;
    let mut sent: Vec<abridge_model::Message> = Vec::new();
    for (offset, m) in conv.messages[head..].iter().enumerate() {
        if m.role == Role::Assistant {
            let t = Instant::now();
            let result = session.turn(None);
            let spent = pending + t.elapsed();
            pending = Duration::ZERO;
            let (compacted, failed) = match &result {
                Ok(r) => (r.compacted(), false),
                Err(_) => (false, true),
            };
            let cached = cached_prefix(&session, &mut sent, tools);
            turns.push(Turn {
                turn: turns.len() + 1,
                index: head + offset,
                baseline,
                tokens: session.tokens(),
                cached,
                baseline_cached: turns.last().map_or(Counted::ZERO, |p| p.baseline),
                compacted,
                failed,
                engine_us: spent.as_secs_f64() * 1e6,
            });
            progress.inc(1);
        }
        let t = Instant::now();
        baseline += session.push(m.clone());
        pending += t.elapsed();
    }
    progress.finish_and_clear();
    turns
}

/// Tokens of the prompt the session sends now that a provider's prefix
/// cache holds from the previous turn: everything up to the first message
/// that changed. `sent` is the previous prompt, replaced by this one.
fn cached_prefix(
    session: &History,
    sent: &mut Vec<abridge_model::Message>,
    tools: Counted,
) -> Counted {
    let now = &session.conversation().messages;
    let same = sent.iter().zip(now).take_while(|(a, b)| a == b).count();
    sent.clone_from(now);
    if same == 0 {
        return Counted::ZERO;
    }
    tools + session.message_tokens()[..same].iter().sum::<Counted>()
}

/// Totals and ratios of a replay.
#[derive(Debug, Serialize)]
struct Summary {
    turns: usize,
    compactions: usize,
    failures: usize,
    peak_baseline: Counted,
    peak: Counted,
    final_baseline: Counted,
    final_tokens: Counted,
    billed_baseline: Counted,
    billed: Counted,
    /// Turns whose prompt starts with the previous turn's whole prompt.
    prefix_stable: f64,
    /// Share of prompt tokens read from the provider's cache.
    cache_hit_baseline: f64,
    cache_hit: f64,
    /// Dollars for the prompts under the provider's caching rules, when
    /// the model's prices are known.
    cost: Option<Cost>,
    engine_us_turn_10: Option<f64>,
    engine_us_last: Option<f64>,
    engine_us_median: Option<f64>,
    consecutive_compactions: usize,
    /// What declaring the recall tool costs, one way and the other.
    recall_tool: Option<RecallDeclaration>,
}

/// The recall tool's declaration priced two ways: from the first compaction
/// on (as the proxy declares it: its arrival changes the tools, so that
/// turn reads nothing from the cache) or from the first request on (every
/// prompt is longer, and no turn loses the cache for it).
#[derive(Debug, Serialize)]
struct RecallDeclaration {
    tool_tokens: Counted,
    from_first_compaction: Declared,
    from_first_request: Declared,
}

/// A replay's prompts with the declaration added from one turn on.
#[derive(Debug, Serialize)]
struct Declared {
    billed: Counted,
    cache_hit: f64,
    /// Dollars under the provider's caching rules, when prices are known.
    cost: Option<f64>,
}

impl RecallDeclaration {
    fn priced(turns: &[Turn], tool_tokens: Counted, price: Option<Price>) -> Self {
        let first_compaction = turns.iter().position(|t| t.compacted);
        RecallDeclaration {
            tool_tokens,
            from_first_compaction: Declared::declared_from(
                turns,
                tool_tokens,
                first_compaction,
                price,
            ),
            from_first_request: Declared::declared_from(turns, tool_tokens, Some(0), price),
        }
    }
}

impl Declared {
    /// `turns` with `tool` tokens declared from turn `from` (never: `None`).
    fn declared_from(
        turns: &[Turn],
        tool: Counted,
        from: Option<usize>,
        price: Option<Price>,
    ) -> Self {
        let sent: Vec<(Counted, Counted)> = turns
            .iter()
            .enumerate()
            .map(|(i, t)| match from.map(|f| i.cmp(&f)) {
                None | Some(std::cmp::Ordering::Less) => (t.cached, t.tokens),
                Some(std::cmp::Ordering::Equal) => (Counted::ZERO, t.tokens + tool),
                Some(std::cmp::Ordering::Greater) if t.cached == Counted::ZERO => {
                    (Counted::ZERO, t.tokens + tool)
                }
                Some(std::cmp::Ordering::Greater) => (t.cached + tool, t.tokens + tool),
            })
            .collect();
        let billed: Counted = sent.iter().map(|(_, total)| *total).sum();
        let cached: Counted = sent.iter().map(|(cached, _)| *cached).sum();
        let identity = Calibration::default();
        Declared {
            billed,
            cache_hit: cached.get() as f64 / billed.get().max(1) as f64,
            cost: price.map(|p| {
                sent.iter()
                    .map(|(c, t)| p.prompt_cost(identity.apply(*c), identity.apply(*t)))
                    .sum()
            }),
        }
    }
}

/// What the prompts cost, with and without compaction.
#[derive(Debug, Serialize)]
struct Cost {
    /// Date the prices were read.
    prices_as_of: &'static str,
    baseline: f64,
    abridge: f64,
}

fn summarize(turns: &[Turn], price: Option<Price>) -> Summary {
    let hit = |cached: Counted, total: Counted| cached.get() as f64 / total.get().max(1) as f64;
    let sum = |f: fn(&Turn) -> Counted| turns.iter().map(f).sum::<Counted>();
    let max = |f: fn(&Turn) -> Counted| turns.iter().map(f).max().unwrap_or_default();
    // A replay has no provider to calibrate against: its counts are priced
    // as counted.
    let identity = Calibration::default();
    let cost = |cached: Counted, total: Counted, p: &Price| {
        p.prompt_cost(identity.apply(cached), identity.apply(total))
    };
    let mut times: Vec<f64> = turns.iter().map(|t| t.engine_us).collect();
    times.sort_by(f64::total_cmp);
    let compactions = turns.iter().filter(|t| t.compacted).count();
    Summary {
        turns: turns.len(),
        compactions,
        failures: turns.iter().filter(|t| t.failed).count(),
        peak_baseline: max(|t| t.baseline),
        peak: max(|t| t.tokens),
        final_baseline: turns.last().map_or(Counted::ZERO, |t| t.baseline),
        final_tokens: turns.last().map_or(Counted::ZERO, |t| t.tokens),
        billed_baseline: turns.iter().map(|t| t.baseline).sum(),
        billed: turns.iter().map(|t| t.tokens).sum(),
        prefix_stable: if turns.len() > 1 {
            turns[1..].iter().filter(|t| !t.compacted).count() as f64 / (turns.len() - 1) as f64
        } else {
            1.0
        },
        cache_hit_baseline: hit(sum(|t| t.baseline_cached), sum(|t| t.baseline)),
        cache_hit: hit(sum(|t| t.cached), sum(|t| t.tokens)),
        cost: price.map(|p| Cost {
            prices_as_of: PRICES_AS_OF,
            baseline: turns
                .iter()
                .map(|t| cost(t.baseline_cached, t.baseline, &p))
                .sum(),
            abridge: turns.iter().map(|t| cost(t.cached, t.tokens, &p)).sum(),
        }),
        engine_us_turn_10: turns.get(9).map(|t| t.engine_us),
        engine_us_last: turns.last().map(|t| t.engine_us),
        engine_us_median: times.get(times.len() / 2).copied(),
        consecutive_compactions: turns
            .windows(2)
            .filter(|w| w[0].compacted && w[1].compacted)
            .count(),
        recall_tool: None,
    }
}

fn print_table(
    label: &str,
    conv: &Conversation,
    limits: &abridge::Limits,
    s: &Summary,
    turns: &[Turn],
    out: &mut dyn Write,
) -> Result<()> {
    let n = |v: u64| thousands(v);
    let opt = |v: Option<Calibrated>| v.map_or("none".to_owned(), |v| n(v.get()));
    writeln!(
        out,
        "{label}: {} turns, model {}",
        s.turns,
        conv.model.as_deref().unwrap_or("unknown")
    )?;
    writeln!(
        out,
        "window {}, trigger {}, target {}, tokenizer {}\n",
        opt(limits.window),
        opt(limits.trigger_tokens),
        opt(limits.target),
        limits.tokenizer
    )?;
    let ratio = |a: Counted, b: Counted| {
        if b == Counted::ZERO {
            String::new()
        } else {
            format!("{:.2}×", a.get() as f64 / b.get() as f64)
        }
    };
    writeln!(
        out,
        "{:<26}{:>14}{:>14}{:>9}",
        "", "baseline", "abridge", "ratio"
    )?;
    for (name, b, a) in [
        ("peak context tokens", s.peak_baseline, s.peak),
        ("final context tokens", s.final_baseline, s.final_tokens),
        ("input tokens billed", s.billed_baseline, s.billed),
    ] {
        writeln!(
            out,
            "{name:<26}{:>14}{:>14}{:>9}",
            n(b.get()),
            n(a.get()),
            ratio(a, b)
        )?;
    }
    writeln!(out, "{:<26}{:>14}{:>14}", "compactions", 0, s.compactions)?;
    print_cache_and_cost(conv, s, out)?;
    let us = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} µs"));
    writeln!(
        out,
        "{:<26}turn 10 {}, last turn {}, median {}",
        "engine time per turn",
        us(s.engine_us_turn_10),
        us(s.engine_us_last),
        us(s.engine_us_median)
    )?;
    if s.failures > 0 {
        writeln!(
            out,
            "{:<26}{} turn(s) could not shrink to the target",
            "failures", s.failures
        )?;
    }
    print_turns(turns, out)
}

/// About 25 turns of the run (the first, every compaction, evenly spaced
/// others): the tokens sent without and with abridge.
fn print_turns(turns: &[Turn], out: &mut dyn Write) -> Result<()> {
    writeln!(out, "\n{:>6}{:>14}{:>14}", "turn", "baseline", "abridge")?;
    let step = turns.len().div_ceil(25).max(1);
    for t in turns
        .iter()
        .filter(|t| t.turn % step == 0 || t.compacted || t.turn == 1)
    {
        let mark = if t.compacted { "  compacted" } else { "" };
        writeln!(
            out,
            "{:>6}{:>14}{:>14}{mark}",
            t.turn,
            thousands(t.baseline.get()),
            thousands(t.tokens.get())
        )?;
    }
    Ok(())
}

/// The caching and cost lines: how much of the prefix stayed, the cache
/// hit share, the prompt's cost with caching, and what declaring the recall
/// tool costs.
fn print_cache_and_cost(conv: &Conversation, s: &Summary, out: &mut dyn Write) -> Result<()> {
    let n = |v: u64| thousands(v);
    writeln!(
        out,
        "{:<26}{:>14}{:>13.1}%",
        "prefix unchanged",
        "100.0%",
        s.prefix_stable * 100.0
    )?;
    writeln!(
        out,
        "{:<26}{:>13.1}%{:>13.1}%",
        "cache hit share",
        s.cache_hit_baseline * 100.0,
        s.cache_hit * 100.0
    )?;
    match &s.cost {
        Some(c) => {
            writeln!(
                out,
                "{:<26}{:>14}{:>14}{:>9}",
                "prompt cost (cached)",
                format!("${:.2}", c.baseline),
                format!("${:.2}", c.abridge),
                format!("{:.2}×", c.abridge / c.baseline.max(1e-12))
            )?;
            if c.abridge > c.baseline {
                writeln!(
                    out,
                    "note: with prompt caching this configuration costs MORE than no compaction: each compaction rewrites the cached prefix; compact less often (a higher trigger or clear_at_least)"
                )?;
            }
        }
        None => writeln!(
            out,
            "{:<26}no prices known for {} (add price under [models] in the config)",
            "prompt cost",
            conv.model.as_deref().unwrap_or("this model")
        )?,
    }
    if let Some(r) = &s.recall_tool {
        let priced = |d: &Declared| match d.cost {
            Some(c) => format!("${c:.2}, cache hit {:.1}%", d.cache_hit * 100.0),
            None => format!(
                "{} billed, cache hit {:.1}%",
                n(d.billed.get()),
                d.cache_hit * 100.0
            ),
        };
        writeln!(
            out,
            "{:<26}{} tokens: declared at the first compaction {}; from the first request {}",
            "recall tool",
            n(r.tool_tokens.get()),
            priced(&r.from_first_compaction),
            priced(&r.from_first_request)
        )?;
    }
    Ok(())
}
