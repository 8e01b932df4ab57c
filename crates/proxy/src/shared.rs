//! What every request shares: the proxy's state, built once at start.

use std::sync::Arc;

use abridge::Cancel;

use crate::config::ProxyConfig;
use crate::engines::Engines;
use crate::forward::Upstream;
use crate::metrics::Metrics;
use crate::prepare::Context;
use crate::route::Passthroughs;
use crate::session::Sessions;
use crate::store::SharedStore;
use crate::tenant::Secret;

/// Shared by every request.
pub(crate) struct App {
    pub(crate) config: ProxyConfig,
    /// Room for the bodies being compacted.
    pub(crate) budget: crate::budget::Budget,
    /// Room for the bodies held, from their first byte until forwarded.
    pub(crate) receiving: crate::budget::Budget,
    /// The connections reading a body now, for that room.
    pub(crate) readers: crate::listen::Readers,
    pub(crate) upstream: Upstream,
    pub(crate) sessions: Sessions,
    pub(crate) engines: Engines,
    pub(crate) store: Option<SharedStore>,
    pub(crate) metrics: Arc<Metrics>,
    /// Where request spans go (nowhere unless configured).
    pub(crate) telemetry: crate::telemetry::Telemetry,
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) secret: Secret,
    pub(crate) passthroughs: Passthroughs,
    /// Set once the tokenizer tables the proxy counts with are built
    /// (at start-up, off the request path): how long that took.
    pub(crate) warmed: std::sync::OnceLock<std::time::Duration>,
}

impl App {
    pub(crate) fn context<'a>(&'a self, cancel: &'a Cancel) -> Context<'a> {
        Context {
            config: &self.config,
            sessions: &self.sessions,
            engines: &self.engines,
            store: self.store.as_ref(),
            metrics: &self.metrics,
            handle: &self.handle,
            secret: &self.secret,
            cancel,
        }
    }
}
