//! The way out: the SDK's batch span processor over the OTLP/HTTP exporter, the exporter sending with the
//! gateway's own HTTP client (reqwest, on the gateway's tokio runtime) rather than a second client of its own.
//!
//! The processor is the SDK's: a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048 spans by default) drained by a
//! thread of its own every `OTEL_BSP_SCHEDULE_DELAY` (5 s by default) or when a batch is full. A span handed to a
//! full queue is dropped there and then — a request never waits for a collector. Export failures are logged when a
//! streak of them starts and when it ends (with how many batches it lost), not once a span or a batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanExporter, SpanProcessor as _,
};

use ballast_config::{OtlpProtocol, TelemetryConfig};

/// How long one export may take (one POST to the collector, the exporter's own retries within it).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The batch span processor of `config`'s collector.
pub(super) fn processor(
    config: &TelemetryConfig,
    runtime: tokio::runtime::Handle,
) -> Result<BatchSpanProcessor, String> {
    let http = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let protocol = match config.protocol {
        OtlpProtocol::HttpJson => Protocol::HttpJson,
        _ => Protocol::HttpBinary,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(OnRuntime { http, runtime })
        .with_endpoint(config.traces_url())
        .with_protocol(protocol)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let exporter = Logged {
        inner: exporter,
        endpoint: config.traces_url(),
        failing: Arc::new(AtomicU64::new(0)),
    };
    let mut processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(BatchConfigBuilder::default().build())
        .build();
    processor.set_resource(
        &Resource::builder_empty()
            .with_service_name(config.service_name.clone())
            .build(),
    );
    Ok(processor)
}

/// The exporter's HTTP client: the gateway's reqwest, its requests run on the gateway's runtime (the processor's
/// thread has none) and awaited from there.
#[derive(Debug)]
struct OnRuntime {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, HttpError> {
        let http = self.http.clone();
        let sent = self.runtime.spawn(async move {
            let request = reqwest::Request::try_from(request)?;
            let response = http.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                headers.extend(response.headers().clone());
            }
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>(answer.body(body))
        });
        Ok(sent.await???)
    }
}

/// An exporter that logs its failures once a streak: when the first export fails, and when one succeeds again.
#[derive(Debug)]
struct Logged<E> {
    inner: E,
    endpoint: String,
    /// Exports failed in a row.
    failing: Arc<AtomicU64>,
}

impl<E: SpanExporter> SpanExporter for Logged<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                let failed = self.failing.swap(0, Ordering::Relaxed);
                if failed > 0 {
                    tracing::info!(endpoint = %self.endpoint, failed, "traces are exported again");
                }
            }
            Err(error) => {
                if self.failing.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        endpoint = %self.endpoint, spans, %error,
                        "cannot export traces (dropped; logged again when exports succeed)"
                    );
                }
            }
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
