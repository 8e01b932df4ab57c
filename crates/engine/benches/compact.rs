//! Compaction cost on corpus transcripts (`cargo bench -p abridge --bench compact`).
//!
//! - `compact_longest`: the longest single conversation (a Claude Code
//!   session) compacted to 30% of its tokens, with a fresh compactor (cold
//!   token cache) and with a warm one.
//! - `compact_largest_file`: every run of the largest file (tau-bench, 200
//!   runs) compacted to 30%.
//! - `turn_without_trigger`: a session turn that only evaluates the trigger.
//! - `offline_briefing_longest`: the offline briefing (facts and sheet) of
//!   the longest conversation's whole history, at 10% of its tokens.
//!
//! Skips with a note when ../shared/corpus is absent.

use std::path::PathBuf;
use std::sync::LazyLock;

use abridge::model::{Conversation, decode};
use abridge::{Compactor, Config, History};
use divan::Bencher;

fn main() {
    if CORPUS.is_none() {
        eprintln!("skipping benches: corpus not found beside the project (../shared/corpus)");
        return;
    }
    divan::main();
}

struct Corpus {
    longest: Conversation,
    largest_file: Vec<Conversation>,
}

static CORPUS: LazyLock<Option<Corpus>> = LazyLock::new(|| {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    let read = |p: &str| decode(&std::fs::read(dir.join(p)).ok()?).ok();
    Some(Corpus {
        longest: read("claude-code_marot-spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl")?
            .remove(0),
        largest_file: read("tau-bench_historical/gpt-4o-airline.json")?,
    })
});

fn corpus() -> &'static Corpus {
    CORPUS
        .as_ref()
        .unwrap_or_else(|| unreachable!("checked in main"))
}

fn compactor_for(conv: &Conversation, ratio: f64) -> Compactor {
    compactor_with(conv, ratio, true)
}

fn compactor_with(conv: &Conversation, ratio: f64, recall: bool) -> Compactor {
    let mut probe = Compactor::new(Config::default()).unwrap_or_else(|_| unreachable!());
    let tokens = probe.count(conv).get();
    let mut c = Config {
        model: conv.model.clone(),
        ..Config::default()
    };
    c.budget.target_tokens = Some((tokens as f64 * ratio) as u64);
    c.budget.min_iterations = 1;
    c.recall.enabled = recall;
    Compactor::new(c).unwrap_or_else(|_| unreachable!())
}

#[divan::bench]
fn compact_longest_cold(b: Bencher) {
    let conv = &corpus().longest;
    b.bench(|| {
        compactor_for(conv, 0.3)
            .compact(conv)
            .map(|o| o.report.tokens_after)
            .ok()
    });
}

#[divan::bench]
fn compact_longest_warm(b: Bencher) {
    let conv = &corpus().longest;
    let mut c = compactor_for(conv, 0.3);
    let _ = c.compact(conv);
    b.bench_local(|| c.compact(conv).map(|o| o.report.tokens_after).ok());
}

/// The same without handles, originals and the index: what recall costs.
#[divan::bench]
fn compact_longest_warm_without_recall(b: Bencher) {
    let conv = &corpus().longest;
    let mut c = compactor_with(conv, 0.3, false);
    let _ = c.compact(conv);
    b.bench_local(|| c.compact(conv).map(|o| o.report.tokens_after).ok());
}

#[divan::bench]
fn compact_largest_file(b: Bencher) {
    let runs = &corpus().largest_file;
    b.bench(|| {
        runs.iter()
            .map(|conv| {
                compactor_for(conv, 0.3)
                    .compact(conv)
                    .map(|o| o.report.tokens_after.get())
                    .unwrap_or(0)
            })
            .sum::<u64>()
    });
}

#[divan::bench]
fn turn_without_trigger(b: Bencher) {
    let conv = corpus().longest.clone();
    let mut session = History::new(
        Compactor::new(Config::default()).unwrap_or_else(|_| unreachable!()),
        conv,
    );
    // The first turn counts the history; the ones measured only evaluate.
    let _ = session.turn(None);
    b.bench_local(|| session.turn(None).map(|t| t.tokens).ok());
}

#[divan::bench]
fn offline_briefing_longest(b: Bencher) {
    use abridge::summarize::{FactConfig, Offline, Request, Summarizer};
    use abridge::tokens::TokenizerKind;
    let conv = &corpus().longest;
    let kind = TokenizerKind::O200kBase;
    let tokens: usize = conv
        .messages
        .iter()
        .map(|m| kind.count(&m.text_content()))
        .sum();
    let facts = FactConfig::default();
    b.bench(|| {
        Offline
            .summarize(&Request {
                task: "",
                region: &conv.messages,
                previous: None,
                previous_sheet: None,
                tail: &[],
                budget_tokens: tokens / 10,
                tokenizer: kind,
                focus: None,
                facts: &facts,
                region_facts: None,
            })
            .map(|s| s.len())
            .ok()
    });
}
