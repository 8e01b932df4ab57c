//! How spans leave: OTLP over HTTP (protobuf) with the proxy's own HTTP
//! client on its runtime, behind a bounded queue whose losses are counted;
//! and the W3C trace context read from and written to headers.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_http::{
    Bytes, HeaderExtractor, HeaderInjector, HttpClient, HttpError, Request, Response,
};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};

use crate::metrics::{Metrics, SpanLoss};

/// The proxy's HTTP client and the runtime its requests run on (the
/// exporter's thread has none of its own).
#[derive(Debug, Clone)]
pub(super) struct Carrier {
    pub(super) client: reqwest::Client,
    pub(super) handle: tokio::runtime::Handle,
}

/// An export waits this long at most for the receiver.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

#[async_trait::async_trait]
impl HttpClient for Carrier {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let (parts, body) = request.into_parts();
        let sent = self.handle.spawn(async move {
            let response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .timeout(EXPORT_TIMEOUT)
                .body(body)
                .send()
                .await?;
            let status = response.status();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, body))
        });
        let (status, body) = sent.await??;
        let mut out = Response::new(body);
        *out.status_mut() = status;
        Ok(out)
    }
}

/// A tracer provider exporting to `endpoint`, at most `max_queued` spans
/// waiting.
pub(super) fn provider(
    endpoint: &str,
    headers: std::collections::BTreeMap<String, String>,
    service: Option<&str>,
    max_queued: usize,
    carrier: Carrier,
    metrics: Arc<Metrics>,
) -> Result<SdkTracerProvider, String> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(carrier)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint)
        .with_headers(headers.into_iter().collect::<HashMap<_, _>>())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let waiting = Arc::new(AtomicUsize::new(0));
    let counted = Counted {
        inner: exporter,
        waiting: waiting.clone(),
        metrics: metrics.clone(),
    };
    let batch = BatchSpanProcessor::builder(counted)
        .with_batch_config(
            BatchConfigBuilder::default()
                // The gate below keeps it from filling: what is lost is ours to count.
                .with_max_queue_size(max_queued + 1)
                .with_scheduled_delay(Duration::from_millis(500))
                .build(),
        )
        .build();
    // The builder reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    let mut resource = Resource::builder();
    if let Some(name) = service.map(str::to_owned).or_else(|| {
        std::env::var_os("OTEL_SERVICE_NAME")
            .is_none()
            .then(|| "abridge".to_owned())
    }) {
        resource = resource.with_service_name(name);
    }
    Ok(SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_span_processor(Bounded {
            inner: batch,
            waiting,
            max: max_queued,
            metrics,
        })
        .build())
}

/// The batch processor behind a gate that counts what it turns away.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    /// Spans ended and not yet exported (or lost).
    waiting: Arc<AtomicUsize>,
    max: usize,
    metrics: Arc<Metrics>,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        let admitted = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok();
        if admitted {
            self.inner.on_end(span);
        } else {
            self.metrics.spans_dropped(SpanLoss::QueueFull, 1);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, releasing the gate's places as batches leave and
/// counting the ones the receiver did not take.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    waiting: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = self.inner.export(batch).await;
        self.waiting.fetch_sub(n, Ordering::AcqRel);
        if let Err(e) = &result {
            self.metrics.spans_dropped(SpanLoss::ExportFailed, n as u64);
            tracing::warn!(spans = n, error = %e, "trace export failed");
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The client's trace context (`traceparent`, `tracestate`), or none.
pub(super) fn extract(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&HeaderExtractor(headers))
}

/// Writes `cx`'s trace context into `headers`.
pub(super) fn inject(cx: &Context, headers: &mut HeaderMap) {
    TraceContextPropagator::new().inject_context(cx, &mut HeaderInjector(headers));
}
