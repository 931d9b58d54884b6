//! Traces over OTLP (`[telemetry]`): one span per request and one per attempt, drawn after the fact.
//!
//! Why after the fact, and not a `tracing-opentelemetry` layer on the request path: everything a trace should say
//! — each attempt's result and time, the retry decided after it and why not, the breaker, the budget, the
//! deadline left, the tokens — is already in the call's [`OutcomeReport`] when the call ends, and each attempt's
//! span id is the parent id it sent upstream (`AttemptRecord::span_id`). So the edge ([`crate::edge`]) builds
//! the spans from the report and the answer's headers when the answer's body ends (a stream's last event), and
//! hands them to the SDK's batch processor (`export`). With telemetry off the gateway does one `Option` check per
//! request and nothing else; the library's path only records what the report carries anyway.
//!
//! The trace: a request's `traceparent` is continued (its trace id, its span as the request span's parent, and
//! its sampled flag decides: parent-based sampling). A request without one starts a trace here, sampled by
//! `telemetry.sampling` on its trace id, and — when sampled — the gateway puts that trace in the request's
//! `traceparent`, so the library sends it upstream with each attempt's span id: the trace id the collector sees
//! and the one the upstream saw are one.
//!
//! Routes say what they called by putting a [`CallTrace`] in their answer's extensions (only when the request is
//! traced: [`Traced`] in the request's extensions says so), beside the other marks the tool routes already pass
//! up that way (`NotStored`, the deferral).
//!
//! Layout: `spans` — the pure mapping (request, report) → spans, `attempt` an attempt's attributes; `export` — the SDK's batch processor and the
//! OTLP exporter; `body` — the answer's body that ends the request's spans when it ends.

mod attempt;
mod body;
mod export;
mod spans;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::Request;
use axum::response::Response;
use ballast::report::OutcomeReport;
use ballast_config::{Api, Config, TelemetryConfig};
use ballast_core::TraceContext;
use http::HeaderValue;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanProcessor as _};
use rand::RngExt as _;

use ballast::headers::{BALLAST_RUN_ID, TRACEPARENT};

pub(crate) use spans::Called;
use spans::{RequestFacts, Timeline};

/// The gateway's traces: where they go and which are kept. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    processor: BatchSpanProcessor,
    /// New traces kept: those whose trace id falls under this bound (`sampling` × 2^64, on the id's low half).
    keep_below: u64,
    keep_all: bool,
    deployments: Deployments,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

/// Each model deployment's model, by the deployment's name in reports (`route[index] model`).
#[derive(Debug, Default)]
pub(crate) struct Deployments(HashMap<String, String>);

impl Deployments {
    /// The deployments of `config`'s model routes.
    pub(crate) fn of(config: &Config) -> Self {
        let mut models = HashMap::new();
        for route in &config.models {
            for (index, deployment) in route.deployments.iter().enumerate() {
                models.insert(
                    ballast::model::deployment_name(route, index),
                    deployment.model.clone(),
                );
            }
        }
        Deployments(models)
    }

    /// The model of the deployment named `name` in a report.
    pub(crate) fn model_of(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

impl Telemetry {
    /// Starts exporting `config`'s spans (`telemetry` being its `[telemetry]`), on the current tokio runtime.
    pub(crate) fn start(telemetry: &TelemetryConfig, config: &Config) -> Result<Telemetry, String> {
        let processor = export::processor(telemetry, tokio::runtime::Handle::current())?;
        // Sampling by trace id (W3C's random low 8 bytes), as OpenTelemetry's `TraceIdRatioBased` does.
        let keep_all = telemetry.sampling >= 1.0;
        let keep_below = (telemetry.sampling * u64::MAX as f64) as u64;
        Ok(Telemetry {
            inner: Arc::new(Inner {
                processor,
                keep_below,
                keep_all,
                deployments: Deployments::of(config),
            }),
        })
    }

    /// Begins tracing `request`, if its trace is sampled: the caller's `traceparent`, else a new trace, which is
    /// then written into the request's `traceparent` for the routes and the library to carry on.
    pub(crate) fn begin(&self, request: &mut Request) -> Option<Begun> {
        let started = (ballast::clock::now(), wall_now());
        let headers = request.headers_mut();
        let given = headers
            .get(TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| TraceContext::parse(v).ok());
        let mut rng = rand::rng();
        let span_id: u64 = rng.random::<u64>().max(1);
        let (trace_id, parent) = match given {
            Some(trace) if !trace.sampled() => return None,
            Some(trace) => (trace.trace_id(), Some(trace.parent_id())),
            None => {
                let trace_id: u128 = rng.random::<u128>().max(1);
                if !self.keeps(trace_id) {
                    return None;
                }
                let trace = TraceContext::new(trace_id, span_id).with_sampled(true);
                let value = HeaderValue::from_bytes(&trace.header_bytes()).ok()?;
                headers.insert(TRACEPARENT, value);
                (trace_id, None)
            }
        };
        let run_id = (headers.get(BALLAST_RUN_ID))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        request.extensions_mut().insert(Traced);
        Some(Begun {
            telemetry: self.clone(),
            trace_id,
            span_id,
            parent,
            started,
            method: request.method().as_str().to_owned(),
            path: request.uri().path().to_owned(),
            run_id,
        })
    }

    /// Whether a trace that starts here with `trace_id` is kept.
    fn keeps(&self, trace_id: u128) -> bool {
        self.inner.keep_all || (trace_id as u64) < self.inner.keep_below
    }

    /// Exports every span handed over so far and stops the exporter: the last step of a graceful shutdown (a
    /// blocking wait, on a thread of its own).
    pub(crate) async fn shutdown(&self) {
        let telemetry = self.clone();
        let stopped = tokio::task::spawn_blocking(move || telemetry.inner.processor.shutdown()).await;
        match stopped {
            Ok(Ok(())) => tracing::info!("traces exported"),
            Ok(Err(error)) => tracing::warn!(%error, "traces may have been lost at shutdown"),
            Err(error) => tracing::warn!(%error, "traces may have been lost at shutdown"),
        }
    }
}

/// The mark, in a request's extensions, of a request whose spans are recorded: its route puts a [`CallTrace`] in
/// its answer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Traced;

/// What a route called, in its answer's extensions: the call's kind and its report (a stream's, read when the
/// stream has ended).
#[derive(Clone)]
pub(crate) struct CallTrace {
    called: Called,
    report: ReportSource,
}

#[derive(Clone)]
enum ReportSource {
    Ended(Arc<OutcomeReport>),
    Streamed(Arc<dyn Fn() -> OutcomeReport + Send + Sync>),
}

impl CallTrace {
    /// A call that has ended with `report`.
    pub(crate) fn ended(called: Called, report: OutcomeReport) -> Self {
        CallTrace {
            called,
            report: ReportSource::Ended(Arc::new(report)),
        }
    }

    /// A stream whose report `read` gives (called when the stream has ended).
    pub(crate) fn streamed(called: Called, read: impl Fn() -> OutcomeReport + Send + Sync + 'static) -> Self {
        CallTrace {
            called,
            report: ReportSource::Streamed(Arc::new(read)),
        }
    }

    /// A model call of `api` to `route`.
    pub(crate) fn model(api: Api, route: &str) -> Called {
        Called::Model {
            api,
            route: route.to_owned(),
        }
    }
}

/// A request being traced: what its spans need from its start.
pub(crate) struct Begun {
    telemetry: Telemetry,
    trace_id: u128,
    span_id: u64,
    parent: Option<u64>,
    started: (ballast_core::Instant, SystemTime),
    method: String,
    path: String,
    run_id: Option<String>,
}

impl Begun {
    /// The answer, its body ending the request's spans when it ends (or is dropped).
    pub(crate) fn finish(self, mut response: Response) -> Response {
        let answered = ballast::clock::now();
        let call = response.extensions_mut().remove::<CallTrace>();
        let (parts, body) = response.into_parts();
        let ending = Ending {
            begun: self,
            answered,
            status: parts.status.as_u16(),
            headers: parts.headers.clone(),
            call,
        };
        Response::from_parts(parts, axum::body::Body::new(body::Traced::new(body, ending)))
    }
}

/// What the spans of a request are drawn from when its body ends.
pub(crate) struct Ending {
    begun: Begun,
    answered: ballast_core::Instant,
    status: u16,
    headers: http::HeaderMap,
    call: Option<CallTrace>,
}

impl Ending {
    /// Draws the request's spans, now that its answer ended, and hands them to the exporter.
    pub(crate) fn end(self) {
        let Ending {
            begun,
            answered,
            status,
            headers,
            call,
        } = self;
        let report = call.as_ref().map(|call| match &call.report {
            ReportSource::Ended(report) => Arc::clone(report),
            ReportSource::Streamed(read) => Arc::new(read()),
        });
        let facts = RequestFacts {
            timeline: Timeline {
                trace_id: begun.trace_id,
                span_id: begun.span_id,
                parent: begun.parent,
                started: begun.started,
                answered,
                ended: ballast::clock::now(),
            },
            method: &begun.method,
            path: &begun.path,
            run_id: begun.run_id.as_deref(),
            status,
            headers: &headers,
        };
        let called = call.as_ref().map(|c| &c.called).zip(report.as_deref());
        let inner = &begun.telemetry.inner;
        let mut rng = rand::rng();
        for span in spans::spans(&facts, called, &inner.deployments, &mut || {
            rng.random::<u64>().max(1)
        }) {
            inner.processor.on_end(span);
        }
    }
}

/// The wall clock now: an OTLP span's times are wall-clock times.
fn wall_now() -> SystemTime {
    // The one read of the wall clock for traces: spans are placed by it (every duration in them is from the
    // tokio clock, `ballast::clock`).
    #[allow(clippy::disallowed_methods)]
    SystemTime::now()
}
