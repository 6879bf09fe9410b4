//! Spans of runs' traces sent to an OpenTelemetry collector: OTLP over HTTP with JSON bodies
//! (`<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces`), through `opentelemetry-otlp`'s exporter and the
//! workspace's reqwest client. Each batch is exported before `record` returns, so that a Lambda
//! frozen after its invocation holds none back, within [`EXPORT_TIMEOUT`] (a collector that is
//! slow or gone costs each batch at most that); a batch that fails is logged and dropped.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use std::time::{Duration, SystemTime};
use sundial_domain::ports::spans::{Span, Spans};
/// How long one export may take, connection included.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Spans exported to an OTLP/HTTP collector.
#[derive(Debug)]
pub struct OtlpSpans {
    exporter: opentelemetry_otlp::SpanExporter,
}

impl OtlpSpans {
    /// Spans exported to the collector at `endpoint` (its base URL) as the service `service`.
    pub fn new(endpoint: &str, service: &str) -> Result<Self, String> {
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        // reqwest's TLS takes the process's crypto provider: ring, as the SDK's client uses (an
        // Err only says that one is installed already). The exporter's own timeout applies only
        // to a client it builds: this one has its own.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(|e| format!("the HTTP client could not be built: {e}"))?;
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(HttpClient(client))
            .with_protocol(Protocol::HttpJson)
            .with_endpoint(url)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())?;
        let resource = Resource::builder_empty().with_service_name(service.to_string()).build();
        exporter.set_resource(&resource);
        Ok(OtlpSpans { exporter })
    }
}

#[async_trait]
impl Spans for OtlpSpans {
    async fn record(&self, spans: Vec<Span>) {
        let batch: Vec<SpanData> = spans.iter().filter_map(span_data).collect();
        if batch.is_empty() {
            return;
        }
        let count = batch.len();
        match tokio::time::timeout(EXPORT_TIMEOUT, self.exporter.export(batch)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(spans = count, error = %e, "spans not exported"),
            Err(_) => tracing::warn!(spans = count, "spans not exported within the export timeout"),
        }
    }
}

/// `span` as the SDK exports it; `None` if its ids are not hex of the right length.
fn span_data(span: &Span) -> Option<SpanData> {
    let trace_id = TraceId::from_hex(&span.trace_id).ok()?;
    let span_id = SpanId::from_hex(&span.span_id).ok()?;
    let parent = match &span.parent_span_id {
        Some(parent) => SpanId::from_hex(parent).ok()?,
        None => SpanId::INVALID,
    };
    let status = match &span.error {
        Some(error) => Status::error(error.clone()),
        None => Status::Ok,
    };
    Some(SpanData {
        span_context: SpanContext::new(trace_id, span_id, TraceFlags::SAMPLED, false, TraceState::NONE),
        parent_span_id: parent,
        parent_span_is_remote: false,
        span_kind: if span.name == "attempt" { SpanKind::Client } else { SpanKind::Internal },
        name: span.name.into(),
        start_time: system_time(span.start),
        end_time: system_time(span.end),
        attributes: span.attributes.iter().map(|(k, v)| KeyValue::new(*k, v.clone())).collect(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: InstrumentationScope::builder("sundial").build(),
    })
}

fn system_time(at: DateTime<Utc>) -> SystemTime {
    SystemTime::from(at)
}

/// The exporter's HTTP client: the workspace's reqwest (the exporter's own feature brings
/// another major version of it).
#[derive(Debug, Clone)]
struct HttpClient(reqwest::Client);

#[async_trait]
impl opentelemetry_http::HttpClient for HttpClient {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        let url = parts.uri.to_string();
        let response = self.0.request(parts.method, url).headers(parts.headers).body(body).send().await?;
        let status = response.status();
        let body = response.bytes().await?;
        if !status.is_success() {
            return Err(format!("the collector answered {status}").into());
        }
        Ok(http::Response::builder().status(status).body(body)?)
    }
}
