//! The recall tool's search: a name or a phrase looked for in every
//! original a conversation's compactions kept, answered with the lines
//! that hold it, each under the handle of its original, in pages. A name
//! seen only inside a clipped result is one call away even when nothing
//! says which handle holds it.

use std::sync::Arc;

use super::answer::Answer;
use super::handle::Handle;
use super::original::{Original, Piece};

/// Most matching lines listed per original (the rest are counted).
const LINES_PER_ORIGINAL: usize = 12;

/// Longest a listed line is, in characters (cut in its middle).
const LINE_CHARS: usize = 300;

/// One original's matches.
struct Hit {
    handle: Handle,
    label: String,
    /// Line numbers (1-based) and lines.
    lines: Vec<(usize, String)>,
    /// Matching lines not listed.
    more: usize,
}

/// Answers a search for `query` over `originals` (newest first), the page
/// `page` of pages of at most `page_chars` characters.
pub(crate) fn search(
    tool: &str,
    query: &str,
    page: usize,
    originals: impl Iterator<Item = Arc<Original>>,
    page_chars: usize,
) -> Answer {
    let query = query.trim();
    if query.is_empty() {
        return Answer::error(
            None,
            format!("{tool}: the query is empty; give a name or a phrase."),
        );
    }
    let hits: Vec<Hit> = originals.filter_map(|o| hit(&o, query)).collect();
    if hits.is_empty() {
        return Answer::error(
            None,
            format!(
                "{tool}: no original kept from this conversation holds {query:?}. Work from the \
                 briefing and the current state of the files."
            ),
        );
    }
    let lines: usize = hits.iter().map(|h| h.lines.len() + h.more).sum();
    let blocks: Vec<String> = hits.iter().map(render).collect();
    let pages = paginate(&blocks, page_chars.max(1));
    let n = pages.len();
    if page == 0 || page > n {
        return Answer::error(
            None,
            format!(
                "{tool}: the search for {query:?} has {n} page(s); page {page} does not exist."
            ),
        );
    }
    let next = match page < n {
        true => format!(
            "; call {tool} with the same query and \"page\": {} for the next",
            page + 1
        ),
        false => String::new(),
    };
    let header = format!(
        "[{tool} search for {query:?}: {lines} matching line(s) in {} original(s) · page {page} \
         of {n}{next}; recall a handle for its whole original]",
        hits.len()
    );
    let body = pages.into_iter().nth(page - 1).unwrap_or_default();
    let bytes = body.len();
    Answer {
        handle: None,
        pieces: vec![Piece::Text {
            text: format!("{header}\n{body}"),
        }],
        is_error: false,
        page,
        pages: n,
        bytes,
    }
}

/// The lines of `o` that hold `query`: as written, else ignoring case,
/// else (a phrase) holding each of its words.
fn hit(o: &Original, query: &str) -> Option<Hit> {
    let lower = query.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let mut lines = Vec::new();
    let mut more = 0;
    let mut n = 0;
    for p in &o.pieces {
        let Piece::Text { text } = p else { continue };
        for line in text.lines() {
            n += 1;
            let matches = line.contains(query) || {
                let l = line.to_lowercase();
                l.contains(&lower) || (words.len() > 1 && words.iter().all(|w| l.contains(w)))
            };
            if !matches {
                continue;
            }
            match lines.len() < LINES_PER_ORIGINAL {
                true => lines.push((n, abridge_model::text::clip(line.trim(), LINE_CHARS, 80))),
                false => more += 1,
            }
        }
    }
    (!lines.is_empty()).then(|| Hit {
        handle: o.handle.clone(),
        label: o.label.clone(),
        lines,
        more,
    })
}

/// One original's block: its handle and label, then its lines.
fn render(h: &Hit) -> String {
    let mut out = format!(
        "{} · {}\n",
        h.handle,
        abridge_model::text::clip(&h.label, 160, 0)
    );
    for (n, line) in &h.lines {
        out.push_str(&format!("  {n}: {line}\n"));
    }
    if h.more > 0 {
        out.push_str(&format!(
            "  … {} more matching line(s): recall {}\n",
            h.more, h.handle
        ));
    }
    out
}

/// Blocks gathered into pages of at most `chars` characters (a block
/// larger than a page is a page of its own, cut).
fn paginate(blocks: &[String], chars: usize) -> Vec<String> {
    let mut pages = vec![String::new()];
    for b in blocks {
        let last = pages.last().map_or(0, |p: &String| p.chars().count());
        if last > 0 && last + b.chars().count() > chars {
            pages.push(String::new());
        }
        if let Some(p) = pages.last_mut() {
            p.push_str(&abridge_model::text::clip(b, chars.max(1), 0));
        }
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recall::OriginalKind;

    fn original(handle: &str, label: &str, text: &str) -> Arc<Original> {
        Arc::new(Original {
            handle: Handle::parse(handle).unwrap(),
            kind: OriginalKind::ToolResult,
            label: label.into(),
            pieces: vec![Piece::Text { text: text.into() }],
        })
    }

    #[test]
    fn a_search_lists_the_lines_that_hold_the_query_under_their_handles() {
        let all = [
            original(
                "abr_aaaaaaaaaa",
                "read_file src/pay.rs",
                "fn a() {}\nlet id = \"PAY-4821\";\nother",
            ),
            original("abr_bbbbbbbbbb", "lookup payments", "nothing here"),
            original(
                "abr_cccccccccc",
                "get_booking",
                "Booking ZX91 paid with pay-4821",
            ),
        ];
        let a = search("abridge_recall", "PAY-4821", 1, all.iter().cloned(), 24_000);
        assert!(!a.is_error);
        let text = a.text();
        assert!(
            text.contains("2 matching line(s) in 2 original(s)"),
            "{text}"
        );
        assert!(
            text.contains("abr_aaaaaaaaaa · read_file src/pay.rs\n  2: let id = \"PAY-4821\";")
        );
        assert!(
            text.contains("abr_cccccccccc · get_booking"),
            "ignoring case"
        );
        assert!(!text.contains("abr_bbbbbbbbbb"));
        // A phrase whose words are on one line, apart.
        let a = search(
            "abridge_recall",
            "booking paid",
            1,
            all.iter().cloned(),
            24_000,
        );
        assert!(a.text().contains("abr_cccccccccc"));
        let none = search("abridge_recall", "QQQ-000", 1, all.iter().cloned(), 24_000);
        assert!(none.is_error && none.text().contains("no original"));
    }

    #[test]
    fn many_matches_come_in_pages_and_each_original_is_bounded() {
        let text: String = (0..100).map(|i| format!("row {i} token_x\n")).collect();
        let all: Vec<_> = (0..30)
            .map(|k| original(&format!("abr_{k:010}"), "dump", &text))
            .collect();
        let first = search("abridge_recall", "token_x", 1, all.iter().cloned(), 2_000);
        assert!(first.pages > 1, "{}", first.pages);
        assert!(first.text().contains("88 more matching line(s)"));
        assert!(first.text().contains("\"page\": 2"));
        let last = search(
            "abridge_recall",
            "token_x",
            first.pages,
            all.iter().cloned(),
            2_000,
        );
        assert!(!last.is_error && !last.text().contains("for the next"));
        assert!(search("abridge_recall", "token_x", 99, all.iter().cloned(), 2_000).is_error);
    }
}
