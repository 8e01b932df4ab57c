//! Times `Compactor::compact` in-process on an OpenAI body, as one JSON line;
//! `benches/compare_langchain.py` runs it beside LangChain's `trim_messages`.
//! Recall is off, as in a one-shot `abridge.compact` or `abridge compact`
//! without a store: nothing would keep the originals.
//!
//! `cargo run --release -p abridge --example compact_timing -- BODY.json TARGET_TOKENS [o200k_base|estimate]`

use std::time::Instant;

use abridge::model::decode;
use abridge::{Compactor, Config};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: compact_timing BODY.json TARGET [TOKENIZER]")?;
    let target: u64 = args.next().ok_or("missing TARGET")?.parse()?;
    let tokenizer = args.next().unwrap_or_else(|| "o200k_base".into());
    let conv = decode(&std::fs::read(&path)?)?.remove(0);
    let mut config = Config::from_toml(&format!(
        "tokenizer = \"{tokenizer}\"\n[budget]\ntarget_tokens = {target}\nmin_iterations = 1\n[recall]\nenabled = false\n"
    ))?;
    config.model = conv.model.clone();
    let mut best = f64::MAX;
    let mut after = (0, 0);
    for _ in 0..20 {
        // A fresh compactor each time: token counts are not cached across runs.
        let mut c = Compactor::new(config.clone())?;
        let t = Instant::now();
        let out = c.compact(&conv)?;
        best = best.min(t.elapsed().as_secs_f64());
        after = (out.report.tokens_after.get(), out.report.messages_after);
    }
    println!(
        "{}",
        serde_json::json!({"impl": "abridge", "tokenizer": tokenizer, "messages": conv.messages.len(),
            "target": target, "tokens_after": after.0, "messages_after": after.1, "seconds": best})
    );
    Ok(())
}
