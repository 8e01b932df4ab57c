//! Anthropic prompt-cache breakpoints in a rewritten request.
//!
//! The kept messages keep the `cache_control` markers the client put on
//! them, byte for byte. A rewrite can still leave more markers than the API
//! accepts (a carried prefix plus the client's newest ones), which the API
//! refuses: the oldest message markers go first, so the newest — the ones
//! that reach furthest into the cached prefix — stay. Markers only say
//! where to cache; the cached content is the same without them.

use abridge::model::{CACHE_CONTROL, Conversation, Family, Part, Tool};
use serde_json::Value;

/// Most `cache_control` blocks the Anthropic API accepts in one request.
pub(crate) const MAX_BREAKPOINTS: usize = 4;

/// Removes the oldest message breakpoints beyond [`MAX_BREAKPOINTS`];
/// returns how many were removed.
pub(crate) fn cap_breakpoints(conv: &mut Conversation) -> usize {
    if conv.family != Family::Anthropic {
        return 0;
    }
    let tools = conv
        .tools
        .iter()
        .flatten()
        .filter(|t| match t {
            Tool::Function(f) => f.extra.contains_key(CACHE_CONTROL),
            Tool::Opaque(v) => v.get(CACHE_CONTROL).is_some(),
        })
        .count();
    let in_messages: usize = conv
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| usize::from(marker(p).is_some()))
        .sum();
    let mut excess = (tools + in_messages).saturating_sub(MAX_BREAKPOINTS);
    let removed = excess;
    // System prompts sit first; their markers are the last to go.
    let order = conv
        .messages
        .iter_mut()
        .filter(|m| m.role != abridge::model::Role::System)
        .flat_map(|m| m.parts.iter_mut());
    for part in order {
        if excess == 0 {
            break;
        }
        if remove_marker(part) {
            excess -= 1;
        }
    }
    removed - excess
}

fn marker(part: &Part) -> Option<&Value> {
    match part {
        Part::Opaque(v) => v.get(CACHE_CONTROL),
        other => other.extra().and_then(|e| e.get(CACHE_CONTROL)),
    }
}

fn remove_marker(part: &mut Part) -> bool {
    match part {
        Part::Opaque(v) => v
            .as_object_mut()
            .is_some_and(|map| map.remove(CACHE_CONTROL).is_some()),
        other => other
            .extra_mut()
            .is_some_and(|e| e.remove(CACHE_CONTROL).is_some()),
    }
}
