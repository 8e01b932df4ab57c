//! Nothing clipped is lost: every placeholder and every briefing names the
//! original it replaced by a [`Handle`], the originals are kept (the
//! snapshot store, or an [`OriginalCache`] in memory), the briefing lists
//! what it replaced in an index, and the recall tool ([`RecallTool`],
//! [`answer`]) gives the model the original back.

mod answer;
mod cache;
mod handle;
pub(crate) mod index;
mod original;
mod respond;
mod search;

use std::borrow::Borrow;
use std::collections::HashMap;

use abridge_model::{Message, Part, ToolCall};

pub use answer::{Answer, RecallInput, RecallTool};
pub use cache::OriginalCache;
pub use handle::{Handle, HandleKey};
pub use original::{Admission, Original, OriginalKind, Piece, RecallScope, StoredOriginal};
pub use respond::answer;

/// A briefing's text and its index of recallable originals (the index is
/// always last), when it has one.
pub fn split_index(briefing: &str) -> (&str, Option<&str>) {
    index::split(briefing)
}

/// What the clipping policies collect as they replace content, when
/// recall is on (off: placeholders carry no handle).
pub(crate) struct Found<'a> {
    /// The recall tool, when recall is on: its results are never clipped
    /// again.
    pub(crate) tool: Option<&'a str>,
    pub(crate) originals: &'a mut Vec<Original>,
    /// The history as the compaction got it: a result an earlier step
    /// already clipped in part is kept as it was there.
    pub(crate) input: &'a [Message],
    /// The key handles are derived with (a shared proxy's tenant).
    pub(crate) key: Option<&'a HandleKey>,
}

/// The call each tool result answers, by the result's place (message,
/// part): the latest call with its id before it. A run may reuse an id
/// across steps (recorded OpenAI runs do), so an id alone does not name one
/// call.
pub(crate) fn answered_calls<M: Borrow<Message>>(
    messages: &[M],
) -> HashMap<(usize, usize), &ToolCall> {
    let mut latest = HashMap::new();
    let mut out = HashMap::new();
    for (i, m) in messages.iter().map(M::borrow).enumerate() {
        for (j, p) in m.parts.iter().enumerate() {
            match p {
                Part::ToolCall(c) => {
                    latest.insert(c.id.as_str(), c);
                }
                Part::ToolResult(r) => {
                    if let Some(c) = latest.get(r.call_id.as_str()) {
                        out.insert((i, j), &***c);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Keeps `original` in `found` and returns its handle, when recall is on.
pub(crate) fn keep(
    found: &mut Option<Found<'_>>,
    original: impl FnOnce() -> Original,
) -> Option<Handle> {
    let found = found.as_mut()?;
    let o = original().scoped(found.key);
    let h = o.handle.clone();
    found.originals.push(o);
    Some(h)
}
