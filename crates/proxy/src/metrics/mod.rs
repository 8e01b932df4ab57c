//! Prometheus metrics, served at `GET /metrics`. Labels are routes, status
//! codes, reasons and outcomes: never a session id, header or credential.

use abridge::Reason;
use abridge::tokens::Counted;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod labels;

pub(crate) use labels::{Decoded, Dropped, Passthrough, Route, SpanLoss, StoreOp};
use labels::{
    DecodedLabels, DroppedLabels, OutcomeLabels, PassLabels, ProviderLabels, ReasonLabels,
    RequestLabels, RungLabels, SpanLossLabels, StoreLabels,
};

/// Every metric the proxy keeps.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    compactions: Family<ReasonLabels, Counter>,
    passthrough: Family<PassLabels, Counter>,
    refused: Family<ProviderLabels, Counter>,
    decoded: Family<DecodedLabels, Counter>,
    degraded: Family<RungLabels, Counter>,
    over_target: Counter,
    summarizer_attempts: Family<OutcomeLabels, Counter>,
    tokens_before: Counter,
    tokens_after: Counter,
    tokens_saved: Counter,
    retries: Counter,
    disconnects: Counter,
    abandoned: Counter,
    store_timeouts: Family<StoreLabels, Counter>,
    store_dropped: Family<DroppedLabels, Counter>,
    spans_dropped: Family<SpanLossLabels, Counter>,
    recalls: Family<OutcomeLabels, Counter>,
    recall_bytes: Counter,
    recall_rounds: Counter,
    recall_store_reads: Family<OutcomeLabels, Counter>,
    recall_exhausted: Counter,
    added_latency: Histogram,
    upstream_latency: Histogram,
    active_sessions: Gauge,
    session_memory: Gauge,
    recall_memory: Gauge,
    store_queued: Gauge,
    preparing: Gauge,
    busy: Counter,
    receiving: Gauge,
    receiving_busy: Counter,
    warmup: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Tokens and dollars per tenant and model.
    pub(crate) accounts: crate::account::Accounts,
    /// Compactions made (carried ones aside), for [`Metrics::activity`].
    made: std::sync::atomic::AtomicU64,
}

/// What a memory budget holds room for (see `budget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Budgeted {
    /// Bodies being compacted: `[serve] max_preparing_megabytes`.
    Preparing,
    /// Bodies held from their first byte until forwarded: `[serve]
    /// max_receiving_megabytes`.
    Receiving,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All metrics at zero.
    pub(crate) fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("abridge"),
            requests: Family::default(),
            compactions: Family::default(),
            passthrough: Family::default(),
            refused: Family::default(),
            decoded: Family::default(),
            degraded: Family::default(),
            over_target: Counter::default(),
            summarizer_attempts: Family::default(),
            tokens_before: Counter::default(),
            tokens_after: Counter::default(),
            tokens_saved: Counter::default(),
            retries: Counter::default(),
            disconnects: Counter::default(),
            abandoned: Counter::default(),
            store_timeouts: Family::default(),
            store_dropped: Family::default(),
            spans_dropped: Family::default(),
            recalls: Family::default(),
            recall_bytes: Counter::default(),
            recall_rounds: Counter::default(),
            recall_store_reads: Family::default(),
            recall_exhausted: Counter::default(),
            // 50 µs … ~1.6 s
            added_latency: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            // 1 ms … ~65 s
            upstream_latency: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            active_sessions: Gauge::default(),
            session_memory: Gauge::default(),
            recall_memory: Gauge::default(),
            store_queued: Gauge::default(),
            preparing: Gauge::default(),
            busy: Counter::default(),
            receiving: Gauge::default(),
            receiving_busy: Counter::default(),
            warmup: Gauge::default(),
            accounts: crate::account::Accounts::default(),
            made: std::sync::atomic::AtomicU64::new(0),
        };
        m.register();
        m.accounts.register(&mut m.registry);
        m
    }

    fn register(&mut self) {
        self.register_requests();
        self.register_delivery();
        self.register_resources();
    }

    /// Requests and their compactions: what came, what was done, what it saved.
    fn register_requests(&mut self) {
        let r = &mut self.registry;
        r.register(
            "requests",
            "Requests by route and response status",
            self.requests.clone(),
        );
        r.register(
            "compactions",
            "Compactions by reason",
            self.compactions.clone(),
        );
        r.register(
            "passthrough",
            "Requests forwarded as sent, by why",
            self.passthrough.clone(),
        );
        r.register(
            "refused",
            "Requests refused by the route table (a path that could leave its upstream, a provider with none), by provider",
            self.refused.clone(),
        );
        r.register(
            "decoded",
            "Conversation requests by how much of them was decoded (whole, added)",
            self.decoded.clone(),
        );
        r.register(
            "degraded",
            "Rungs of the floor ladder taken when the preferred tail did not fit the target, by rung",
            self.degraded.clone(),
        );
        r.register(
            "over_target",
            "Requests sent at their irreducible floor, still over the target",
            self.over_target.clone(),
        );
        r.register(
            "summarizer_attempts",
            "Summarizer attempts by outcome (used, failed)",
            self.summarizer_attempts.clone(),
        );
        r.register(
            "tokens_before",
            "Tokens of compacted histories before compaction",
            self.tokens_before.clone(),
        );
        r.register(
            "tokens_after",
            "Tokens of compacted histories after compaction",
            self.tokens_after.clone(),
        );
        r.register(
            "tokens_saved",
            "Tokens removed by compaction",
            self.tokens_saved.clone(),
        );
        r.register(
            "overflow_retries",
            "Requests compacted harder and retried after the upstream refused them as too long",
            self.retries.clone(),
        );
    }

    /// The store, the traces and the recall tool: what was delivered or given up.
    fn register_delivery(&mut self) {
        let r = &mut self.registry;
        r.register(
            "store_timeouts",
            "Waits on the store that ran out (op: read or write): the request went on with the session in memory",
            self.store_timeouts.clone(),
        );
        r.register(
            "store_dropped",
            "Queued store writes that gave way because the store could not keep up (what: snapshot, then request_row; a session's state never does)",
            self.store_dropped.clone(),
        );
        r.register(
            "trace_spans_dropped",
            "Trace spans never delivered to the OTLP receiver, by why (queue_full, export_failed)",
            self.spans_dropped.clone(),
        );
        r.register(
            "recalls",
            "Calls of the recall tool the proxy answered, by outcome (found; missing: unknown or expired handle, or a malformed call)",
            self.recalls.clone(),
        );
        r.register(
            "recall_bytes",
            "Bytes of original content the recall tool gave back",
            self.recall_bytes.clone(),
        );
        r.register(
            "recall_store_reads",
            "Originals the recall tool looked up in the store (not in this replica's memory), by outcome (found, missing)",
            self.recall_store_reads.clone(),
        );
        r.register(
            "recall_rounds",
            "Upstream calls continued after the proxy answered the recall tool",
            self.recall_rounds.clone(),
        );
        r.register(
            "recall_rounds_exhausted",
            "Responses still calling the recall tool after [recall] max_rounds rounds, given to the client without those calls",
            self.recall_exhausted.clone(),
        );
    }

    /// Clients, latency and the bounded resources (memory, queues, bodies held).
    fn register_resources(&mut self) {
        let r = &mut self.registry;
        r.register(
            "client_disconnects",
            "Responses the client stopped reading before their end",
            self.disconnects.clone(),
        );
        r.register(
            "abandoned",
            "Requests whose client left before they were ready to send: their compaction stopped at its next step",
            self.abandoned.clone(),
        );
        r.register(
            "added_latency_seconds",
            "Time the proxy spent on a request before sending it upstream",
            self.added_latency.clone(),
        );
        r.register(
            "upstream_latency_seconds",
            "Time from sending upstream to the upstream's response headers",
            self.upstream_latency.clone(),
        );
        r.register(
            "active_sessions",
            "Sessions held in memory",
            self.active_sessions.clone(),
        );
        r.register(
            "warmup_seconds",
            "Time the tokenizer tables took to build at start-up (0 until they have)",
            self.warmup.clone(),
        );
        r.register(
            "session_memory_bytes",
            "Bytes the sessions in memory hold (estimated: last bodies, carried compactions, briefings, count caches), within [serve] session_memory_megabytes",
            self.session_memory.clone(),
        );
        r.register(
            "recall_memory_bytes",
            "Bytes of originals kept in memory for the recall tool, within [recall] memory_megabytes",
            self.recall_memory.clone(),
        );
        r.register(
            "store_queued",
            "Writes and reads waiting for the store",
            self.store_queued.clone(),
        );
        r.register(
            "preparing_bytes",
            "Bytes of bodies being compacted now, within [serve] max_preparing_megabytes",
            self.preparing.clone(),
        );
        r.register(
            "busy",
            "Requests answered 503 because bodies being compacted held [serve] max_preparing_megabytes longer than the body timeout",
            self.busy.clone(),
        );
        r.register(
            "receiving_bytes",
            "Bytes of request bodies held now (read, compacted or forwarded), within [serve] max_receiving_megabytes",
            self.receiving.clone(),
        );
        r.register(
            "receiving_busy",
            "Requests answered 503 because the bodies held took [serve] max_receiving_megabytes",
            self.receiving_busy.clone(),
        );
    }

    /// The text exposition.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Compactions made (carried ones aside) and recall rounds answered.
    pub(crate) fn activity(&self) -> (u64, u64) {
        let made = self.made.load(std::sync::atomic::Ordering::Relaxed);
        (made, self.recall_rounds.get())
    }

    /// The proxy answered a call of the recall tool.
    pub(crate) fn recall(&self, found: bool, bytes: usize) {
        let outcome = if found { "found" } else { "missing" }.to_owned();
        self.recalls.get_or_create(&OutcomeLabels { outcome }).inc();
        self.recall_bytes.inc_by(bytes as u64);
    }

    /// An original was looked up in the store.
    pub(crate) fn recall_from_store(&self, found: bool) {
        let outcome = if found { "found" } else { "missing" }.to_owned();
        self.recall_store_reads
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// An upstream call went on after a recall round.
    pub(crate) fn recall_round(&self) {
        self.recall_rounds.inc();
    }

    /// A response still called the recall tool when the rounds ran out.
    pub(crate) fn recall_rounds_exhausted(&self) {
        self.recall_exhausted.inc();
    }

    /// A response went back to the client.
    pub(crate) fn request(&self, route: Route, status: u16) {
        self.requests
            .get_or_create(&RequestLabels { route, status })
            .inc();
    }

    /// A compaction happened.
    pub(crate) fn compaction(&self, reason: Option<Reason>, before: Counted, after: Counted) {
        if reason.is_some() {
            self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let reason = reason.map_or_else(
            || "continued".to_owned(),
            |r| format!("{r:?}").to_lowercase(),
        );
        self.compactions
            .get_or_create(&ReasonLabels { reason })
            .inc();
        self.tokens_before.inc_by(before.get());
        self.tokens_after.inc_by(after.get());
        self.tokens_saved.inc_by(before.saturating_sub(after).get());
    }

    /// A conversation request was forwarded as sent.
    pub(crate) fn passthrough(&self, why: Passthrough) {
        self.passthrough.get_or_create(&PassLabels { why }).inc();
    }

    /// A request the route table refused.
    pub(crate) fn refused(&self, provider: crate::route::Provider) {
        let provider = provider.as_str().to_owned();
        self.refused
            .get_or_create(&ProviderLabels { provider })
            .inc();
    }

    /// A conversation request was decoded, whole or only what it added.
    pub(crate) fn decoded(&self, part: Decoded) {
        self.decoded.get_or_create(&DecodedLabels { part }).inc();
    }

    /// A compaction took a rung of the floor ladder.
    pub(crate) fn degraded(&self, rung: abridge::Rung) {
        let rung = rung.as_str().to_owned();
        self.degraded.get_or_create(&RungLabels { rung }).inc();
    }

    /// A request went out at its floor, over the target.
    pub(crate) fn over_target(&self) {
        self.over_target.inc();
    }

    /// A summarizer attempt ended.
    pub(crate) fn summarizer(&self, used: bool) {
        let outcome = if used { "used" } else { "failed" }.to_owned();
        self.summarizer_attempts
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// A request was retried after an overflow.
    pub(crate) fn retry(&self) {
        self.retries.inc();
    }

    /// A wait on the store ran out.
    pub(crate) fn store_timeout(&self, op: StoreOp) {
        self.store_timeouts.get_or_create(&StoreLabels { op }).inc();
    }

    /// `n` queued store writes of a kind gave way.
    /// `n` trace spans lost, and why.
    pub(crate) fn spans_dropped(&self, why: SpanLoss, n: u64) {
        self.spans_dropped
            .get_or_create(&SpanLossLabels { why })
            .inc_by(n);
    }

    pub(crate) fn store_dropped(&self, what: Dropped, n: u64) {
        self.store_dropped
            .get_or_create(&DroppedLabels { what })
            .inc_by(n);
    }

    /// A client went away mid-response.
    pub(crate) fn disconnect(&self) {
        self.disconnects.inc();
    }

    /// A request's client left before it was ready to send.
    pub(crate) fn abandoned(&self) {
        self.abandoned.inc();
    }

    /// The tokenizer tables were built in `secs`.
    pub(crate) fn warmed(&self, secs: f64) {
        self.warmup.set(secs);
    }

    /// Bytes the sessions in memory hold.
    pub(crate) fn session_memory(&self, bytes: usize) {
        self.session_memory.set(bytes as i64);
    }

    /// Bytes of originals kept in memory, and jobs waiting for the store
    /// (read when the metrics are).
    pub(crate) fn memory_and_queue(&self, recall: usize, store_queued: usize) {
        self.recall_memory.set(recall as i64);
        self.store_queued.set(store_queued as i64);
    }

    /// Bytes `budget` holds now.
    pub(crate) fn budget_held(&self, budget: Budgeted, bytes: usize) {
        match budget {
            Budgeted::Preparing => self.preparing.set(bytes as i64),
            Budgeted::Receiving => self.receiving.set(bytes as i64),
        };
    }

    /// A request found no room in `budget`.
    pub(crate) fn busy(&self, budget: Budgeted) {
        match budget {
            Budgeted::Preparing => self.busy.inc(),
            Budgeted::Receiving => self.receiving_busy.inc(),
        };
    }

    /// Time spent before forwarding.
    pub(crate) fn added(&self, secs: f64) {
        self.added_latency.observe(secs);
    }

    /// Time to the upstream's headers.
    pub(crate) fn upstream(&self, secs: f64) {
        self.upstream_latency.observe(secs);
    }

    /// Sessions in memory now.
    pub(crate) fn sessions(&self, n: usize) {
        self.active_sessions.set(n as i64);
    }
}
