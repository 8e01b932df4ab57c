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

pub use answer::{Answer, RecallInput, RecallTool, answer};
pub use cache::OriginalCache;
pub use handle::Handle;
pub use original::{Original, OriginalKind, Piece};

/// A briefing's text and its index of recallable originals (the index is
/// always last), when it has one.
pub fn split_index(briefing: &str) -> (&str, Option<&str>) {
    index::split(briefing)
}

/// What the clipping policies collect as they replace content, when
/// recall is on (off: placeholders carry no handle).
pub(crate) struct Found<'a> {
    /// The recall tool: its results are never clipped again.
    pub(crate) tool: &'a str,
    pub(crate) originals: &'a mut Vec<Original>,
    /// The history as the compaction got it: a result an earlier step
    /// already clipped in part is kept as it was there.
    pub(crate) input: &'a [abridge_model::Message],
}

/// Keeps `original` in `found` and returns its handle, when recall is on.
pub(crate) fn keep(
    found: &mut Option<Found<'_>>,
    original: impl FnOnce() -> Original,
) -> Option<Handle> {
    let found = found.as_mut()?;
    let o = original();
    let h = o.handle.clone();
    found.originals.push(o);
    Some(h)
}
