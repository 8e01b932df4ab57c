//! The tag around a briefing: it marks the text as external content for
//! the model, and lets a later compaction find and absorb it.

/// Default tag wrapped around a briefing: it marks the text as external
/// content for the model, and lets a later compaction find and absorb it.
pub const DEFAULT_WRAPPER: &str = "compacted-history";

/// `text` with the wrapper's tags defused (`<tag` → `‹tag`), so quoted
/// history can never open or close a briefing.
pub fn defuse(tag: &str, text: &str) -> String {
    text.replace(&format!("</{tag}"), &format!("‹/{tag}"))
        .replace(&format!("<{tag}"), &format!("‹{tag}"))
}

/// `<tag>\nbody\n</tag>`.
pub fn wrap(tag: &str, body: &str) -> String {
    format!("<{tag}>\n{}\n</{tag}>", body.trim())
}

/// The body of a wrapped briefing, if `text` is one.
pub fn unwrap<'a>(tag: &str, text: &'a str) -> Option<&'a str> {
    let body = text.trim().strip_prefix(&format!("<{tag}>"))?;
    Some(body.strip_suffix(&format!("</{tag}>"))?.trim())
}

/// True when `text` contains an opening or closing wrapper tag.
pub fn leaks_wrapper(tag: &str, text: &str) -> bool {
    text.contains(&format!("<{tag}")) || text.contains(&format!("</{tag}>"))
}
