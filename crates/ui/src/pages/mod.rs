//! One module per page.

pub(crate) mod compaction;
pub(crate) mod session;
pub(crate) mod sessions;
