//! Pre-tokenization: cutting text into the pieces BPE encodes one by one,
//! exactly as tiktoken's patterns cut it.
//!
//! The patterns are tiktoken's, run by `regex-automata` in the form
//! `bpe-openai` uses (tiktoken's look-ahead `\s+(?!\S)` becomes a pattern
//! whose last character is dropped). Running them costs most of counting,
//! so pieces made of ASCII are cut by hand here, following the patterns'
//! alternatives in their order; wherever a piece or the character that ends
//! it is not ASCII, the regular expression cuts that piece. The tests hold
//! both ways to `bpe-openai`'s own splitting on any text.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::sync::LazyLock;

use regex_automata::meta::{Cache, Regex};
use regex_automata::{Anchored, Input};

/// Which patterns: they differ in letters (o200k splits on case), where
/// contractions go and what may follow punctuation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    O200k,
    Cl100k,
}

/// A scheme's patterns, compiled when a piece first needs them (text
/// that is all ASCII never does).
pub(crate) struct Pretokenizer {
    scheme: Scheme,
    regex: LazyLock<Regex, fn() -> Regex>,
}

/// Per pattern: its match ends with one character of look-ahead to drop.
const LOOKAHEAD: [bool; 3] = [false, true, false];

static O200K: Pretokenizer = Pretokenizer {
    scheme: Scheme::O200k,
    regex: LazyLock::new(|| compile(Scheme::O200k)),
};

static CL100K: Pretokenizer = Pretokenizer {
    scheme: Scheme::Cl100k,
    regex: LazyLock::new(|| compile(Scheme::Cl100k)),
};

thread_local! {
    /// One search cache per thread and scheme: the lazy DFA it holds warms
    /// once, and no pool is shared between threads.
    static CACHES: RefCell<[Option<Cache>; 2]> = const { RefCell::new([None, None]) };
}

// The patterns are constants: a failure is a build defect every test shows.
#[allow(clippy::expect_used)]
fn compile(scheme: Scheme) -> Regex {
    let words = match scheme {
        Scheme::O200k => [
            "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "\\p{N}{1,3}",
            " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
            "\\s*[\\r\\n]+",
            "\\s+$",
        ]
        .join("|"),
        Scheme::Cl100k => "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$".to_owned(),
    };
    // Whitespace runs stop one character before the next word (tiktoken's
    // `\s+(?!\S)`), written as a pattern whose last character is dropped.
    Regex::new_many(&[words.as_str(), "\\s+\\s", "\\s+"]).expect("the patterns are valid")
}

impl Pretokenizer {
    /// The scheme's pre-tokenizer (one per process).
    pub(crate) fn of(scheme: Scheme) -> &'static Pretokenizer {
        match scheme {
            Scheme::O200k => &O200K,
            Scheme::Cl100k => &CL100K,
        }
    }

    /// Calls `piece` with each piece of `text`, in order, until it says to
    /// stop; together they are the whole text.
    pub(crate) fn pieces(&self, text: &str, mut piece: impl FnMut(&[u8]) -> ControlFlow<()>) {
        let bytes = text.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            let end =
                ascii_piece(self.scheme, bytes, at).unwrap_or_else(|| self.by_regex(text, at));
            if piece(&bytes[at..end]).is_break() {
                return;
            }
            at = end;
        }
    }

    /// The end of the piece at `at`, cut by the patterns themselves.
    fn by_regex(&self, text: &str, at: usize) -> usize {
        let slot = match self.scheme {
            Scheme::O200k => 0,
            Scheme::Cl100k => 1,
        };
        let input = Input::new(&text[at..]).anchored(Anchored::Yes);
        let found = CACHES.with(|caches| {
            let mut caches = caches.borrow_mut();
            let cache = caches[slot].get_or_insert_with(|| self.regex.create_cache());
            self.regex.search_with(cache, &input)
        });
        // Every character starts a match of some pattern; were one not to,
        // the rest would go as one piece rather than be lost.
        let Some(m) = found else {
            return text.len();
        };
        let mut end = at + m.end();
        if LOOKAHEAD[m.pattern().as_usize()] {
            let dropped = text[at..end].chars().next_back().map_or(0, char::len_utf8);
            end -= dropped;
        }
        end.max(at + 1).min(text.len())
    }
}

/// What one of the patterns' alternatives makes of the text at a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alt {
    /// It matches, up to here.
    To(usize),
    /// It does not match.
    No,
    /// A character that is not ASCII decides: the patterns must.
    Foreign,
}

const fn is_lower(b: u8) -> bool {
    b.is_ascii_lowercase()
}

const fn is_upper(b: u8) -> bool {
    b.is_ascii_uppercase()
}

const fn is_letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
}

/// `\s` among ASCII characters (Unicode White_Space).
const fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

const fn is_newline(b: u8) -> bool {
    matches!(b, b'\r' | b'\n')
}

/// `[^\s\p{L}\p{N}]` among ASCII characters.
const fn is_punct(b: u8) -> bool {
    b < 0x80 && !is_space(b) && !is_letter(b) && !b.is_ascii_digit()
}

/// The first index from `i` whose byte does not satisfy `class`.
fn run(bytes: &[u8], mut i: usize, class: impl Fn(u8) -> bool) -> usize {
    while i < bytes.len() && class(bytes[i]) {
        i += 1;
    }
    i
}

/// True when `i` is inside the text at a byte that is not ASCII: a
/// character the ASCII classes cannot place.
fn foreign(bytes: &[u8], i: usize) -> bool {
    bytes.get(i).is_some_and(|&b| b >= 0x80)
}

/// The ASCII piece at `at`, following the scheme's patterns in their
/// order, or `None` when deciding it needs a character that is not ASCII.
fn ascii_piece(scheme: Scheme, bytes: &[u8], at: usize) -> Option<usize> {
    let c = bytes[at];
    if c >= 0x80 {
        return None;
    }
    // cl100k's contractions are pieces of their own, tried first.
    if scheme == Scheme::Cl100k && c == b'\'' {
        match contraction(bytes, at) {
            Alt::To(end) => return Some(end),
            Alt::Foreign => return None,
            Alt::No => {}
        }
    }
    let word = |start| match scheme {
        Scheme::O200k => o200k_word(bytes, start),
        Scheme::Cl100k => letters(bytes, start),
    };
    if is_letter(c) {
        return word(at);
    }
    if c.is_ascii_digit() {
        return digits(bytes, at);
    }
    // A character that is neither a letter, a digit nor a line break may
    // lead a word.
    if !is_newline(c) {
        if foreign(bytes, at + 1) {
            return None;
        }
        if bytes.get(at + 1).copied().is_some_and(is_letter) {
            return word(at + 1);
        }
    }
    // What may follow punctuation: o200k takes slashes too.
    let tail: &[u8] = match scheme {
        Scheme::O200k => b"\r\n/",
        Scheme::Cl100k => b"\r\n",
    };
    match punctuation(bytes, at, tail) {
        Alt::To(end) => return Some(end),
        Alt::Foreign => return None,
        Alt::No => {}
    }
    whitespace(bytes, at)
}

/// Upper-case letters then lower-case ones (either run may be empty, not
/// both), then a contraction: the two word patterns of `o200k_base`.
fn o200k_word(bytes: &[u8], start: usize) -> Option<usize> {
    let upper = run(bytes, start, is_upper);
    if foreign(bytes, upper) {
        return None;
    }
    let lower = run(bytes, upper, is_lower);
    if foreign(bytes, lower) {
        return None;
    }
    match contraction(bytes, lower) {
        Alt::To(end) => Some(end),
        Alt::No => Some(lower),
        Alt::Foreign => None,
    }
}

/// A contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`, in any
/// case) at `at`.
fn contraction(bytes: &[u8], at: usize) -> Alt {
    if bytes.get(at) != Some(&b'\'') {
        return Alt::No;
    }
    let (first, second) = (at + 1, at + 2);
    if foreign(bytes, first) {
        return Alt::Foreign;
    }
    let Some(a) = bytes.get(first).map(u8::to_ascii_lowercase) else {
        return Alt::No;
    };
    if matches!(a, b's' | b't' | b'm' | b'd') {
        return Alt::To(second);
    }
    let pair = match a {
        b'r' | b'v' => b'e',
        b'l' => b'l',
        _ => return Alt::No,
    };
    if foreign(bytes, second) {
        return Alt::Foreign;
    }
    match bytes
        .get(second)
        .is_some_and(|b| b.to_ascii_lowercase() == pair)
    {
        true => Alt::To(second + 1),
        false => Alt::No,
    }
}

/// `\p{N}{1,3}`.
fn digits(bytes: &[u8], at: usize) -> Option<usize> {
    let mut end = at;
    while end < bytes.len() && end - at < 3 && bytes[end].is_ascii_digit() {
        end += 1;
    }
    // A fourth character might be a digit of another script.
    if end - at < 3 && foreign(bytes, end) {
        return None;
    }
    Some(end)
}

/// ` ?[^\s\p{L}\p{N}]+[<tail>]*`.
fn punctuation(bytes: &[u8], at: usize, tail: &[u8]) -> Alt {
    let start = if bytes[at] == b' ' { at + 1 } else { at };
    if foreign(bytes, start) {
        return Alt::Foreign;
    }
    if !bytes.get(start).copied().is_some_and(is_punct) {
        return Alt::No;
    }
    let end = run(bytes, start, is_punct);
    if foreign(bytes, end) {
        return Alt::Foreign;
    }
    Alt::To(run(bytes, end, |b| tail.contains(&b)))
}

/// A run of whitespace at `at`: through its last line break
/// (`\s*[\r\n]+`), to the end of the text (`\s+$`), or all of it but its
/// last character, which goes with what follows (`\s+(?!\S)`).
fn whitespace(bytes: &[u8], at: usize) -> Option<usize> {
    let end = run(bytes, at, is_space);
    if foreign(bytes, end) {
        return None;
    }
    if end == at {
        // Not whitespace (not reached: ASCII that is neither a letter, a
        // digit nor whitespace is punctuation). The patterns decide.
        return None;
    }
    if let Some(last) = bytes[at..end].iter().rposition(|&b| is_newline(b)) {
        return Some(at + last + 1);
    }
    if end == bytes.len() || end - at == 1 {
        return Some(end);
    }
    Some(end - 1)
}

/// `\p{L}+`.
fn letters(bytes: &[u8], start: usize) -> Option<usize> {
    let end = run(bytes, start, is_letter);
    (!foreign(bytes, end)).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ours(scheme: Scheme, text: &str) -> Vec<String> {
        let p = Pretokenizer::of(scheme);
        let mut out = Vec::new();
        p.pieces(text, |b| {
            out.push(String::from_utf8_lossy(b).into_owned());
            ControlFlow::Continue(())
        });
        out
    }

    fn reference(scheme: Scheme, text: &str) -> Vec<String> {
        let t = match scheme {
            Scheme::O200k => bpe_openai::o200k_base(),
            Scheme::Cl100k => bpe_openai::cl100k_base(),
        };
        t.split(text).map(str::to_owned).collect()
    }

    const SAMPLES: &[&str] = &[
        "hello world",
        "  leading spaces and trailing   ",
        "fn main() {\n    println!(\"{}\", 1_000_000);\n}\n",
        "I'm sure they'll've DONE it'S fine\r\n\r\n\t\tnext 'sup 'RE 'll'",
        "HELLOworld HelloWorld ABC_def x'' y' z'r 'v 'l'l",
        "12345678901234567890 3.14159 0xDEADBEEF a1b2",
        "path/to/some_file.rs:42:7: error[E0308]: mismatched types //\n/\r\n",
        "\n\n\n   \n",
        " \u{b}\u{c}x\u{1c}\u{1f}\u{0}y \u{7f} ",
        "Ünïcödé — naïve café, 東京タワー, مرحبا, 🦀🦀 emoji ſ 'ſ it'ſ",
        "a\u{a0}b \u{a0}c\u{2003}\u{2003}d 1\u{661}\u{662} x\u{301}",
        "",
        " ",
        "'",
        "a",
    ];

    #[test]
    fn samples_split_as_bpe_openai_splits() {
        for scheme in [Scheme::O200k, Scheme::Cl100k] {
            for text in SAMPLES {
                assert_eq!(
                    ours(scheme, text),
                    reference(scheme, text),
                    "{scheme:?} {text:?}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn ascii_splits_as_bpe_openai_splits(text in "[ -~\\t\\n\\r\\x0b\\x0c\\x00-\\x08]{0,64}") {
            for scheme in [Scheme::O200k, Scheme::Cl100k] {
                prop_assert_eq!(ours(scheme, &text), reference(scheme, &text));
            }
        }

        #[test]
        fn mixed_text_splits_as_bpe_openai_splits(
            text in "([a-zA-Z'sStTrReEvVlLmMdD0-9 \\t\\n\\r/.,!_-]|\\PC|\\s|\u{a0}|\u{17f}|\u{661}|\u{301}|é|É){0,64}"
        ) {
            for scheme in [Scheme::O200k, Scheme::Cl100k] {
                prop_assert_eq!(ours(scheme, &text), reference(scheme, &text));
            }
        }
    }
}
