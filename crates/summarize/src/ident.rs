//! Identifiers in free text: URLs, paths, file names, hashes, UUIDs, ids
//! and code symbols — what an agent needs verbatim to carry on.

use std::collections::HashSet;

/// Identifiers in `text`, in order of first appearance, without duplicates.
pub fn identifiers(text: &str) -> Vec<String> {
    owned(identifier_refs(text))
}

/// [`identifiers`], borrowed from `text`.
pub(crate) fn identifier_refs(text: &str) -> Vec<&str> {
    let mut found = Found::default();
    found.scan(text, |_| true);
    found.out
}

/// Identifiers in prose (what the agent or user wrote as text): as
/// [`identifiers`], except that outside `code` spans a run of plain words
/// joined by hyphens or a slash is English ("end-to-end", "No-op",
/// "expand/collapse"), not a name. Inside backticks it counts.
pub fn prose_identifiers(text: &str) -> Vec<String> {
    owned(prose_identifier_refs(text))
}

/// [`prose_identifiers`], borrowed from `text`.
pub(crate) fn prose_identifier_refs(text: &str) -> Vec<&str> {
    let mut found = Found::default();
    for (i, span) in text.split('`').enumerate() {
        let code = i % 2 == 1;
        found.scan(span, |id| code || !is_compound_word(id));
    }
    found.out
}

/// `text` clipped as [`clip`](abridge_model::text::clip) does (its first
/// `max - tail` and last `tail` bytes), with the names only the cut middle
/// held listed in its place — at most `most` of them, first seen first —
/// so that clipping an excerpt loses words, not the identifiers a model
/// would need verbatim.
pub(crate) fn clip_keeping_names(text: &str, max: usize, tail: usize, most: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let tail = tail.min(max);
    let mut head = max - tail;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut end = text.len() - tail;
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let (first, middle, last) = (&text[..head], &text[head..end], &text[end..]);
    let names: Vec<String> = prose_identifier_refs(middle)
        .into_iter()
        .filter(|id| !first.contains(id) && !last.contains(id))
        .take(most)
        .map(|id| format!("`{id}`"))
        .collect();
    match (names.is_empty(), tail) {
        (true, 0) => format!("{first}…"),
        (true, _) => format!("{first} … {last}"),
        (false, 0) => format!("{first}… (cut, naming {})", names.join(", ")),
        (false, _) => format!("{first} … (cut, naming {}) … {last}", names.join(", ")),
    }
}

fn owned(ids: Vec<&str>) -> Vec<String> {
    ids.into_iter().map(str::to_owned).collect()
}

/// Identifiers found so far, in order, each once: `seen` looks them up in
/// constant time (a long output names thousands).
#[derive(Default)]
struct Found<'a> {
    out: Vec<&'a str>,
    seen: HashSet<&'a str>,
}

impl<'a> Found<'a> {
    /// Adds the identifiers of `text` that `keep` accepts.
    fn scan(&mut self, text: &'a str, keep: impl Fn(&str) -> bool) {
        for raw in words(text) {
            // `key=value` splits, a URL's query does not.
            let split =
                raw.as_bytes().contains(&b'=') && !raw.as_bytes().windows(3).any(|w| w == b"://");
            for piece in raw.split(|c: char| split && c == '=') {
                let token = piece
                    .trim_end_matches(['.', ':', '!', '?'])
                    .trim_start_matches(['@', '#', '*']);
                if is_identifier(token) && keep(token) && self.seen.insert(token) {
                    self.out.push(token);
                }
            }
        }
    }
}

/// The runs of `text` between separators: whitespace, quotes, brackets and
/// `,;|`. Read byte by byte through a table (prose is mostly ASCII, and
/// this is the briefing's hottest loop); a character beyond ASCII is
/// decoded to ask whether it is whitespace.
fn words(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    // Whether the character at `i` separates words, and its width.
    let separator_at = move |i: usize| -> (bool, usize) {
        match CLASS[usize::from(bytes[i])] {
            WORD => (false, 1),
            SEPARATOR => (true, 1),
            _ => text[i..]
                .chars()
                .next()
                .map_or((false, 1), |c| (c.is_whitespace(), c.len_utf8())),
        }
    };
    let mut i = 0;
    std::iter::from_fn(move || {
        loop {
            if i == bytes.len() {
                return None;
            }
            match separator_at(i) {
                (true, width) => i += width,
                (false, _) => break,
            }
        }
        let start = i;
        while i < bytes.len() {
            if CLASS[usize::from(bytes[i])] == WORD {
                i += 1;
                continue;
            }
            match separator_at(i) {
                (true, _) => break,
                (false, width) => i += width,
            }
        }
        Some(&text[start..i])
    })
}

/// Byte classes of [`words`].
const WORD: u8 = 0;
const SEPARATOR: u8 = 1;
/// The first byte of a character beyond ASCII.
const WIDE: u8 = 2;

/// Each byte's class: the ASCII separators are what `char::is_whitespace`
/// accepts there, quotes, brackets, `,`, `;` and `|`.
const CLASS: [u8; 256] = {
    let mut t = [WORD; 256];
    let list = b"\t\n\x0b\x0c\r \"'`()[]{}<>,;|";
    let mut i = 0;
    while i < list.len() {
        t[list[i] as usize] = SEPARATOR;
        i += 1;
    }
    let mut b = 0x80;
    while b < 256 {
        t[b] = WIDE;
        b += 1;
    }
    t
};

/// Letters joined by `-` or `/`, lower case after a possible capital.
fn is_compound_word(t: &str) -> bool {
    !t.starts_with('/')
        && t.chars()
            .all(|c| c.is_ascii_alphabetic() || c == '-' || c == '/')
        && t.chars().skip(1).all(|c| !c.is_ascii_uppercase())
}

/// `1px`, `200ms`, `16-byte`, `10-line`: a quantity, not a name.
fn is_quantity(t: &str) -> bool {
    let unit = t.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    unit.len() < t.len() && {
        let unit = unit.strip_prefix('-').unwrap_or(unit);
        !unit.is_empty() && unit.chars().all(|c| c.is_ascii_alphabetic())
    }
}

/// `a-z`, `0-9a-f`, `A-Za-z0-9_`: a pattern's character class, not a name.
fn is_char_ranges(t: &str) -> bool {
    let b = t.as_bytes();
    let mut i = 0;
    let mut ranges = 0;
    while i < b.len() {
        if i + 2 < b.len() && b[i + 1] == b'-' && b[i].is_ascii_alphanumeric() {
            if !b[i + 2].is_ascii_alphanumeric() {
                return false;
            }
            ranges += 1;
            i += 3;
        } else if matches!(b[i], b'_' | b'.') {
            i += 1;
        } else {
            return false;
        }
    }
    ranges > 0
}

/// True for a token worth keeping verbatim.
pub(crate) fn is_identifier(t: &str) -> bool {
    if t.len() < 3 || t.len() > 300 {
        return false;
    }
    // Most words of prose: letters only name something when camelCased
    // (what the rules below come to for them, without their passes).
    if t.bytes().all(|b| b.is_ascii_alphabetic()) {
        return is_camel(t);
    }
    if is_quantity(t) || is_char_ranges(t) {
        return false;
    }
    if t.starts_with("http://") || t.starts_with("https://") {
        return true;
    }
    let alnum = t.chars().filter(char::is_ascii_alphanumeric).count();
    if alnum < 3
        || !t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:~+$%".contains(c))
    {
        return false;
    }
    let letters = t.chars().filter(char::is_ascii_alphabetic).count();
    let digits = t.chars().filter(char::is_ascii_digit).count();
    if t.contains('/') {
        return letters > 0 && !t.starts_with("//");
    }
    if is_hex_id(t) {
        return true;
    }
    if let Some((name, ext)) = t.rsplit_once('.')
        && !ext.is_empty()
        && ext.len() <= 5
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic())
        && name.chars().any(|c| c.is_ascii_alphabetic())
        && name.len() >= 2
    {
        return true; // file.ext, Module.Sub.fun
    }
    let has_sep = t.contains(['_', '-']);
    let camel = is_camel(t);
    (letters > 0 && digits > 0 && (has_sep || letters >= 2) && !t.starts_with('-'))
        || (has_sep && letters >= 4 && !t.starts_with('-') && !t.ends_with('-'))
        || camel
}

fn is_hex_id(t: &str) -> bool {
    let hex = || t.chars().filter(|c| *c != '-');
    hex().count() >= 7
        && hex().all(|c| c.is_ascii_hexdigit())
        && hex().any(|c| c.is_ascii_digit())
        && hex().any(|c| c.is_ascii_alphabetic())
}

/// A lower-case letter followed by a capital (`camelCase`).
fn is_camel(t: &str) -> bool {
    t.as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
}

/// True when `text` keeps `id`: verbatim, or for a path, its last two
/// components (an absolute path written relative to the project counts).
pub fn mentions(text: &str, id: &str) -> bool {
    if text.contains(id) {
        return true;
    }
    let parts: Vec<&str> = id.trim_end_matches('/').rsplit('/').take(2).collect();
    if id.contains('/') && parts.len() == 2 && !parts[1].is_empty() {
        return text.contains(&format!("{}/{}", parts[1], parts[0]));
    }
    false
}

/// The function a name/arity reference names (`with_span/3` →
/// `with_span`); `None` for anything else, and for a plain word (`setup/1`
/// stays as written: `setup` alone is not a name).
pub(crate) fn function_of(id: &str) -> Option<&str> {
    let (base, arity) = id.rsplit_once('/')?;
    let numbered = !arity.is_empty() && arity.chars().all(|c| c.is_ascii_digit());
    (numbered && !base.contains('/') && is_identifier(base)).then_some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clipped_excerpt_lists_the_names_its_cut_middle_held() {
        let text = format!(
            "Options for `HAT084`:{} then `HAT078` or HAT118 via src/app.rs, or `HAT084` again.{} Pick one.",
            " filler words".repeat(20),
            " more words".repeat(20)
        );
        let got = clip_keeping_names(&text, 120, 40, 12);
        assert!(got.starts_with("Options for `HAT084`:"), "{got}");
        assert!(got.ends_with(" Pick one."), "{got}");
        // The middle's names, once each; the head's own name not again.
        assert!(
            got.contains("(cut, naming `HAT078`, `HAT118`, `src/app.rs`)"),
            "{got}"
        );
        // At most `most` names; none when the cut held none; short text as is.
        assert!(clip_keeping_names(&text, 120, 40, 1).contains("(cut, naming `HAT078`)"));
        let plain = "word ".repeat(100);
        assert_eq!(
            clip_keeping_names(&plain, 50, 10, 12),
            abridge_model::text::clip(&plain, 50, 10)
        );
        assert_eq!(
            clip_keeping_names("short `a.rs`", 50, 10, 12),
            "short `a.rs`"
        );
        // A cut with no tail lists them after the head.
        let got = clip_keeping_names(&text, 100, 0, 12);
        assert!(got.ends_with("`src/app.rs`)"), "{got}");
    }

    /// The byte-level splitter agrees with splitting on characters, for
    /// ASCII and for the whitespace and letters beyond it.
    #[test]
    fn words_split_as_characters_do() {
        let separator = |c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '"' | '\''
                        | '`'
                        | '('
                        | ')'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '<'
                        | '>'
                        | ','
                        | ';'
                        | '|'
                )
        };
        let alphabet = [
            "a", "Z", "_", "/", ".", "=", " ", "\t", "\n", "\u{b}", "(", "'", "|", "é", "ß",
            "\u{a0}", "\u{85}", "\u{2003}", "\u{3000}", "日", "🦀", ":", "-",
        ];
        // Every string of up to three symbols, and longer ones mixed by a
        // fixed stride.
        let mut texts: Vec<String> = Vec::new();
        for a in alphabet {
            for b in alphabet {
                for c in alphabet {
                    texts.push(format!("{a}{b}{c}"));
                }
            }
        }
        texts.extend((0..500).map(|n| {
            (0..40)
                .map(|k| alphabet[(n * 7 + k * k * 13 + k) % alphabet.len()])
                .collect()
        }));
        for t in &texts {
            let want: Vec<&str> = t.split(separator).filter(|w| !w.is_empty()).collect();
            assert_eq!(words(t).collect::<Vec<_>>(), want, "{t:?}");
        }
    }

    #[test]
    fn prose_compounds_are_words_but_code_spans_are_names() {
        let ids = prose_identifiers(
            "An end-to-end fix, pre-existing in `is-jump-highlight`; No-op on \
             expand/collapse, bead spotter-dov.3 in lib/app.ex and `spotter-dov`.",
        );
        assert_eq!(
            ids,
            [
                "is-jump-highlight",
                "spotter-dov.3",
                "lib/app.ex",
                "spotter-dov"
            ]
        );
        // Code keeps its kebab-case names.
        assert!(identifiers("class=\"transcript-row\"").contains(&"transcript-row".to_owned()));
    }

    #[test]
    fn finds_what_agents_reuse() {
        let t = "Edited /home/u/app/lib/foo_web/live/session_live.ex (see https://x.test/a?b=1). \
                 Ticket APP-1432, commit 9f3c2ab, id 4d5611e5-241a-462a-8d15-5122611a9569, \
                 fn build_tool_use_index and SessionLive, bead spotter-dov.3, Cargo.toml. \
                 The quick brown fox, e.g. 1.5 times, well-known.";
        let ids = identifiers(t);
        for want in [
            "/home/u/app/lib/foo_web/live/session_live.ex",
            "https://x.test/a?b=1)",
            "APP-1432",
            "9f3c2ab",
            "4d5611e5-241a-462a-8d15-5122611a9569",
            "build_tool_use_index",
            "SessionLive",
            "spotter-dov.3",
            "Cargo.toml",
        ] {
            assert!(
                ids.iter().any(|i| i == want.trim_end_matches(')'))
                    || ids.iter().any(|i| i == want),
                "{want}: {ids:?}"
            );
        }
        for not in ["quick", "brown", "e.g", "1.5", "times", "The"] {
            assert!(!ids.iter().any(|i| i == not), "{not}: {ids:?}");
        }
        for quantity in [
            "1px",
            "200ms",
            "16-byte",
            "10-line",
            "2.5GB",
            "0-9a-f",
            "A-Za-z0-9_",
        ] {
            assert!(!is_identifier(quantity), "{quantity}");
        }
        for name in ["4d5611e5", "v2-api", "x86_64", "sha256", "en-US"] {
            assert!(is_identifier(name), "{name}");
        }
        assert!(mentions(
            "see lib/foo_web/live/session_live.ex",
            "/home/u/app/lib/foo_web/live/session_live.ex"
        ));
        assert_eq!(function_of("with_span/3"), Some("with_span"));
        assert_eq!(function_of("Tracer.with_span/4"), Some("Tracer.with_span"));
        for not in ["setup/1", "lib/a.ex", "4xx/5xx", "with_span/x"] {
            assert_eq!(function_of(not), None, "{not}");
        }
        assert!(!mentions(
            "see session_live.ex",
            "/home/u/app/lib/foo_web/live/session_live.ex"
        ));
    }
}
