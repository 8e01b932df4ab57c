//! The fixed texts that replace clipped content.
//!
//! They are deterministic (no timestamps, no turn numbers) so that a compacted
//! prefix is byte-identical from one turn to the next and stays in the
//! provider's prompt cache, and they are recognised again so that compaction
//! is idempotent and chains (a later drop adds to the earlier count).

/// Body left inside a clipped `<EXTERNAL-CONTENT …>` block.
pub const EXTERNAL_BODY: &str = "> [clipped for brevity]";

/// Text that replaces an old image.
pub const IMAGE: &str = "[image clipped for brevity]";

/// Text that replaces an old tool result.
pub const TOOL_RESULT: &str = "[tool result clipped for brevity]";

/// Marker inside the JSON that replaces old tool-call arguments.
pub const ARGS_NOTE: &str = "arguments clipped for brevity";

/// Key of the JSON object that replaces old tool-call arguments.
pub const ARGS_KEY: &str = "_abridged";

/// The arguments placeholder as JSON text (valid JSON, so every API accepts it).
pub fn args_json() -> String {
    format!("{{\"{ARGS_KEY}\":\"{ARGS_NOTE}\"}}")
}

/// Placeholder for a failed tool result: keeps its first line.
pub fn failed_result(first_line: &str) -> String {
    let cut = abridge_model::text::clip(first_line.trim(), 300, 0);
    format!("[tool result clipped for brevity; it failed: {cut}]")
}

/// True for any tool-result placeholder.
pub fn is_result_placeholder(text: &str) -> bool {
    text.starts_with("[tool result clipped for brevity")
}

/// `[N earlier iterations omitted]`.
pub fn iterations(n: usize) -> String {
    if n == 1 {
        "[1 earlier iteration omitted]".to_owned()
    } else {
        format!("[{n} earlier iterations omitted]")
    }
}

/// The count in an iterations placeholder, if `text` is one.
pub fn parse_iterations(text: &str) -> Option<usize> {
    let rest = text.strip_prefix('[')?;
    let (n, tail) = rest.split_once(' ')?;
    matches!(
        tail,
        "earlier iteration omitted]" | "earlier iterations omitted]"
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
