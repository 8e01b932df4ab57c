//! Helpers shared by the test modules.

use std::path::PathBuf;

use abridge_model::{Conversation, Wire, convert_to, decode_as, encode, validate};

/// The shared corpus folder beside the project, or `None` (with a note on
/// stderr) when it is absent so that corpus tests skip cleanly.
pub(crate) fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: corpus not found at {} (../shared/corpus beside the project)",
            dir.display()
        );
        None
    }
}

/// Every transcript file of the corpus (not licences or sub-agent logs), sorted.
pub(crate) fn corpus_files() -> Vec<PathBuf> {
    let Some(dir) = corpus_dir() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for sub in std::fs::read_dir(&dir).unwrap().flatten() {
        if !sub.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(sub.path()).unwrap().flatten() {
            let p = f.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".jsonl") || name.ends_with(".json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `conv` converted to `wire`, encoded and decoded again (the same body on
/// encoding it anew), with as many violations as `conv` had (a
/// mini-swe-agent log ends on a pending call), and converted back to its
/// own family with as many; the decoded conversion.
pub(crate) fn through(conv: &Conversation, wire: Wire, at: &str) -> Conversation {
    let pending = validate(conv).len();
    let converted = convert_to(conv, wire)
        .unwrap_or_else(|e| panic!("{at}: {e}"))
        .conversation;
    let body = encode(&converted).unwrap_or_else(|e| panic!("{at}: {e}"));
    let decoded = decode_as(&serde_json::to_vec(&body).unwrap(), Some(wire.format()))
        .unwrap_or_else(|e| panic!("{at}: {e}"))
        .remove(0);
    assert_eq!(encode(&decoded).unwrap(), body, "{at}: round trip");
    let violations = validate(&decoded);
    assert_eq!(violations.len(), pending, "{at}: {violations:?}");
    let back = convert_to(&decoded, Wire::from(conv.family))
        .unwrap_or_else(|e| panic!("{at}: {e}"))
        .conversation;
    assert_eq!(
        validate(&back).len(),
        pending,
        "{at}: back to {}",
        conv.family
    );
    decoded
}
