//! Every corpus transcript compacts to 30% of its tokens, validly, or says
//! clearly that it cannot: as it was written, and converted to Responses
//! API input.

use std::path::PathBuf;

use abridge::model::{Conversation, Wire, convert_to, decode, validate};
use abridge::{Compactor, Config, Error};

#[test]
fn corpus_compacts_to_30_percent_or_says_it_cannot() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if !dir.is_dir() {
        eprintln!("skipping: corpus not found at {}", dir.display());
        return;
    }
    let mut files = Vec::new();
    for sub in std::fs::read_dir(&dir).unwrap().flatten() {
        for f in std::fs::read_dir(sub.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let p = f.path();
            if p.extension().is_some_and(|e| e == "json" || e == "jsonl") {
                files.push(p);
            }
        }
    }
    // (compacted, cannot shrink that far): as written, and as Responses input.
    let mut tally = [(0, 0); 2];
    for path in files {
        for (n, decoded) in decode(&std::fs::read(&path).unwrap())
            .unwrap()
            .iter()
            .enumerate()
        {
            let responses = convert_to(decoded, Wire::Responses)
                .unwrap_or_else(|e| panic!("{}#{n}: {e}", path.display()))
                .conversation;
            for (k, conv) in [decoded, &responses].into_iter().enumerate() {
                let at = format!("{}#{n} {:?}", path.display(), conv.format);
                let (ok, cannot) = compacts_to_30_percent(conv, &at);
                tally[k].0 += ok;
                tally[k].1 += cannot;
            }
        }
    }
    eprintln!(
        "corpus at 30%: (compacted, cannot shrink that far) as written {:?}, as Responses input {:?}",
        tally[0], tally[1]
    );
    assert!(tally.iter().all(|t| t.0 > 0), "{tally:?}");
}

/// Compacts `conv` to 30% of its tokens: (1, 0) when it fits, validly,
/// (0, 1) when its floor is above that.
fn compacts_to_30_percent(conv: &Conversation, at: &str) -> (usize, usize) {
    let before_violations = validate(conv);
    let tokens = Compactor::new(Config::default()).unwrap().count(conv).get();
    let mut cfg = Config::default();
    cfg.budget.target_tokens = Some(tokens * 3 / 10);
    match Compactor::new(cfg).unwrap().compact(conv) {
        Ok(out) => {
            assert!(out.report.tokens_after.get() <= tokens * 3 / 10, "{at}");
            // No new violations (a mini-swe-agent log keeps its final pending call).
            assert_eq!(
                validate(&out.conversation),
                before_violations
                    .into_iter()
                    .map(|mut v| {
                        let shift = conv.messages.len() - out.conversation.messages.len();
                        v.index -= shift;
                        v.wire_index -= shift;
                        v
                    })
                    .collect::<Vec<_>>(),
                "{at}"
            );
            (1, 0)
        }
        Err(Error::CannotShrink { floor, target, .. }) => {
            assert!(floor > target, "{at}");
            (0, 1)
        }
        Err(e) => panic!("{at}: {e}"),
    }
}
