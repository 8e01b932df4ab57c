//! One module per page.

pub(crate) mod compaction;
pub(crate) mod savings;
pub(crate) mod session;
pub(crate) mod sessions;
