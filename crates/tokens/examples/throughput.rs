//! Prints exact-count throughput over every string of a JSON/JSONL file, as
//! one JSON line; `benches/compare_tiktoken.py` runs it beside Python tiktoken.
//!
//! `cargo run --release -p abridge-tokens --example throughput -- FILE [ENCODING]`

use std::time::Instant;

use abridge_model::{Message, Role};
use abridge_tokens::{TokenCounter, TokenizerKind};
use serde_json::Value;

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|x| strings(x, out)),
        Value::Object(map) => map.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: throughput FILE [o200k_base|cl100k_base]")?;
    let kind: TokenizerKind = args.next().as_deref().unwrap_or("o200k_base").parse()?;
    let text = std::fs::read_to_string(&path)?;
    let mut all = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(v) => strings(&v, &mut all),
            Err(_) => {
                all.clear();
                strings(&serde_json::from_str(&text)?, &mut all);
                break;
            }
        }
    }
    let bytes: usize = all.iter().map(String::len).sum();
    kind.count("warm up the tables");
    let mut best = f64::MAX;
    let mut tokens = 0;
    for _ in 0..5 {
        let start = Instant::now();
        tokens = all.iter().map(|s| kind.count(s)).sum::<usize>();
        best = best.min(start.elapsed().as_secs_f64());
    }
    // Batched: the strings as the messages of one history, counted as a
    // request's history is (a fresh cache each time: all of it is new).
    let messages: Vec<Message> = all
        .iter()
        .map(|s| Message::text(Role::User, s.as_str()))
        .collect();
    let mut batched = f64::MAX;
    for _ in 0..5 {
        let mut counter = TokenCounter::new(kind);
        let start = Instant::now();
        counter.count_messages(&messages);
        batched = batched.min(start.elapsed().as_secs_f64());
    }
    println!(
        "{}",
        serde_json::json!({"impl": "abridge", "encoding": kind.as_str(), "bytes": bytes,
            "tokens": tokens, "seconds": best, "mb_per_s": bytes as f64 / best / 1e6,
            "batched_mb_per_s": bytes as f64 / batched / 1e6})
    );
    Ok(())
}
