//! Decode + count throughput on the largest corpus transcript.
//!
//! `cargo bench -p abridge-tokens --bench count`. Skips (prints a note) when
//! ../shared/corpus is absent.

use std::path::PathBuf;
use std::sync::LazyLock;

use abridge_model::decode;
use abridge_tokens::{TokenCounter, TokenizerKind};
use divan::Bencher;
use divan::counter::BytesCount;

fn main() {
    if INPUT.is_none() {
        eprintln!("skipping benches: corpus not found beside the project (../shared/corpus)");
        return;
    }
    divan::main();
}

/// The largest corpus file's bytes.
static INPUT: LazyLock<Option<Vec<u8>>> = LazyLock::new(|| {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let mut best: Option<(u64, PathBuf)> = None;
    for sub in std::fs::read_dir(dir).ok()?.flatten() {
        for f in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = f.path();
            let ok = p.extension().is_some_and(|e| e == "json" || e == "jsonl");
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if ok && best.as_ref().is_none_or(|(l, _)| len > *l) {
                best = Some((len, p));
            }
        }
    }
    std::fs::read(best?.1).ok()
});

fn input() -> &'static [u8] {
    INPUT.as_deref().unwrap_or_default()
}

#[divan::bench]
fn decode_only(b: Bencher) {
    b.counter(BytesCount::new(input().len()))
        .bench(|| decode(divan::black_box(input())).map(|c| c.len()));
}

#[divan::bench(args = [TokenizerKind::O200kBase, TokenizerKind::Cl100kBase, TokenizerKind::Estimate])]
fn decode_and_count(b: Bencher, kind: TokenizerKind) {
    b.counter(BytesCount::new(input().len())).bench(|| {
        let convs = decode(divan::black_box(input())).unwrap_or_default();
        let mut counter = TokenCounter::new(kind);
        convs
            .iter()
            .map(|c| counter.count_conversation(c))
            .sum::<abridge_tokens::Counted>()
    });
}

/// Recounting a history whose messages were all counted before: the per-turn
/// cost of an agent loop once the cache is warm.
#[divan::bench]
fn recount_cached(b: Bencher) {
    let convs = decode(input()).unwrap_or_default();
    let mut counter = TokenCounter::new(TokenizerKind::O200kBase);
    for c in &convs {
        counter.count_conversation(c);
    }
    b.counter(BytesCount::new(input().len())).bench_local(|| {
        convs
            .iter()
            .map(|c| counter.count_conversation(c))
            .sum::<abridge_tokens::Counted>()
    });
}
