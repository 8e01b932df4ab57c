//! Errors of the front-end API, sorted into the kinds the packages raise.

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a call failed; the message names what and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input is not JSON.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The messages or body cannot be read (or written back).
    #[error("{0}")]
    Input(#[from] abridge_model::Error),
    /// An option or the config is wrong.
    #[error("{0}")]
    Options(String),
    /// The engine refused: bad config, a history that cannot shrink, or a
    /// rewrite it would not emit.
    #[error(transparent)]
    Engine(#[from] abridge::Error),
}

/// The kind of an [`Error`], one exception class per kind in the packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad messages, body or JSON.
    Input,
    /// Bad options or config.
    Config,
    /// What compaction may not touch is already over the target.
    CannotShrink,
    /// Any other refusal of the engine.
    Engine,
}

impl ErrorKind {
    /// The name of the error class in the packages (`InputError`…).
    pub fn class_name(self) -> &'static str {
        match self {
            ErrorKind::Input => "InputError",
            ErrorKind::Config => "ConfigError",
            ErrorKind::CannotShrink => "CannotShrinkError",
            ErrorKind::Engine => "EngineError",
        }
    }
}

impl Error {
    /// Which kind of error this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Json(_) | Error::Input(_) => ErrorKind::Input,
            Error::Options(_) | Error::Engine(abridge::Error::Config(_)) => ErrorKind::Config,
            Error::Engine(abridge::Error::CannotShrink { .. }) => ErrorKind::CannotShrink,
            Error::Engine(_) => ErrorKind::Engine,
        }
    }
}
