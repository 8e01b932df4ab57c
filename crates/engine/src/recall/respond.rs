//! The recall tool's answer to one call: the original in pages when it is
//! large, a search's matches when it names no handle, an error that says
//! what to do when the call is malformed or the handle unknown.

use std::sync::Arc;

use super::answer::{Answer, RecallInput};
use super::handle::Handle;
use super::original::{Original, Piece};

/// A text chunk or an image, as pages are cut.
const IMAGE_CHARS: usize = 1_000;

/// Answers a call of the tool named `tool` with `input` (its parsed
/// arguments, or what was wrong with them), given the original `lookup`
/// finds for a handle, with pages of at most `page_chars` characters of
/// text. A query searches the originals of `searchable` (newest last).
pub fn answer(
    tool: &str,
    input: Result<RecallInput, String>,
    mut lookup: impl FnMut(&Handle) -> Option<Arc<Original>>,
    searchable: &[Handle],
    page_chars: usize,
) -> Answer {
    let input = match input {
        Ok(i) => i,
        Err(why) => return Answer::error(None, format!("{tool} {why}")),
    };
    let page = input.page.unwrap_or(1);
    let Some(asked) = input.handle else {
        let query = input.query.unwrap_or_default();
        let originals = searchable.iter().rev().filter_map(&mut lookup);
        return super::search::search(tool, &query, page, originals, page_chars);
    };
    let Some(handle) = Handle::parse(&asked) else {
        return Answer::error(
            None,
            format!(
                "{tool}: {asked:?} is not a handle. Handles are abr_ and ten letters and digits; they are written in \
                 clipped placeholders and in the briefing's list of recallable originals. To look for a name \
                 instead, pass it as \"query\"."
            ),
        );
    };
    let Some(original) = lookup(&handle) else {
        return Answer::error(
            Some(handle.clone()),
            format!(
                "{tool}: no original is kept for {handle}: the handle is unknown or its original \
                 has expired. Work from the briefing and the current state of the files instead."
            ),
        );
    };
    let pages = paginate(&original.pieces, page_chars.max(1));
    let n = pages.len().max(1);
    if page == 0 || page > n {
        return Answer::error(
            Some(handle.clone()),
            format!("{tool}: {handle} has {n} page(s); page {page} does not exist."),
        );
    }
    let body: Vec<Piece> = pages.into_iter().nth(page - 1).unwrap_or_default();
    let bytes = body
        .iter()
        .map(|p| match p {
            Piece::Text { text } => text.len(),
            Piece::Image { url } => url.len(),
        })
        .sum();
    let header = page_header(tool, &handle, &original, (page, n));
    let mut pieces = vec![Piece::Text { text: header }];
    pieces.extend(body);
    Answer {
        handle: Some(handle),
        pieces,
        is_error: false,
        page,
        pages: n,
        bytes,
    }
}

/// What a page of an original begins with: its handle, label and size,
/// and when there are more pages, which this is and how to get the next.
fn page_header(
    tool: &str,
    handle: &Handle,
    original: &Original,
    (page, n): (usize, usize),
) -> String {
    if n == 1 {
        format!(
            "[{handle} · {} · the original, {} bytes]",
            original.label,
            original.bytes()
        )
    } else {
        let next = if page < n {
            format!("; call {tool} with \"page\": {} for the next", page + 1)
        } else {
            "; this is the last page".to_owned()
        };
        format!(
            "[{handle} · {} · the original, {} bytes · page {page} of {n}{next}]",
            original.label,
            original.bytes()
        )
    }
}

/// The original's pieces cut into pages of at most `chars` characters of
/// text (an image counts as [`IMAGE_CHARS`]); text is cut at line ends when
/// one is near.
fn paginate(pieces: &[Piece], chars: usize) -> Vec<Vec<Piece>> {
    let mut pages: Vec<Vec<Piece>> = vec![Vec::new()];
    let mut room = chars;
    for p in pieces {
        match p {
            Piece::Image { .. } => {
                if room < IMAGE_CHARS && !pages.last().is_some_and(Vec::is_empty) {
                    pages.push(Vec::new());
                    room = chars;
                }
                if let Some(pg) = pages.last_mut() {
                    pg.push(p.clone());
                }
                room = room.saturating_sub(IMAGE_CHARS);
            }
            Piece::Text { text } => {
                let mut rest = text.as_str();
                while !rest.is_empty() {
                    if room == 0 {
                        pages.push(Vec::new());
                        room = chars;
                    }
                    let cut = cut_at(rest, room);
                    let (this, next) = rest.split_at(cut);
                    if let Some(pg) = pages.last_mut() {
                        pg.push(Piece::Text { text: this.into() });
                    }
                    room -= this.chars().count().min(room);
                    rest = next;
                    if !rest.is_empty() {
                        room = 0;
                    }
                }
            }
        }
    }
    pages.retain(|p| !p.is_empty());
    pages
}

/// Byte index to cut `text` at so the first part has at most `chars`
/// characters: the last line end in its final fifth when there is one.
fn cut_at(text: &str, chars: usize) -> usize {
    let Some((end, _)) = text.char_indices().nth(chars) else {
        return text.len();
    };
    let floor = text[..end]
        .char_indices()
        .nth(chars * 4 / 5)
        .map_or(0, |(i, _)| i);
    match text[floor..end].rfind('\n') {
        Some(nl) => floor + nl + 1,
        None => end,
    }
}

#[cfg(test)]
mod tests {
    use super::super::original::OriginalKind;
    use super::*;
    use serde_json::json;

    fn original(text: &str) -> Arc<Original> {
        Arc::new(Original::new(
            OriginalKind::ToolResult,
            "Read src/a.rs".into(),
            vec![Piece::Text { text: text.into() }],
        ))
    }

    fn call(handle: &str, page: Option<usize>) -> Result<RecallInput, String> {
        Ok(RecallInput {
            handle: Some(handle.into()),
            query: None,
            page,
        })
    }

    #[test]
    fn a_small_original_comes_whole() {
        let o = original("fn main() {}\n");
        let a = answer(
            "abridge_recall",
            call(o.handle.as_str(), None),
            |_| Some(o.clone()),
            &[],
            100,
        );
        assert!(!a.is_error);
        assert_eq!((a.page, a.pages), (1, 1));
        assert!(
            a.text()
                .starts_with(&format!("[{} · Read src/a.rs", o.handle))
        );
        assert!(a.text().ends_with("fn main() {}\n"));
    }

    #[test]
    fn a_large_original_comes_in_pages_that_join_back() {
        let text: String = (0..200)
            .map(|i| format!("line {i} of the file\n"))
            .collect();
        let o = original(&text);
        let first = answer(
            "r",
            call(o.handle.as_str(), None),
            |_| Some(o.clone()),
            &[],
            1000,
        );
        assert!(first.pages > 1);
        assert!(first.text().contains(&format!("page 1 of {}", first.pages)));
        assert!(first.text().contains("\"page\": 2 for the next"));
        let mut joined = String::new();
        for page in 1..=first.pages {
            let a = answer(
                "r",
                call(o.handle.as_str(), Some(page)),
                |_| Some(o.clone()),
                &[],
                1000,
            );
            assert!(!a.is_error);
            let body: String = a.pieces[1..]
                .iter()
                .map(|p| match p {
                    Piece::Text { text } => text.clone(),
                    Piece::Image { .. } => String::new(),
                })
                .collect();
            assert!(body.chars().count() <= 1000);
            joined.push_str(&body);
        }
        assert_eq!(joined, text);
        let past = answer(
            "r",
            call(o.handle.as_str(), Some(99)),
            |_| Some(o.clone()),
            &[],
            1000,
        );
        assert!(past.is_error && past.text().contains("does not exist"));
    }

    #[test]
    fn unknown_handles_and_bad_calls_say_what_to_do() {
        let a = answer("r", call("abr_zzzzzzzzzz", None), |_| None, &[], 1000);
        assert!(a.is_error && a.text().contains("unknown or its original has expired"));
        let a = answer("r", call("src/a.rs", None), |_| None, &[], 1000);
        assert!(a.is_error && a.text().contains("is not a handle"));
        let a = answer(
            "r",
            RecallInput::parse(&json!({"path": "x"})),
            |_| None,
            &[],
            1000,
        );
        assert!(
            a.is_error && a.text().contains("neither was given"),
            "{}",
            a.text()
        );
        let a = answer(
            "r",
            RecallInput::parse(&json!({"handle": 3})),
            |_| None,
            &[],
            1000,
        );
        assert!(
            a.is_error && a.text().contains("takes {\"handle\""),
            "{}",
            a.text()
        );
    }
}
