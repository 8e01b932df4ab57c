//! OpenTelemetry traces of the proxied requests (off unless an OTLP
//! endpoint is configured): a span per request following the GenAI
//! semantic conventions, a child span for its compaction and one per recall
//! round; the client's W3C `traceparent` continued and the request's own
//! passed upstream. No message content and no credential goes into an
//! attribute. Spans leave through a bounded queue on the exporter's own
//! thread: a request never waits on the receiver, and what a full queue or
//! a failed export loses is counted in `/metrics`.

mod export;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use abridge::Report;
use abridge::model::Usage;
use axum::http::HeaderMap;
use opentelemetry::trace::{Span, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use serde::{Deserialize, Serialize};

use crate::metrics::Metrics;
use crate::route::Provider;

/// `[telemetry]`: where traces go. Without an endpoint here or in the
/// standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`
/// variables, nothing is traced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP traces endpoint (`http://host:4318/v1/traces`).
    pub endpoint: Option<String>,
    /// Headers sent with each export (an API key for the receiver); also
    /// `OTEL_EXPORTER_OTLP_HEADERS` (`k=v,k2=v2`).
    pub headers: BTreeMap<String, String>,
    /// The `service.name` of the spans (else `OTEL_SERVICE_NAME`, else
    /// `abridge`).
    pub service_name: Option<String>,
    /// Spans waiting to be exported at most: past it, new ones are dropped
    /// (and counted) rather than held.
    pub max_queued_spans: usize,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            endpoint: None,
            headers: BTreeMap::new(),
            service_name: None,
            max_queued_spans: 4096,
        }
    }
}

impl TelemetryConfig {
    /// The endpoint and headers, from the config or else the standard
    /// variables (`OTEL_SDK_DISABLED=true` turns tracing off).
    fn resolved(&self) -> Option<(String, BTreeMap<String, String>)> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        let endpoint = self.endpoint.clone().or_else(|| {
            var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| {
                var("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
            })
        })?;
        let mut headers = BTreeMap::new();
        for k in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            for pair in var(k).unwrap_or_default().split(',') {
                if let Some((name, value)) = pair.split_once('=') {
                    headers.insert(name.trim().to_owned(), value.trim().to_owned());
                }
            }
        }
        headers.extend(self.headers.clone());
        Some((endpoint, headers))
    }

    pub(crate) fn check(&self) -> crate::Result<()> {
        if let Some(e) = &self.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(crate::Error::Config(format!(
                "[telemetry] endpoint: must be an http:// or https:// URL, not {e:?}"
            )));
        }
        if self.max_queued_spans == 0 {
            return Err(crate::Error::Config(
                "[telemetry] max_queued_spans: must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// The proxy's tracer, when tracing is on.
pub(crate) struct Telemetry {
    on: Option<(SdkTracerProvider, SdkTracer)>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("on", &self.on.is_some())
            .finish()
    }
}

impl Telemetry {
    /// Tracing as `config` and the environment say, exporting on `handle`'s
    /// runtime with `client`.
    pub(crate) fn start(
        config: &TelemetryConfig,
        client: reqwest::Client,
        handle: tokio::runtime::Handle,
        metrics: Arc<Metrics>,
    ) -> crate::Result<Telemetry> {
        let Some((endpoint, headers)) = config.resolved() else {
            return Ok(Telemetry { on: None });
        };
        let provider = export::provider(
            &endpoint,
            headers,
            config.service_name.as_deref(),
            config.max_queued_spans,
            export::Carrier { client, handle },
            metrics,
        )
        .map_err(|e| crate::Error::Config(format!("[telemetry]: {e}")))?;
        let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "abridge");
        tracing::info!(%endpoint, "tracing to OTLP");
        Ok(Telemetry {
            on: Some((provider, tracer)),
        })
    }

    /// Exports what is queued, waiting at most a few seconds (at shutdown).
    pub(crate) fn flush(&self) {
        if let Some((provider, _)) = &self.on {
            let _ = provider.force_flush();
        }
    }
}

/// One proxied request's trace (nothing when tracing is off). Cloned into
/// whatever ends the request: its span ends once.
#[derive(Clone, Default)]
pub(crate) struct Trace(Option<Arc<Traced>>);

struct Traced {
    cx: Context,
    tracer: SdkTracer,
    /// The response's end (its usage) closes the span, not its head.
    handed_off: AtomicBool,
    ended: AtomicBool,
}

impl Trace {
    /// The span of a request to `provider` at `url`, a child of the
    /// client's `traceparent` when it sent one.
    pub(crate) fn start(
        t: &Telemetry,
        headers: &HeaderMap,
        provider: Provider,
        url: &str,
    ) -> Trace {
        let Some((_, tracer)) = &t.on else {
            return Trace(None);
        };
        let parent = export::extract(headers);
        let url = reqwest::Url::parse(url).ok();
        let server = url
            .as_ref()
            .and_then(|u| u.host_str())
            .unwrap_or("")
            .to_owned();
        let port = url.as_ref().and_then(reqwest::Url::port_or_known_default);
        let span = tracer
            .span_builder("chat")
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("gen_ai.operation.name", "chat"),
                KeyValue::new("gen_ai.provider.name", provider.facts().otel_name),
                KeyValue::new("server.address", server),
                KeyValue::new("server.port", i64::from(port.unwrap_or(0))),
            ])
            .start_with_context(tracer, &parent);
        Trace(Some(Arc::new(Traced {
            cx: parent.with_span(span),
            tracer: tracer.clone(),
            handed_off: AtomicBool::new(false),
            ended: AtomicBool::new(false),
        })))
    }

    /// Sets `traceparent` (and `tracestate`) to this request's span for
    /// the upstream.
    pub(crate) fn inject(&self, headers: &mut HeaderMap) {
        if let Some(t) = &self.0 {
            export::inject(&t.cx, headers);
        }
    }

    /// The request's model (its span is named after it).
    pub(crate) fn model(&self, model: Option<&str>) {
        let (Some(t), Some(m)) = (&self.0, model) else {
            return;
        };
        let span = t.cx.span();
        span.set_attribute(KeyValue::new("gen_ai.request.model", m.to_owned()));
        span.update_name(format!("chat {m}"));
    }

    /// The model the response named.
    pub(crate) fn response_model(&self, model: Option<&str>) {
        if let (Some(t), Some(m)) = (&self.0, model) {
            t.cx.span()
                .set_attribute(KeyValue::new("gen_ai.response.model", m.to_owned()));
        }
    }

    /// The compaction made for the request, from `started` to now.
    pub(crate) fn compaction(&self, started: SystemTime, r: &Report) {
        let Some(t) = &self.0 else {
            return;
        };
        let rungs: Vec<&str> = r.degraded.iter().map(|d| d.rung.as_str()).collect();
        let summarizer = r.summarizer.clone().unwrap_or_else(|| "none".to_owned());
        let mut span = t
            .tracer
            .span_builder("abridge.compaction")
            .with_kind(SpanKind::Internal)
            .with_start_time(started)
            .with_attributes([
                KeyValue::new("abridge.tokens_before", r.tokens_before.get() as i64),
                KeyValue::new("abridge.tokens_after", r.tokens_after.get() as i64),
                KeyValue::new(
                    "abridge.reason",
                    r.reason.map_or("continued", |x| x.as_str()),
                ),
                KeyValue::new(
                    "abridge.rung",
                    if rungs.is_empty() {
                        "none".to_owned()
                    } else {
                        rungs.join(",")
                    },
                ),
                KeyValue::new("abridge.summarizer", summarizer),
                KeyValue::new("abridge.summarizer_attempts", r.attempts.len() as i64),
                KeyValue::new("abridge.engine_ms", r.duration_us as f64 / 1000.0),
            ])
            .start_with_context(&t.tracer, &t.cx);
        span.end();
    }

    /// A recall round: `calls` answered and the request sent on, from
    /// `started` to now.
    pub(crate) fn recall_round(&self, round: usize, calls: usize, started: SystemTime) {
        let Some(t) = &self.0 else {
            return;
        };
        let mut span = t
            .tracer
            .span_builder("abridge.recall_round")
            .with_kind(SpanKind::Internal)
            .with_start_time(started)
            .with_attributes([
                KeyValue::new("abridge.recall.round", round as i64),
                KeyValue::new("abridge.recall.calls", calls as i64),
            ])
            .start_with_context(&t.tracer, &t.cx);
        span.end();
    }

    /// The upstream's status.
    pub(crate) fn status(&self, code: u16) {
        if let Some(t) = &self.0 {
            let span = t.cx.span();
            span.set_attribute(KeyValue::new("http.response.status_code", i64::from(code)));
            if code >= 400 {
                span.set_status(Status::error(format!("upstream answered {code}")));
            }
        }
    }

    /// The response's end will close the span (see [`Trace::finish`]).
    pub(crate) fn hand_off(&self) {
        if let Some(t) = &self.0 {
            t.handed_off.store(true, Ordering::Release);
        }
    }

    /// Closes the span at the response's head, unless its end closes it.
    pub(crate) fn end_unless_handed_off(&self, code: u16) {
        if let Some(t) = &self.0
            && !t.handed_off.load(Ordering::Acquire)
        {
            self.status(code);
            self.finish(None, None);
        }
    }

    /// Closes the span with the provider's usage and abridge's figures.
    pub(crate) fn finish(
        &self,
        usage: Option<&Usage>,
        account: Option<&abridge_store::RequestRecord>,
    ) {
        let Some(t) = &self.0 else {
            return;
        };
        if t.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        let span = t.cx.span();
        if let Some(u) = usage {
            span.set_attributes([
                KeyValue::new("gen_ai.usage.input_tokens", u.prompt_tokens() as i64),
                KeyValue::new("gen_ai.usage.output_tokens", u.output_tokens as i64),
                KeyValue::new(
                    "gen_ai.usage.cache_read.input_tokens",
                    u.cache_read_tokens as i64,
                ),
                KeyValue::new(
                    "gen_ai.usage.cache_creation.input_tokens",
                    u.cache_write_tokens as i64,
                ),
            ]);
        }
        if let Some(r) = account {
            span.set_attributes([
                KeyValue::new("abridge.compacted", r.compacted),
                KeyValue::new(
                    "abridge.tokens.client",
                    r.account.client_tokens.get() as i64,
                ),
                KeyValue::new("abridge.tokens.forwarded", r.forwarded().get() as i64),
                KeyValue::new("abridge.recall.calls", i64::from(r.recalls)),
            ]);
        }
        span.end();
    }
}
