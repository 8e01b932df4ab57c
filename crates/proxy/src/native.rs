//! Histories the provider keeps or compacts itself: abridge forwards them
//! as sent, and these say when.

use abridge::model::{Conversation, Part};

/// How the provider summarizes this conversation itself, if it does: a
/// compaction entry in `context_management` (Anthropic's `compact_*` edit,
/// the Responses API's `{"type": "compaction", "compact_threshold": …}`), or
/// compaction blocks or items already in the history. Context *editing*
/// (`clear_tool_uses_*`, `clear_thinking_*`) is not that: it clears what
/// abridge leaves, after abridge rewrote the history, and the two work side
/// by side.
pub(crate) fn provider_compaction(conv: &Conversation) -> Option<&'static str> {
    let management = conv.extra.get("context_management");
    // Anthropic lists its edits under `edits`; the Responses API lists entries.
    let entries = management
        .and_then(|c| c.get("edits"))
        .or(management)
        .and_then(serde_json::Value::as_array);
    let compacts = entries.into_iter().flatten().any(|e| {
        e.get("type")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|t| t.starts_with("compact"))
    });
    if compacts {
        return Some("context_management compaction");
    }
    conv.messages
        .iter()
        .flat_map(|m| &m.parts)
        .any(is_compaction_block)
        .then_some("compaction items in the history")
}

/// The field by which a request leans on a history the provider stores,
/// if it does: a Responses request's `previous_response_id` or
/// `conversation` (turns the server holds and continues, which abridge
/// neither sees nor may rewrite).
pub(crate) fn server_state(conv: &Conversation) -> Option<&'static str> {
    ["previous_response_id", "conversation"]
        .into_iter()
        .find(|k| conv.extra.get(*k).is_some_and(|v| !v.is_null()))
}

/// The server-held content a Gemini request builds on (`cachedContent`,
/// e.g. `cachedContents/abc`): a prefix the server puts before the
/// request's own `contents`, which stay the request's and are compacted as
/// usual. The name passes through as sent; the cached tokens reach the
/// session's count through the usage the provider reports.
pub(crate) fn cached_content(conv: &Conversation) -> Option<&str> {
    conv.extra.get("cachedContent").and_then(|v| v.as_str())
}

/// An Anthropic `compaction` block, or a Responses `compaction` item.
pub(crate) fn is_compaction_block(p: &Part) -> bool {
    matches!(p, Part::Opaque(v) if v.get("type").and_then(|t| t.as_str()) == Some("compaction"))
}
