//! Recoverable recall: what a compaction lost but a handle leads back to.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use abridge::model::decode;
use abridge_eval::{EvalOptions, Strategy, evaluate};

fn example() -> abridge::model::Conversation {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/coding-agent.openai.json"
    ))
    .unwrap();
    decode(&bytes).unwrap().remove(0)
}

#[test]
fn handles_make_lost_identifiers_recoverable() {
    let opts = EvalOptions {
        budget: 0.3,
        ..EvalOptions::default()
    };
    let cuts = evaluate("coding-agent", &example(), &opts, &Vec::new, None);
    let mut lost_then_found = 0;
    for cut in &cuts {
        for r in cut.results.iter().filter(|r| r.error.is_none()) {
            match r.strategy {
                Strategy::None | Strategy::ObservationMasking => {
                    assert_eq!(r.recoverable, None, "{:?} keeps no originals", r.strategy)
                }
                _ => {
                    let recoverable = r.recoverable.expect("engine strategies keep originals");
                    assert!(recoverable >= r.recall, "{:?}", r.strategy);
                    assert_eq!(recoverable, 1.0, "{:?}: {:?}", r.strategy, r.missed);
                    if r.recall < 1.0 {
                        lost_then_found += 1;
                    }
                }
            }
            if r.strategy == Strategy::Offline && r.briefing.is_some() {
                assert!(r.index_tokens.unwrap() > 0);
                assert!(r.index_tokens < r.briefing_tokens);
            }
        }
    }
    assert!(
        lost_then_found > 0,
        "some strategy lost an identifier a handle recovers"
    );

    let mut off = opts.clone();
    off.config.recall.enabled = false;
    let cuts = evaluate("coding-agent", &example(), &off, &Vec::new, None);
    assert!(
        cuts.iter()
            .flat_map(|c| &c.results)
            .all(|r| r.recoverable.is_none() && r.index_tokens.is_none())
    );
}
