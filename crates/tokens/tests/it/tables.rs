//! The vocabularies compiled in count exactly as `bpe-openai`'s
//! own: same tables, same pre-tokenization, on any text (the corpus test in
//! `reference.rs` compares with tiktoken itself when the corpus is present).

use abridge_tokens::TokenizerKind;
use proptest::prelude::*;

fn reference(kind: TokenizerKind) -> &'static bpe_openai::Tokenizer {
    match kind {
        TokenizerKind::O200kBase => bpe_openai::o200k_base(),
        TokenizerKind::Cl100kBase => bpe_openai::cl100k_base(),
        other => panic!("{other} has no reference table"),
    }
}

const SAMPLES: &[&str] = &[
    "hello world",
    "  leading spaces and trailing   ",
    "fn main() {\n    println!(\"{}\", 1_000_000);\n}\n",
    "Ünïcödé — naïve café, 東京タワー, مرحبا, 🦀🦀 emoji",
    "I'm sure they'll've DONE it'S fine\r\n\r\n\t\tnext",
    "12345678901234567890 3.14159 0xDEADBEEF",
    "path/to/some_file.rs:42:7: error[E0308]: mismatched types",
    "\n\n\n   \n",
];

#[test]
fn samples_count_as_bpe_openai_counts() {
    for kind in [TokenizerKind::O200kBase, TokenizerKind::Cl100kBase] {
        for text in SAMPLES {
            assert_eq!(
                kind.count(text),
                reference(kind).count(*text),
                "{kind} {text:?}"
            );
        }
    }
}

/// Pieces past 128 bytes are merged by a heap, not by scanning.
#[test]
fn long_pieces_count_as_bpe_openai_counts() {
    let texts = [
        "a".repeat(5000),
        "ab".repeat(3000),
        "=-".repeat(2000),
        " ".repeat(4000),
        "x".repeat(129) + &"é".repeat(300),
        "0123456789".repeat(50),
        "aGVsbG8gd29ybGQ".repeat(200),
    ];
    for kind in [TokenizerKind::O200kBase, TokenizerKind::Cl100kBase] {
        for text in &texts {
            assert_eq!(
                kind.count(text),
                reference(kind).count(text.as_str()),
                "{kind}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_counts_as_bpe_openai_counts(
        text in "(\\PC|\\s|[a-zA-Z0-9 '_./=+-]|[a-z]{130,200}|[!-/]{130,150}){0,40}"
    ) {
        for kind in [TokenizerKind::O200kBase, TokenizerKind::Cl100kBase] {
            prop_assert_eq!(kind.count(&text), reference(kind).count(text.as_str()));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Counting within a limit gives the count when it is within, and
    /// says so when it is not, for every kind (the calibrated ones scale).
    #[test]
    fn counting_within_a_limit_agrees_with_counting(
        text in "(\\PC|\\s|[a-zA-Z0-9 '_./=+-]|[a-z]{130,200}){0,40}",
        limit in 0usize..120,
    ) {
        for kind in [
            TokenizerKind::O200kBase,
            TokenizerKind::Cl100kBase,
            TokenizerKind::ClaudeCalibrated,
            TokenizerKind::OpenCalibrated,
            TokenizerKind::Estimate,
        ] {
            let n = kind.count(&text);
            prop_assert_eq!(kind.count_within(&text, limit), (n <= limit).then_some(n), "{}", kind);
        }
    }
}
