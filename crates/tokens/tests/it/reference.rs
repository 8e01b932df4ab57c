//! Exact counts equal Python tiktoken's on all corpus text.
//!
//! The fixture was recorded by `scripts/reference_token_counts.py` (tiktoken
//! `encode_ordinary`); this test walks the same strings in the same order.

use std::path::PathBuf;

use abridge_tokens::TokenizerKind;
use serde_json::Value;

fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|x| strings(x, out)),
        Value::Object(map) => map.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

#[test]
fn corpus_counts_match_tiktoken() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if !corpus.is_dir() {
        eprintln!("skipping: corpus not found at {}", corpus.display());
        return;
    }
    let fixture: Value =
        serde_json::from_str(include_str!("../fixtures/corpus_token_counts.json")).unwrap();
    let files = fixture["files"].as_object().unwrap();
    assert!(files.len() >= 8);
    for (name, expected) in files {
        let text = std::fs::read_to_string(corpus.join(name)).unwrap();
        let docs: Vec<Value> = if name.ends_with(".jsonl") {
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        } else {
            vec![serde_json::from_str(&text).unwrap()]
        };
        let mut all = Vec::new();
        for d in &docs {
            strings(d, &mut all);
        }
        assert_eq!(
            all.len() as u64,
            expected["strings"].as_u64().unwrap(),
            "{name}"
        );
        for kind in [TokenizerKind::O200kBase, TokenizerKind::Cl100kBase] {
            let counts: Vec<u64> = all.iter().map(|s| kind.count(s) as u64).collect();
            let total: u64 = counts.iter().sum();
            let weighted: u64 = counts
                .iter()
                .enumerate()
                .map(|(i, c)| (i as u64 % 9973 + 1) * c)
                .sum();
            let exp = &expected[kind.as_str()];
            assert_eq!(total, exp["total"].as_u64().unwrap(), "{name} {kind} total");
            assert_eq!(
                weighted,
                exp["weighted"].as_u64().unwrap(),
                "{name} {kind} weighted"
            );
        }
    }
}

#[test]
fn known_strings() {
    // Values from tiktoken 0.14 encode_ordinary.
    let o = TokenizerKind::O200kBase;
    let c = TokenizerKind::Cl100kBase;
    assert_eq!(o.count(""), 0);
    assert_eq!(o.count("hello world"), 2);
    assert_eq!(c.count("hello world"), 2);
    assert_eq!(TokenizerKind::Estimate.count("abcdefgh1"), 3);
}
