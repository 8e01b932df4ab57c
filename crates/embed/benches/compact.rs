//! What the Python and Node packages cost on top of the engine: the same
//! call as theirs — JSON text in, compaction, JSON text out — in Rust
//! (`cargo bench -p abridge-embed`). `benches/bindings_overhead.sh` runs it
//! beside the Python and Node calls on the same body.
//!
//! The body: `ABRIDGE_BENCH_BODY` (a file) compacted to
//! `ABRIDGE_BENCH_TARGET` tokens, by default the corpus's longest
//! conversation (a Claude Code session) as an Anthropic body, to 30% of its
//! tokens. Skips with a note when neither is there.

use std::path::PathBuf;
use std::sync::LazyLock;

use abridge_embed::{Options, Wire, compact, convert, count_tokens};

fn main() {
    if BODY.is_none() {
        eprintln!(
            "skipping: set ABRIDGE_BENCH_BODY, or put the corpus beside the project (../shared/corpus)"
        );
        return;
    }
    divan::main();
}

/// The body's JSON text and the options with its target.
static BODY: LazyLock<Option<(String, Options)>> = LazyLock::new(|| {
    let text = match std::env::var_os("ABRIDGE_BENCH_BODY") {
        Some(path) => std::fs::read_to_string(path).ok()?,
        None => {
            let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/corpus/claude-code_marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl");
            let bodies = convert(&std::fs::read(file).ok()?, Wire::Anthropic).ok()?;
            serde_json::to_string(bodies.first()?).ok()?
        }
    };
    let target = match std::env::var("ABRIDGE_BENCH_TARGET") {
        Ok(t) => t.parse().ok()?,
        Err(_) => {
            count_tokens(serde_json::from_str(&text).ok()?, &Options::default())
                .ok()?
                .get()
                * 3
                / 10
        }
    };
    let options = Options {
        target_tokens: Some(target),
        ..Options::default()
    };
    Some((text, options))
});

/// Parse, compact (a fresh compactor, as each package call makes), serialize.
#[divan::bench(sample_count = 20)]
fn compact_json_text() -> usize {
    let Some((text, options)) = BODY.as_ref() else {
        return 0;
    };
    let body = serde_json::from_str(text).unwrap_or_default();
    let out = compact(body, options).map(|o| serde_json::to_string(&o).unwrap_or_default());
    out.map(|s| s.len()).unwrap_or_default()
}
