//! Every corpus transcript compacts to 30% of its tokens, validly, or says
//! clearly that it cannot.

use std::path::PathBuf;

use abridge::model::{decode, validate};
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
    let (mut ok, mut cannot) = (0, 0);
    for path in files {
        for (n, conv) in decode(&std::fs::read(&path).unwrap())
            .unwrap()
            .iter()
            .enumerate()
        {
            let before_violations = validate(conv);
            let tokens = Compactor::new(Config::default()).unwrap().count(conv);
            let mut cfg = Config::default();
            cfg.budget.target_tokens = Some(tokens * 3 / 10);
            match Compactor::new(cfg).unwrap().compact(conv) {
                Ok(out) => {
                    assert!(
                        out.report.tokens_after <= tokens * 3 / 10,
                        "{}#{n}",
                        path.display()
                    );
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
                        "{}#{n}",
                        path.display()
                    );
                    ok += 1;
                }
                Err(Error::CannotShrink { floor, target, .. }) => {
                    assert!(floor > target);
                    cannot += 1;
                }
                Err(e) => panic!("{}#{n}: {e}", path.display()),
            }
        }
    }
    eprintln!("corpus at 30%: {ok} conversations compacted, {cannot} cannot shrink that far");
    assert!(ok > 0, "{ok} compacted, {cannot} could not");
}
