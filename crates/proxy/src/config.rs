//! The proxy's configuration: the engine's TOML plus a `[serve]` section.

use std::net::SocketAddr;
use std::time::Duration;

use abridge::Config;
use abridge::model::Provider;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::telemetry::TelemetryConfig;

/// What only the proxy uses (`[serve]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Address to listen on (loopback unless told otherwise).
    pub listen: SocketAddr,
    /// OpenAI-compatible upstream, ending in `/v1`: `/v1/chat/completions`
    /// goes to `{openai_upstream}/chat/completions`.
    pub openai_upstream: String,
    /// Anthropic upstream, the host root: `/v1/messages` goes to
    /// `{anthropic_upstream}/v1/messages`.
    pub anthropic_upstream: String,
    /// Gemini API upstream, the host root: `/v1beta/models/…` goes to
    /// `{gemini_upstream}/v1beta/models/…`. Empty: Gemini requests are
    /// refused (as is any provider's whose upstream is empty).
    pub gemini_upstream: String,
    /// A background briefing starts when a session passes this fraction of
    /// its trigger (only with `[[summarizers]]`; the offline briefing is
    /// built inline).
    pub soft_fraction: f64,
    /// Largest request body accepted, in megabytes (413 above).
    pub max_body_megabytes: u64,
    /// Sessions kept in memory (least recently used leave first; a stored
    /// session is loaded again when it comes back).
    pub max_sessions: usize,
    /// Memory the sessions in memory may hold together, in megabytes:
    /// their last bodies (decoded, which lets a request decode only what it
    /// added, without the messages a carried compaction covers) and their
    /// threads (the carried compaction, its briefing, the count cache).
    /// Past it, the least recently used sessions drop their last bodies
    /// first (their next request is decoded whole), then leave memory
    /// themselves, saved to the store first (without a store, their next
    /// request compacts afresh). 0: nothing is kept between requests but
    /// in the store.
    pub session_memory_megabytes: u64,
    /// A session without a request for this long leaves memory, saved to
    /// the store first when there is one: its next request is decoded whole
    /// and goes on from the stored compaction (without a store it compacts
    /// afresh; a provider's prompt cache has expired by then anyway).
    /// 0: sessions stay until `max_sessions` pushes them out.
    pub session_idle_seconds: f64,
    /// When the upstream refuses a history as too long, compact to
    /// `overflow_ratio` of what was sent and retry once.
    pub retry_on_overflow: bool,
    /// Fraction of the refused request's tokens to compact to before the retry.
    pub overflow_ratio: f64,
    /// Reject (400) a body that does not decode or validate, instead of
    /// forwarding it untouched with an `x-abridge-warning` header.
    pub strict: bool,
    /// Longest wait for the upstream, in seconds: to connect and between
    /// two reads of a response.
    pub upstream_timeout_secs: f64,
    /// Token of the dashboard at `/ui` (also `ABRIDGE_UI_TOKEN`); required
    /// when listening beyond loopback, since conversations are sensitive.
    pub ui_token: Option<String>,
    /// What tenants (one per credential) and their handles are derived
    /// with. Unset: generated once and kept in the store, so that replicas
    /// and restarts agree (without a store, one per process).
    pub secret: Option<String>,
    /// Names the proxy answers to besides IP addresses and `localhost`
    /// (`name` or `name:port`): a request whose `Host` is anything else
    /// gets 421 (a web page reaching loopback through a name it controls).
    pub allowed_hosts: Vec<String>,
    /// Longest wait for a request's head, in seconds: on a new connection,
    /// and between requests on a kept-alive one (an idle connection closes
    /// after it).
    pub header_timeout_secs: f64,
    /// Longest wait for a request's whole body, in seconds (408 after it).
    pub body_timeout_secs: f64,
    /// Most connections open at once: past it, the oldest connection doing
    /// nothing (or stalled on its body) is closed to make room, and when
    /// all are at work a new one gets 503.
    pub max_connections: usize,
    /// Bodies the proxy compacts at once, in megabytes of their size (a
    /// compaction takes a few times its body's size, up to about 25 times
    /// for a history of very many tiny messages): past it, requests wait
    /// their turn, and one that waits longer than `body_timeout_secs` gets
    /// 503. A body larger than this is compacted alone.
    pub max_preparing_megabytes: u64,
    /// Request bodies the proxy holds at once, in megabytes: from the
    /// first byte read until the request is forwarded. A body that says its
    /// length waits for room (up to `body_timeout_secs`, then 503) before
    /// it is read, so the bytes wait in the client's connection rather
    /// than in memory; one that does not (chunked) is refused with 503 when
    /// it would go past the budget. A body larger than this is held alone.
    pub max_receiving_megabytes: u64,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            openai_upstream: Provider::OpenAi.facts().default_base.into(),
            anthropic_upstream: Provider::Anthropic.facts().default_base.into(),
            gemini_upstream: Provider::Gemini.facts().default_base.into(),
            soft_fraction: 0.8,
            max_body_megabytes: 32,
            max_sessions: 10_000,
            session_memory_megabytes: 256,
            session_idle_seconds: 900.0,
            retry_on_overflow: true,
            overflow_ratio: 0.6,
            strict: false,
            upstream_timeout_secs: 600.0,
            ui_token: None,
            secret: None,
            allowed_hosts: Vec::new(),
            header_timeout_secs: 30.0,
            body_timeout_secs: 120.0,
            max_connections: 512,
            max_preparing_megabytes: 32,
            max_receiving_megabytes: 256,
        }
    }
}

impl ServeConfig {
    /// The base URL configured for `provider`, to set.
    pub fn upstream_mut(&mut self, provider: Provider) -> &mut String {
        match provider {
            Provider::OpenAi => &mut self.openai_upstream,
            Provider::Anthropic => &mut self.anthropic_upstream,
            Provider::Gemini => &mut self.gemini_upstream,
        }
    }

    /// The base URL configured for `provider` (empty: it is off).
    pub fn upstream(&self, provider: Provider) -> &str {
        match provider {
            Provider::OpenAi => &self.openai_upstream,
            Provider::Anthropic => &self.anthropic_upstream,
            Provider::Gemini => &self.gemini_upstream,
        }
    }

    /// Body limit in bytes.
    pub fn max_body_bytes(&self) -> usize {
        (self.max_body_megabytes as usize).saturating_mul(1 << 20)
    }

    /// The budget of bodies being compacted, in bytes.
    pub fn max_preparing_bytes(&self) -> usize {
        (self.max_preparing_megabytes as usize).saturating_mul(1 << 20)
    }

    /// The budget of bodies held at once, in bytes.
    pub fn max_receiving_bytes(&self) -> usize {
        (self.max_receiving_megabytes as usize).saturating_mul(1 << 20)
    }

    /// How long a session may go without a request before it leaves
    /// memory (`None`: never).
    pub fn session_idle(&self) -> Option<std::time::Duration> {
        (self.session_idle_seconds > 0.0)
            .then(|| std::time::Duration::from_secs_f64(self.session_idle_seconds))
    }

    /// The sessions' memory budget in bytes.
    pub fn session_memory_bytes(&self) -> usize {
        (self.session_memory_megabytes as usize).saturating_mul(1 << 20)
    }

    /// The body timeout.
    pub fn body_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.body_timeout_secs.max(0.001))
    }

    /// The upstream timeout.
    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.upstream_timeout_secs.max(0.001))
    }

    fn check(&self) -> Result<()> {
        let bad = |key: &str, why: &str| Err(Error::Config(format!("[serve] {key}: {why}")));
        if !(0.0..=1.0).contains(&self.soft_fraction) {
            return bad("soft_fraction", "must be between 0 and 1");
        }
        if !(self.overflow_ratio > 0.0 && self.overflow_ratio < 1.0) {
            return bad("overflow_ratio", "must be above 0 and below 1");
        }
        if self.max_sessions == 0 {
            return bad("max_sessions", "must be at least 1");
        }
        if !(self.session_idle_seconds >= 0.0 && self.session_idle_seconds.is_finite()) {
            return bad(
                "session_idle_seconds",
                "must be 0 or a positive number of seconds",
            );
        }
        if self.max_connections == 0 {
            return bad("max_connections", "must be at least 1");
        }
        if self.max_preparing_megabytes == 0 {
            return bad("max_preparing_megabytes", "must be at least 1");
        }
        if self.max_receiving_megabytes == 0 {
            return bad("max_receiving_megabytes", "must be at least 1");
        }
        for (key, secs) in [
            ("header_timeout_secs", self.header_timeout_secs),
            ("body_timeout_secs", self.body_timeout_secs),
            ("upstream_timeout_secs", self.upstream_timeout_secs),
        ] {
            if !(secs > 0.0 && secs.is_finite()) {
                return bad(key, "must be a positive number of seconds");
            }
        }
        for p in Provider::ALL {
            let key = p.facts().upstream_key;
            if let Err(e) = crate::route::Base::parse(self.upstream(p)) {
                return bad(
                    key,
                    &format!("must be empty or an http:// or https:// URL ({e})"),
                );
            }
        }
        Ok(())
    }
}

/// The engine's config and the proxy's, from one file.
#[derive(Debug, Clone, Default)]
pub struct ProxyConfig {
    /// Triggers, budgets, policies, summarizers — as for `abridge compact`.
    pub engine: Config,
    /// The `[serve]` section.
    pub serve: ServeConfig,
    /// The `[telemetry]` section: where traces go.
    pub telemetry: TelemetryConfig,
}

impl ProxyConfig {
    /// Parses a TOML file with optional `[serve]` and `[telemetry]` sections; everything
    /// else is the engine's config.
    pub fn from_toml(text: &str) -> Result<Self> {
        let mut table: toml::Table =
            toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        let serve = match table.remove("serve") {
            Some(v) => v
                .try_into::<ServeConfig>()
                .map_err(|e| Error::Config(format!("[serve]: {e}")))?,
            None => ServeConfig::default(),
        };
        let telemetry = match table.remove("telemetry") {
            Some(v) => v
                .try_into::<TelemetryConfig>()
                .map_err(|e| Error::Config(format!("[telemetry]: {e}")))?,
            None => TelemetryConfig::default(),
        };
        let rest = toml::to_string(&table).map_err(|e| Error::Config(e.to_string()))?;
        let engine = Config::from_toml(&rest).map_err(|e| Error::Config(e.to_string()))?;
        let config = ProxyConfig {
            engine,
            serve,
            telemetry,
        };
        config.check()?;
        Ok(config)
    }

    /// Checks both parts.
    pub fn check(&self) -> Result<()> {
        self.serve.check()?;
        self.telemetry.check()?;
        self.engine
            .check()
            .map_err(|e| Error::Config(e.to_string()))
    }
}
