//! The proxy's errors.

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop the proxy from starting or serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work.
    #[error("config: {0}")]
    Config(String),
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {cause}")]
    Listen {
        /// Address.
        addr: String,
        /// Cause.
        cause: std::io::Error,
    },
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(String),
    /// The session store failed.
    #[error(transparent)]
    Store(#[from] abridge_store::Error),
    /// Serving stopped with an I/O error.
    #[error("serving: {0}")]
    Serve(std::io::Error),
}
