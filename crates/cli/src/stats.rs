//! `abridge stats`: what a conversation is made of.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use abridge_model::{Conversation, validate};
use abridge_tokens::{Registry, TokenCounter, TokenCounts, TokenizerKind};
use anyhow::Result;
use clap::Args;
use serde_json::{Value, json};

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
    /// o200k_base, cl100k_base, estimate, or auto (the model's own).
    #[arg(long, default_value = "o200k_base", value_parser = parse_tokenizer)]
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
            let kind = match args.tokenizer {
                TokenizerChoice::Fixed(k) => k,
                TokenizerChoice::Auto => registry.tokenizer_for(conv.model.as_deref()),
            };
            let report = stats(label, conv, kind, &registry, args.top);
            if args.json {
                serde_json::to_writer(&mut *out, &report)?;
                writeln!(out)?;
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

/// Computes the stats of one conversation as a JSON object.
pub(crate) fn stats(
    label: &str,
    conv: &Conversation,
    kind: TokenizerKind,
    registry: &Registry,
    top: usize,
) -> Value {
    let mut counter = TokenCounter::new(kind);
    let per_message = counter.count_messages(&conv.messages);
    let tools_tokens = counter.count_tools(conv.tools.as_deref());
    let mut by_kind = TokenCounts::default();
    let mut by_role: BTreeMap<&str, usize> = BTreeMap::new();
    let mut roles: BTreeMap<&str, usize> = BTreeMap::new();
    for (m, c) in conv.messages.iter().zip(&per_message) {
        by_kind.add(c);
        *by_role.entry(m.role.as_str()).or_default() += c.total();
        *roles.entry(m.role.as_str()).or_default() += 1;
    }
    let total = by_kind.total() + tools_tokens;
    let mut largest: Vec<(usize, usize)> = per_message
        .iter()
        .enumerate()
        .map(|(i, c)| (i, c.total()))
        .collect();
    largest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let largest: Vec<Value> = largest
        .iter()
        .take(top)
        .map(|&(i, t)| {
            json!({
                "index": i,
                "role": conv.messages[i].role.as_str(),
                "tokens": t,
                "kind": main_kind(&per_message[i]),
            })
        })
        .collect();
    let violations = validate(conv);
    let window = conv
        .model
        .as_deref()
        .and_then(|m| registry.lookup(m))
        .map(|i| i.context_window);
    json!({
        "file": label,
        "label": conv.label,
        "format": conv.format.as_str(),
        "family": conv.family.as_str(),
        "model": conv.model,
        "messages": conv.messages.len(),
        "messages_by_role": roles,
        "iterations": conv.iterations().len(),
        "tool_calls": conv.messages.iter().map(|m| m.tool_calls().count()).sum::<usize>(),
        "tool_results": conv.messages.iter().map(|m| m.tool_results().count()).sum::<usize>(),
        "tokenizer": kind.as_str(),
        "tokens": total,
        "tokens_by_kind": {
            "text": by_kind.text,
            "tool_args": by_kind.tool_args,
            "tool_results": by_kind.tool_results,
            "images": by_kind.images,
            "reasoning": by_kind.reasoning,
            "other": by_kind.other,
            "overhead": by_kind.overhead,
            "tool_definitions": tools_tokens,
        },
        "tokens_by_role": by_role,
        "context_window": window,
        "window_fraction": window.map(|w| (total as f64 / w as f64 * 1000.0).round() / 1000.0),
        "compactions_in_log": conv.boundaries.iter().map(|b| json!({
            "index": b.index, "pre_tokens": b.pre_tokens, "trigger": b.trigger,
        })).collect::<Vec<_>>(),
        "largest": largest,
        "valid": violations.is_empty(),
        "violations": violations.iter().map(|v| v.to_json()).collect::<Vec<_>>(),
    })
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

/// `1234567` → `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn print_human(r: &Value, out: &mut dyn Write) -> Result<()> {
    let n = |v: &Value| thousands(v.as_u64().unwrap_or(0));
    let list = |v: &Value| -> String {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| v.as_u64() != Some(0))
                    .map(|(k, v)| format!("{} {}", k.replace('_', " "), n(v)))
                    .collect::<Vec<_>>()
                    .join(" · ")
            })
            .unwrap_or_default()
    };
    let label = r["label"]
        .as_str()
        .map(|l| format!(" ({l})"))
        .unwrap_or_default();
    writeln!(out, "{}{label}", r["file"].as_str().unwrap_or("?"))?;
    let model = r["model"].as_str().unwrap_or("unknown model");
    writeln!(
        out,
        "  format      {} ({} API), {model}",
        r["format"].as_str().unwrap_or("?"),
        r["family"].as_str().unwrap_or("?")
    )?;
    writeln!(
        out,
        "  messages    {}: {}",
        n(&r["messages"]),
        list(&r["messages_by_role"])
    )?;
    writeln!(
        out,
        "  iterations  {} · tool calls {} · tool results {}",
        n(&r["iterations"]),
        n(&r["tool_calls"]),
        n(&r["tool_results"])
    )?;
    let window = match r["context_window"].as_u64() {
        Some(w) => format!(
            ", {:.1}% of a {} window",
            r["window_fraction"].as_f64().unwrap_or(0.0) * 100.0,
            thousands(w)
        ),
        None => String::new(),
    };
    writeln!(
        out,
        "  tokens      {} ({}){window}",
        n(&r["tokens"]),
        r["tokenizer"].as_str().unwrap_or("?")
    )?;
    writeln!(out, "    by kind   {}", list(&r["tokens_by_kind"]))?;
    writeln!(out, "    by role   {}", list(&r["tokens_by_role"]))?;
    if let Some(b) = r["compactions_in_log"].as_array().filter(|b| !b.is_empty()) {
        let at: Vec<String> = b
            .iter()
            .map(|b| format!("before message {}", b["index"]))
            .collect();
        writeln!(
            out,
            "  compacted   {} time(s) by the agent: {}",
            b.len(),
            at.join(", ")
        )?;
    }
    if let Some(largest) = r["largest"].as_array().filter(|l| !l.is_empty()) {
        let items: Vec<String> = largest
            .iter()
            .map(|l| {
                format!(
                    "#{} {} {} ({})",
                    l["index"],
                    l["role"].as_str().unwrap_or("?"),
                    n(&l["tokens"]),
                    l["kind"].as_str().unwrap_or("?")
                )
            })
            .collect();
        writeln!(out, "  largest     {}", items.join(", "))?;
    }
    let violations = r["violations"].as_array().cloned().unwrap_or_default();
    if violations.is_empty() {
        writeln!(out, "  valid       yes")?;
    } else {
        writeln!(out, "  valid       no, {} violation(s):", violations.len())?;
        for v in violations.iter().take(20) {
            writeln!(out, "    {}", v["message"].as_str().unwrap_or("?"))?;
        }
        if violations.len() > 20 {
            writeln!(out, "    … and {} more", violations.len() - 20)?;
        }
    }
    writeln!(out)?;
    Ok(())
}
