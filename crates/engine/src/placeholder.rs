//! The fixed texts that replace clipped content.
//!
//! They are deterministic (no timestamps, no turn numbers) so that a compacted
//! prefix is byte-identical from one turn to the next and stays in the
//! provider's prompt cache, and they are recognised again so that compaction
//! is idempotent and chains (a later drop adds to the earlier count).

use abridge_model::Arguments;

use crate::recall::Handle;

/// What a clipped `<EXTERNAL-CONTENT …>` block's body says.
const EXTERNAL_NOTE: &str = "clipped for brevity";

/// What replaces an old image.
const IMAGE_NOTE: &str = "image clipped for brevity";

/// What replaces an old tool result.
const RESULT_NOTE: &str = "tool result clipped for brevity";

/// Marker inside the JSON that replaces old tool-call arguments.
pub const ARGS_NOTE: &str = "arguments clipped for brevity";

/// Key of the JSON object that replaces old tool-call arguments.
pub const ARGS_KEY: &str = "_abridged";

/// The arguments placeholder saying `note`, as JSON text (valid JSON, so
/// every API accepts it).
pub fn args_json(note: &str, handle: Option<&Handle>) -> String {
    let mut m = serde_json::Map::new();
    m.insert(ARGS_KEY.into(), with_handle(note, handle).into());
    serde_json::Value::Object(m).to_string()
}

/// `text; recall abr_…` when there is a handle, else `text`: how every
/// placeholder names its original.
pub fn with_handle(text: &str, handle: Option<&Handle>) -> String {
    match handle {
        Some(h) => format!("{text}; recall {h}"),
        None => text.to_owned(),
    }
}

/// `text` with the handles of `named` it names taken out, as the
/// placeholders say it without recall; `None` when it names none of them.
pub fn unnamed(text: &str, named: &std::collections::HashSet<&Handle>) -> Option<String> {
    let mut out: Option<String> = None;
    for h in Handle::find_all(text).filter(|h| named.contains(h)) {
        let t = out.get_or_insert_with(|| text.to_owned());
        // An excerpt's header says what the handle is for.
        for said in [
            format!("; recall {h} for all of it"),
            format!("; recall {h}"),
        ] {
            *t = t.replace(&said, "");
        }
    }
    out
}

/// Whether `text` opens with `[note`, as the placeholder [`bracketed`]
/// makes of `note` does (read on every result a compaction walks: no
/// allocation).
fn opens(text: &str, note: &str) -> bool {
    text.strip_prefix('[').is_some_and(|t| t.starts_with(note))
}

/// `[text; recall abr_…]`.
fn bracketed(text: &str, handle: Option<&Handle>) -> String {
    format!("[{}]", with_handle(text, handle))
}

/// Placeholder for an old tool result.
pub fn result(handle: Option<&Handle>) -> String {
    bracketed(RESULT_NOTE, handle)
}

/// Placeholder for a failed tool result: keeps its first line.
pub fn failed_result(first_line: &str, handle: Option<&Handle>) -> String {
    let cut = abridge_model::text::clip(first_line.trim(), 300, 0);
    bracketed(&format!("{RESULT_NOTE}; it failed: {cut}"), handle)
}

/// Placeholder for an old read of `path` that a later read supersedes
/// (a result placeholder, so clipping leaves it as it is).
pub fn superseded(path: &str, handle: Option<&Handle>) -> String {
    let path = abridge_model::text::clip(path, 200, 60);
    bracketed(&format!("{RESULT_NOTE}: {path}{SUPERSEDED_NOTE}"), handle)
}

/// Placeholder for an old image.
pub fn image(handle: Option<&Handle>) -> String {
    bracketed(IMAGE_NOTE, handle)
}

/// Body left inside a clipped wrapped block.
pub fn external_body(handle: Option<&Handle>) -> String {
    format!("> {}", bracketed(EXTERNAL_NOTE, handle))
}

/// True for a body [`external_body`] wrote.
pub fn is_external_body(body: &str) -> bool {
    body.trim()
        .strip_prefix("> ")
        .is_some_and(|b| opens(b, EXTERNAL_NOTE))
}

/// False when `text` holds no body [`external_body`] wrote (a quick test:
/// true does not say it does, but a clipped result's or image's note,
/// which says the same words, does not make it true).
pub fn may_hold_external_body(text: &str) -> bool {
    text.match_indices(EXTERNAL_NOTE)
        .any(|(at, _)| text[..at].ends_with("> ["))
}

/// What heads the excerpt of a wrapped block's body given back.
const BLOCK_EXCERPT_NOTE: &str = "excerpt of this block";

/// `[excerpt of this block: N lines, …; recall abr_… for all of it]`.
pub fn block_excerpt_header(lines: usize, handle: &Handle) -> String {
    format!(
        "[{BLOCK_EXCERPT_NOTE}: {lines} lines, the lines cut said; recall {handle} for all of it]"
    )
}

/// The handle of a block body [`block_excerpt_header`] headed, if `body`
/// is one.
pub fn block_excerpt_handle(body: &str) -> Option<Handle> {
    let body = body.trim_start();
    opens(body, BLOCK_EXCERPT_NOTE)
        .then(|| handle_in(body))
        .flatten()
}

/// True for any tool-result placeholder.
pub fn is_result_placeholder(text: &str) -> bool {
    opens(text, RESULT_NOTE)
}

/// Placeholder for a result that a later result (of call `later`)
/// repeats word for word: the content is still in the history.
pub fn repeated(later: &str) -> String {
    let later = abridge_model::text::clip(later, 120, 0);
    bracketed(
        &format!("{RESULT_NOTE}: same as call {later}'s, later"),
        None,
    )
}

/// How a read that a later read supersedes says so ([`superseded`]).
const SUPERSEDED_NOTE: &str = " is read again later";

/// True for a placeholder [`superseded`] wrote.
pub fn is_superseded(text: &str) -> bool {
    is_result_placeholder(text)
        && text
            .split_once(';')
            .map_or(text, |(before, _)| before)
            .trim_end_matches(']')
            .ends_with(SUPERSEDED_NOTE)
}

/// The handle a placeholder's first line names (`…; recall abr_…]`).
pub fn handle_in(text: &str) -> Option<Handle> {
    let line = text.lines().next()?;
    let (_, rest) = line.split_once("; recall ")?;
    let end = rest
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(rest.len());
    Handle::parse(&rest[..end])
}

/// True for arguments that clipping replaced ([`args_json`], or a custom
/// tool's bracketed note).
pub fn is_args_placeholder(a: &Arguments) -> bool {
    match a {
        Arguments::Json(s) => s.contains(&format!("\"{ARGS_KEY}\"")),
        Arguments::Value(v) => v.get(ARGS_KEY).is_some(),
        Arguments::Custom(s) => s.contains(ARGS_NOTE),
    }
}

/// The handle clipped arguments name, when `a` is their placeholder.
pub fn args_handle(a: &Arguments) -> Option<Handle> {
    if !is_args_placeholder(a) {
        return None;
    }
    let note = |v: &serde_json::Value| v.get(ARGS_KEY)?.as_str().and_then(handle_in);
    match a {
        Arguments::Json(s) => note(&serde_json::from_str(s).ok()?),
        Arguments::Value(v) => note(v),
        Arguments::Custom(s) => handle_in(s),
    }
}

/// What heads a newest result cut to fit the window.
const CUT_NOTE: &str = "tool result cut to fit the context window";

/// `[tool result cut to fit the context window: its first and last K of N
/// characters; recall abr_…]`: what heads a result cut to `keep` of its
/// `len` characters.
pub fn cut_header(keep: usize, len: usize, handle: Option<&Handle>) -> String {
    bracketed(
        &format!("{CUT_NOTE}: its first and last {keep} of {len} characters"),
        handle,
    )
}

/// True for a result [`cut_header`] heads.
pub fn is_cut_result(text: &str) -> bool {
    opens(text, CUT_NOTE)
}

/// What heads an excerpt of a result given back into a compaction's room.
const EXCERPT_NOTE: &str = "excerpt of a tool result";

/// `[excerpt of a tool result of N lines, the lines cut said; recall
/// abr_… for all of it]`.
pub fn excerpt_header(lines: usize, handle: &Handle) -> String {
    format!("[{EXCERPT_NOTE} of {lines} lines, the lines cut said; recall {handle} for all of it]")
}

/// The handle of an excerpt [`excerpt_header`] headed, if `text` is one.
pub fn excerpt_handle(text: &str) -> Option<Handle> {
    opens(text, EXCERPT_NOTE).then(|| handle_in(text)).flatten()
}

/// `[N earlier iterations omitted; recall abr_…]`.
pub fn iterations(n: usize, handle: Option<&Handle>) -> String {
    let text = if n == 1 {
        "1 earlier iteration omitted".to_owned()
    } else {
        format!("{n} earlier iterations omitted")
    };
    bracketed(&text, handle)
}

/// The count in an iterations placeholder, if `text` is one.
pub fn parse_iterations(text: &str) -> Option<usize> {
    let rest = text.strip_prefix('[')?.strip_suffix(']')?;
    let (n, tail) = rest.split_once(' ')?;
    let tail = match tail.split_once("; recall ") {
        Some((t, h)) if Handle::parse(h).is_some() => t,
        Some(_) => return None,
        None => tail,
    };
    matches!(
        tail,
        "earlier iteration omitted" | "earlier iterations omitted"
    )
    .then(|| n.parse().ok())
    .flatten()
}

/// `[3 earlier feedback messages clipped: 2 validation rejections, 1 step error]`.
pub fn feedback(counts: &[(&str, usize)]) -> String {
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    let parts: Vec<String> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| {
            if *n == 1 {
                format!("1 {name}")
            } else {
                format!("{n} {name}s")
            }
        })
        .collect();
    let noun = if total == 1 { "message" } else { "messages" };
    format!(
        "[{total} earlier feedback {noun} clipped: {}]",
        parts.join(", ")
    )
}

/// True for a feedback placeholder.
pub fn is_feedback_placeholder(text: &str) -> bool {
    text.starts_with('[') && text.contains(" earlier feedback message")
}

/// The per-kind counts of a feedback placeholder, by kind name (singular),
/// or `None` when `text` is not one.
pub fn parse_feedback(text: &str) -> Option<Vec<(String, usize)>> {
    if !is_feedback_placeholder(text) {
        return None;
    }
    let (_, list) = text.strip_suffix(']')?.split_once(": ")?;
    list.split(", ")
        .map(|item| {
            let (n, name) = item.split_once(' ')?;
            let n: usize = n.parse().ok()?;
            let name = if n == 1 {
                name
            } else {
                name.strip_suffix('s').unwrap_or(name)
            };
            Some((name.to_owned(), n))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_clipped_blocks_body_may_hold_one() {
        let h = Handle::parse("abr_0123456789abcdef").expect("a handle");
        let block = format!(
            "<EXTERNAL-CONTENT>\n{}\n</EXTERNAL-CONTENT>",
            external_body(Some(&h))
        );
        assert!(may_hold_external_body(&block));
        assert!(may_hold_external_body(&external_body(None)));
        for other in [
            result(Some(&h)),
            image(Some(&h)),
            failed_result("exit status 1", None),
            args_json(ARGS_NOTE, Some(&h)),
        ] {
            assert!(!may_hold_external_body(&other), "{other}");
        }
    }
}
