//! `abridge serve`: an HTTP proxy that speaks the OpenAI Chat Completions
//! and Responses APIs and Anthropic Messages and keeps every session's requests inside
//! its context window, with no change to the agent but its base URL.
//!
//! ```no_run
//! use abridge_proxy::{Proxy, ProxyConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = ProxyConfig::default();
//! config.serve.openai_upstream = "http://127.0.0.1:8000/v1".into();
//! let proxy = Proxy::new(config, None)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
//! proxy.serve(listener, std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! Per session (named by the `x-abridge-session` header, or by the start of
//! the conversation, under the tenant of its credential) the proxy carries the
//! last compaction over to the next request, so the compacted prefix goes
//! upstream byte-identical and the provider's prompt cache stays warm. A
//! request over the trigger is compacted before it is forwarded (offline
//! briefing and deterministic policies; LLM briefings are prepared in the
//! background from a soft threshold); anything the proxy does not
//! understand is forwarded as sent, and the upstream's answer streams back
//! chunk by chunk.

mod account;
mod app;
mod budget;
mod cache;
mod config;
mod engines;
mod error;
mod forward;
mod held;
mod host;
mod listen;
mod metrics;
mod native;
mod prepare;
mod prepared;
mod raw;
mod recall;
mod receive;
mod route;
mod session;
mod shared;
mod sse;
mod store;
mod telemetry;
mod tenant;
mod usage;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use abridge::tokens::TokenizerKind;
use abridge_store::SessionStore;

pub use config::{ProxyConfig, ServeConfig};
pub use error::{Error, Result};
pub use host::guard_host;
pub use telemetry::TelemetryConfig;

/// The book's chapter on the proxy (`docs/src/proxy.md`), as rustdoc.
#[doc = include_str!("../../../docs/src/proxy.md")]
pub mod book {}

/// Longest a stopping proxy waits for its queued store writes.
const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The name of the stored server secret.
const SECRET_SETTING: &str = "server_secret";

/// The server secret: the configured one, else the store's (made by the
/// first replica to open it), else one for this process alone (its
/// originals are in its memory only).
fn secret(
    serve: &ServeConfig,
    store: Option<&mut (dyn SessionStore + 'static)>,
) -> Result<tenant::Secret> {
    if let Some(text) = &serve.secret {
        return Ok(tenant::Secret::from_text(text));
    }
    let fresh = tenant::Secret::random().map_err(Error::Config)?;
    let Some(store) = store else {
        return Ok(fresh);
    };
    // On a thread of its own: a pooled store blocks on the runtime it was
    // made on, which is this caller's.
    let stored = std::thread::scope(|s| {
        s.spawn(|| store.setting_or(SECRET_SETTING, &fresh.to_hex()))
            .join()
    })
    .map_err(|_| Error::Config("reading the server secret from the store panicked".into()))?
    .map_err(|e| Error::Config(format!("cannot read the server secret from the store: {e}")))?;
    tenant::Secret::from_hex(&stored).ok_or_else(|| {
        Error::Config(format!(
            "the store's {SECRET_SETTING} is not 64 hex digits: set [serve] secret, or remove the setting"
        ))
    })
}

/// A configured proxy, ready to serve.
pub struct Proxy {
    app: Arc<shared::App>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("serve", &self.app.config.serve)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// A proxy with `config`, keeping sessions and snapshots in `store`
    /// (`None`: in memory only). Must be called inside a tokio runtime.
    pub fn new(config: ProxyConfig, store: Option<Box<dyn SessionStore>>) -> Result<Proxy> {
        config.check()?;
        let mut store = store;
        let secret = secret(&config.serve, store.as_deref_mut())?;
        let metrics = Arc::new(metrics::Metrics::new());
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|e| Error::Config(format!("the proxy needs a tokio runtime: {e}")))?;
        let telemetry = telemetry::Telemetry::start(
            &config.telemetry,
            abridge_llm::client_builder()
                .build()
                .map_err(|e| Error::Config(format!("[telemetry]: {e}")))?,
            handle.clone(),
            metrics.clone(),
        )?;
        let app = shared::App {
            budget: budget::Budget::new(
                config.serve.max_preparing_bytes(),
                metrics::Budgeted::Preparing,
                metrics.clone(),
            ),
            receiving: budget::Budget::new(
                config.serve.max_receiving_bytes(),
                metrics::Budgeted::Receiving,
                metrics.clone(),
            ),
            readers: listen::Readers::default(),
            upstream: forward::Upstream::new(&config.serve)?,
            sessions: session::Sessions::new(
                config.serve.max_sessions,
                config.serve.session_memory_bytes(),
            ),
            engines: engines::Engines::new(&config.engine.recall, &config.serve),
            store: store.map(|s| {
                let restore = store::Restore {
                    settings: vec![(SECRET_SETTING.to_owned(), secret.to_hex())],
                };
                Arc::new(store::StoreWorker::start(s, metrics.clone(), restore))
            }),
            metrics,
            telemetry,
            handle,
            secret,
            passthroughs: route::Passthroughs::default(),
            warmed: std::sync::OnceLock::new(),
            config,
        };
        Ok(Proxy { app: Arc::new(app) })
    }

    /// Builds the tokenizer tables requests will count with, on a blocking
    /// thread, so that the first request after start-up does not pay for
    /// it (about 10 ms). [`serve`](Self::serve) does it before it accepts
    /// a connection; call it first to say "listening" only once requests
    /// will be fast. `/readyz` answers 503 until it is done (routes served
    /// without [`serve`](Self::serve)). Every model the registry knows but
    /// GPT-4 and GPT-3.5 counts with `o200k_base`.
    pub async fn warm_up(&self) {
        if self.app.warmed.get().is_some() {
            return;
        }
        let app = self.app.clone();
        let mut kinds = vec![TokenizerKind::O200kBase];
        kinds.extend(app.config.engine.tokenizer.filter(|k| k.is_exact()));
        let warmed = self.app.handle.spawn_blocking(move || {
            let start = std::time::Instant::now();
            for kind in kinds {
                kind.warm();
            }
            let took = start.elapsed();
            app.metrics.warmed(took.as_secs_f64());
            tracing::debug!(ms = took.as_millis() as u64, "tokenizer tables built");
            let _ = app.warmed.set(took);
        });
        // A panic there would be a build defect (`tables.rs`); requests
        // would then build the tables themselves.
        let _ = warmed.await;
    }

    /// What the requests since start-up add up to, per tenant and model:
    /// tokens the clients sent and forwarded, the providers' reports, and
    /// dollars with abridge and (estimated) without. A handle taken before
    /// [`serve`](Self::serve) reads them while it runs.
    pub fn totals(&self) -> Totals {
        Totals {
            app: self.app.clone(),
        }
    }

    /// The routes, to serve, each request's `Host` checked
    /// ([`guard_host`] with `[serve] allowed_hosts`).
    pub fn router(&self) -> axum::Router {
        self.router_with(axum::Router::new())
    }

    /// The routes with `extra` (the dashboard's) beside them, all behind
    /// the `Host` check.
    pub fn router_with(&self, extra: axum::Router) -> axum::Router {
        guard_host(
            app::router(self.app.clone()).merge(extra),
            &self.app.config.serve.allowed_hosts,
        )
    }

    /// Serves on `listener` until `shutdown` resolves, then lets in-flight
    /// requests and streams finish.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        self.serve_with(listener, axum::Router::new(), shutdown)
            .await
    }

    /// [`serve`](Self::serve) with `extra` routes (the dashboard's) beside
    /// the proxy's, under the same `Host` check and connection limits.
    pub async fn serve_with(
        self,
        listener: tokio::net::TcpListener,
        extra: axum::Router,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        self.warm_up().await;
        let serve = &self.app.config.serve;
        let limits = listen::Limits {
            header_timeout: Duration::from_secs_f64(serve.header_timeout_secs),
            max_connections: serve.max_connections,
        };
        let sweeper = tokio::spawn(spill_sessions(self.app.clone(), serve.session_idle()));
        let served = listen::serve(listener, self.router_with(extra), limits, shutdown)
            .await
            .map_err(Error::Serve);
        sweeper.abort();
        let app = self.app.clone();
        // The last spans go before the proxy ends.
        let _ = tokio::task::spawn_blocking(move || app.telemetry.flush()).await;
        if let Some(store) = self.app.store.clone() {
            // What the sessions learned goes to the store before the proxy ends.
            let app = self.app.clone();
            let saver = store.clone();
            let _ = tokio::task::spawn_blocking(move || {
                app.sessions
                    .spill_all(|s| saver.save(s.record(), s.version.clone()))
            })
            .await;
            let flushed = tokio::task::spawn_blocking(move || store.flush(FLUSH_LIMIT)).await;
            if !matches!(flushed, Ok(true)) {
                tracing::warn!(
                    limit_s = FLUSH_LIMIT.as_secs(),
                    "the store did not take every queued write before shutdown"
                );
            }
        }
        served
    }
}

/// Lets go of the sessions idle for `idle` (`[serve] session_idle_seconds`),
/// looking a few times per `idle`, and of the least recently used ones
/// when what sessions hold is over `[serve] session_memory_megabytes`
/// (when told so); each saved to the store first.
/// A running proxy's sums (see [`Proxy::totals`]).
#[derive(Clone)]
pub struct Totals {
    app: Arc<shared::App>,
}

impl std::fmt::Debug for Totals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Totals").finish_non_exhaustive()
    }
}

impl Totals {
    /// The sums per tenant and model now.
    pub fn lines(&self) -> Vec<abridge_store::Totals> {
        self.app.metrics.accounts.totals()
    }

    /// The sums over every tenant and model now, with the compactions and
    /// recall rounds the proxy made.
    pub fn sum(&self) -> Summary {
        let mut all = abridge_store::Totals::default();
        for l in self.lines() {
            all.merge(&l);
        }
        let (compactions, recall_rounds) = self.app.metrics.activity();
        Summary {
            totals: all,
            compactions,
            recall_rounds,
        }
    }
}

/// Everything a proxy's requests added up to.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// Tokens and dollars.
    pub totals: abridge_store::Totals,
    /// Compactions made.
    pub compactions: u64,
    /// Recall rounds the proxy answered.
    pub recall_rounds: u64,
}

async fn spill_sessions(app: Arc<shared::App>, idle: Option<Duration>) {
    let every = idle.map_or(Duration::from_secs(60), |i| {
        (i / 4).clamp(Duration::from_millis(100), Duration::from_secs(60))
    });
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = app.sessions.over_budget.notified() => {}
        }
        // Saving may wait on the store: off the runtime's threads.
        let app2 = app.clone();
        let spill = move || {
            let save = |state: &session::SessionState| match &app2.store {
                Some(store) => store.save(state.record(), state.version.clone()),
                None => store::Saved::Written,
            };
            let (idle_gone, _) = match idle {
                Some(idle) => app2.sessions.spill_idle(idle, save),
                None => (0, 0),
            };
            let (over_gone, held) = app2.sessions.spill_over_budget(save);
            (idle_gone, over_gone, held)
        };
        let (idle_gone, over_gone, held) = tokio::task::spawn_blocking(spill)
            .await
            .unwrap_or((0, 0, 0));
        if idle_gone + over_gone > 0 {
            app.metrics.sessions(app.sessions.len());
            app.metrics.session_memory(held);
            tracing::debug!(
                idle = idle_gone,
                over_budget = over_gone,
                "sessions left memory"
            );
        }
    }
}
