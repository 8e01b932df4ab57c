//! `abridge stats`: what a conversation is made of.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use abridge_model::{Conversation, Family, Violation, validate};
use abridge_tokens::{Registry, TokenCounter, TokenCounts, TokenizerKind};
use anyhow::Result;
use clap::Args;
use serde::Serialize;

use crate::input::{self, InputArgs};
use crate::{TokenizerChoice, parse_tokenizer};

/// Arguments of `abridge stats`.
#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    /// Files to read (`-` for stdin; `FILE#N` picks the N-th conversation).
    #[arg(required = true)]
    files: Vec<String>,
    /// One JSON object per conversation, one per line.
    #[arg(long)]
    json: bool,
    /// o200k_base, cl100k_base, claude_calibrated, open_calibrated,
    /// estimate, or auto (the model's own, as every command counts).
    #[arg(long, default_value = "auto", value_parser = parse_tokenizer)]
    tokenizer: TokenizerChoice,
    /// How many of the largest messages to list.
    #[arg(long, default_value_t = 5)]
    top: usize,
    #[command(flatten)]
    input: InputArgs,
}

/// Runs `stats`; exits 0 even for invalid conversations (use `validate` to gate).
pub(crate) fn run(args: &StatsArgs, out: &mut dyn Write) -> Result<ExitCode> {
    let registry = Registry::new();
    let mut failed = false;
    for file in &args.files {
        let convs = match input::all(file, &args.input) {
            Ok(c) => c,
            Err(e) => {
                // Report and go on with the other files.
                eprintln!("abridge: error: {e:#}");
                failed = true;
                continue;
            }
        };
        for (label, conv) in &convs {
            crate::note_model(&registry, conv.model.as_deref());
            let kind = match args.tokenizer {
                TokenizerChoice::Fixed(k) => k,
                TokenizerChoice::Auto => registry.tokenizer_for(conv.model.as_deref()),
            };
            let report = stats(label, conv, kind, &registry, args.top);
            if args.json {
                crate::write_json(out, &report, false)?;
            } else {
                print_human(&report, out)?;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// What `stats` reports of one conversation (`--json` prints it as is).
#[derive(Debug, Serialize)]
pub(crate) struct Stats {
    file: String,
    label: Option<String>,
    format: &'static str,
    family: Family,
    model: Option<String>,
    messages: usize,
    messages_by_role: BTreeMap<String, usize>,
    iterations: usize,
    tool_calls: usize,
    tool_results: usize,
    tokenizer: &'static str,
    /// Messages plus tool declarations.
    pub(crate) tokens: usize,
    tokens_by_kind: ByKind,
    tokens_by_role: BTreeMap<String, usize>,
    context_window: Option<u64>,
    window_fraction: Option<f64>,
    compactions_in_log: Vec<LogCompaction>,
    largest: Vec<Largest>,
    valid: bool,
    violations: Vec<Violation>,
}

/// Tokens by content kind, in the order printed.
#[derive(Debug, Serialize)]
struct ByKind {
    text: usize,
    tool_args: usize,
    tool_results: usize,
    images: usize,
    reasoning: usize,
    other: usize,
    overhead: usize,
    tool_definitions: usize,
}

impl ByKind {
    fn rows(&self) -> [(&'static str, usize); 8] {
        [
            ("text", self.text),
            ("tool args", self.tool_args),
            ("tool results", self.tool_results),
            ("images", self.images),
            ("reasoning", self.reasoning),
            ("other", self.other),
            ("overhead", self.overhead),
            ("tool definitions", self.tool_definitions),
        ]
    }
}

/// A compaction the agent itself recorded in its log.
#[derive(Debug, Serialize)]
struct LogCompaction {
    index: usize,
    pre_tokens: Option<u64>,
    trigger: Option<String>,
}

/// One of the largest messages.
#[derive(Debug, Serialize)]
struct Largest {
    /// Index in the body's `messages` array; `None` for a system prompt
    /// an Anthropic body carries outside it.
    index: Option<usize>,
    role: String,
    tokens: usize,
    kind: &'static str,
}

/// Computes the stats of one conversation.
pub(crate) fn stats(
    label: &str,
    conv: &Conversation,
    kind: TokenizerKind,
    registry: &Registry,
    top: usize,
) -> Stats {
    let mut counter = TokenCounter::new(kind);
    let per_message = counter.count_messages(&conv.messages);
    // Figures of a display: bare counts from here on.
    let tools_tokens = counter.count_tools(conv.tools.as_deref()).get() as usize;
    let mut by_kind = TokenCounts::default();
    let mut by_role: BTreeMap<String, usize> = BTreeMap::new();
    let mut roles: BTreeMap<String, usize> = BTreeMap::new();
    for (m, c) in conv.messages.iter().zip(&per_message) {
        by_kind.add(c);
        *by_role.entry(m.role.as_str().to_owned()).or_default() += c.total().get() as usize;
        *roles.entry(m.role.as_str().to_owned()).or_default() += 1;
    }
    let total = by_kind.total().get() as usize + tools_tokens;
    let largest = largest(conv, &per_message, top);
    let violations = validate(conv);
    let window = conv
        .model
        .as_deref()
        .and_then(|m| registry.lookup(m))
        .map(|i| i.context_window);
    Stats {
        file: label.to_owned(),
        label: conv.label.clone(),
        format: conv.format.as_str(),
        family: conv.family,
        model: conv.model.clone(),
        messages: conv.messages.len(),
        messages_by_role: roles,
        iterations: conv.iterations().len(),
        tool_calls: conv.messages.iter().map(|m| m.tool_calls().count()).sum(),
        tool_results: conv.messages.iter().map(|m| m.tool_results().count()).sum(),
        tokenizer: kind.as_str(),
        tokens: total,
        tokens_by_kind: ByKind {
            text: by_kind.text,
            tool_args: by_kind.tool_args,
            tool_results: by_kind.tool_results,
            images: by_kind.images,
            reasoning: by_kind.reasoning,
            other: by_kind.other,
            overhead: by_kind.overhead,
            tool_definitions: tools_tokens,
        },
        tokens_by_role: by_role,
        context_window: window,
        window_fraction: window.map(|w| (total as f64 / w as f64 * 1000.0).round() / 1000.0),
        compactions_in_log: conv
            .boundaries
            .iter()
            .map(|b| LogCompaction {
                index: conv.wire_index(b.index).unwrap_or(0),
                pre_tokens: b.pre_tokens,
                trigger: b.trigger.clone(),
            })
            .collect(),
        largest,
        valid: violations.is_empty(),
        violations,
    }
}

/// The `top` largest messages, largest first (the earlier of equals).
fn largest(conv: &Conversation, per_message: &[TokenCounts], top: usize) -> Vec<Largest> {
    let mut largest: Vec<(usize, usize)> = per_message
        .iter()
        .enumerate()
        .map(|(i, c)| (i, c.total().get() as usize))
        .collect();
    largest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    largest
        .iter()
        .take(top)
        .map(|&(i, tokens)| Largest {
            index: conv.wire_index(i),
            role: conv.messages[i].role.as_str().to_owned(),
            tokens,
            kind: main_kind(&per_message[i]),
        })
        .collect()
}

fn main_kind(c: &TokenCounts) -> &'static str {
    [
        (c.text, "text"),
        (c.tool_args, "tool args"),
        (c.tool_results, "tool results"),
        (c.images, "images"),
        (c.reasoning, "reasoning"),
        (c.other, "other"),
    ]
    .into_iter()
    .max_by_key(|(n, _)| *n)
    .map_or("text", |(_, k)| k)
}

/// What the history holds besides its counts: the agent's own
/// compactions, the largest messages, and whether it is valid.
fn print_findings(r: &Stats, out: &mut dyn Write) -> Result<()> {
    let n = |v: usize| thousands(v as u64);
    if !r.compactions_in_log.is_empty() {
        let at: Vec<String> = r
            .compactions_in_log
            .iter()
            .map(|b| format!("before message {}", b.index))
            .collect();
        writeln!(
            out,
            "  compacted   {} time(s) by the agent: {}",
            at.len(),
            at.join(", ")
        )?;
    }
    if !r.largest.is_empty() {
        let items: Vec<String> = r
            .largest
            .iter()
            .map(|l| {
                let at = l
                    .index
                    .map_or_else(|| "system".to_owned(), |i| format!("#{i}"));
                format!("{at} {} {} ({})", l.role, n(l.tokens), l.kind)
            })
            .collect();
        writeln!(out, "  largest     {}", items.join(", "))?;
    }
    if r.violations.is_empty() {
        writeln!(out, "  valid       yes")?;
    } else {
        writeln!(
            out,
            "  valid       no, {} violation(s):",
            r.violations.len()
        )?;
        for v in r.violations.iter().take(20) {
            writeln!(out, "    {v}")?;
        }
        if r.violations.len() > 20 {
            writeln!(out, "    … and {} more", r.violations.len() - 20)?;
        }
    }
    Ok(())
}

pub(crate) use abridge_model::text::thousands;

fn print_human(r: &Stats, out: &mut dyn Write) -> Result<()> {
    let n = |v: usize| thousands(v as u64);
    let list = |rows: &mut dyn Iterator<Item = (&str, usize)>| -> String {
        rows.filter(|(_, v)| *v != 0)
            .map(|(k, v)| format!("{k} {}", n(v)))
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let by_map = |m: &BTreeMap<String, usize>| list(&mut m.iter().map(|(k, v)| (k.as_str(), *v)));
    let label = r
        .label
        .as_ref()
        .map(|l| format!(" ({l})"))
        .unwrap_or_default();
    writeln!(out, "{}{label}", r.file)?;
    let model = r.model.as_deref().unwrap_or("unknown model");
    writeln!(
        out,
        "  format      {} ({} API), {model}",
        r.format, r.family
    )?;
    writeln!(
        out,
        "  messages    {}: {}",
        n(r.messages),
        by_map(&r.messages_by_role)
    )?;
    writeln!(
        out,
        "  iterations  {} · tool calls {} · tool results {}",
        n(r.iterations),
        n(r.tool_calls),
        n(r.tool_results)
    )?;
    let window = match r.context_window {
        Some(w) => format!(
            ", {:.1}% of a {} window",
            r.window_fraction.unwrap_or(0.0) * 100.0,
            thousands(w)
        ),
        None => String::new(),
    };
    writeln!(
        out,
        "  tokens      {} ({}){window}",
        n(r.tokens),
        r.tokenizer
    )?;
    writeln!(
        out,
        "    by kind   {}",
        list(&mut r.tokens_by_kind.rows().into_iter())
    )?;
    writeln!(out, "    by role   {}", by_map(&r.tokens_by_role))?;
    print_findings(r, out)?;
    writeln!(out)?;
    Ok(())
}
