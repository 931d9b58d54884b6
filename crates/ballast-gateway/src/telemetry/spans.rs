//! A request's spans, drawn after the fact from what the gateway knows when its answer ends: the request (its
//! method, path, status and the headers its answer carries) and, for a tool or model call, the call's
//! [`OutcomeReport`]. A pure function of those: no clock, no exporter, so the tests read the spans themselves.
//!
//! One span per request (kind SERVER), continuing the caller's trace, and one per attempt (kind CLIENT), its
//! child, whose span id is the parent id the attempt sent upstream in `traceparent`: the upstream's own spans hang
//! under the attempt that reached them. The decisions that explain an outcome are attributes under `ballast.*`;
//! model and tool calls carry the GenAI semantic conventions' (`gen_ai.*`). Never a body, a key or a secret.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use ballast::report::{AttemptResult, OutcomeReport};
use ballast_config::Api;
use ballast_core::Instant;
use http::HeaderMap;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

use ballast::headers::{
    BALLAST_ATTEMPTS, BALLAST_CODE, BALLAST_FALLBACK, BALLAST_OUTCOME, BALLAST_REMAINING_MS, BALLAST_SHED,
    IDEMPOTENT_REPLAYED, X_REQUEST_ID,
};

use super::Deployments;

/// What kind of call a request made, as its route knew it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Called {
    /// A tool call (`POST /v1/tools/{name}`).
    Tool,
    /// A model call of `api` to the route the caller named in `model`.
    Model {
        /// The API the caller spoke.
        api: Api,
        /// The model route, as the caller named it.
        route: String,
    },
}

/// The ids and times of a request: where its spans sit in their trace and on the wall clock.
#[derive(Clone, Debug)]
pub(crate) struct Timeline {
    /// The trace: the caller's, else the one the gateway started (the same one sent upstream).
    pub(crate) trace_id: u128,
    /// The request span's own id.
    pub(crate) span_id: u64,
    /// The caller's span (the parent id of its `traceparent`), when it sent one.
    pub(crate) parent: Option<u64>,
    /// When the request came in, on the clock's timeline and on the wall clock.
    pub(crate) started: (Instant, SystemTime),
    /// When its answer's head was ready (what `ballast-remaining-ms` was counted at).
    pub(crate) answered: Instant,
    /// When its answer's body ended (a stream's last event) or was dropped.
    pub(crate) ended: Instant,
}

impl Timeline {
    /// `at` on the wall clock.
    fn wall(&self, at: Instant) -> SystemTime {
        let (start, wall) = self.started;
        wall + at.saturating_duration_since(start)
    }
}

/// What the edge read of one request and its answer.
#[derive(Clone, Debug)]
pub(crate) struct RequestFacts<'a> {
    /// Its ids and times.
    pub(crate) timeline: Timeline,
    /// `GET`, `POST`...
    pub(crate) method: &'a str,
    /// The path, without the query.
    pub(crate) path: &'a str,
    /// The caller's `ballast-run-id`, if it sent one.
    pub(crate) run_id: Option<&'a str>,
    /// The answer's status.
    pub(crate) status: u16,
    /// The answer's headers: what the gateway said it did (`ballast-*`, `x-request-id`...).
    pub(crate) headers: &'a HeaderMap,
}

/// The spans of one request: its own first, then its attempts' in order (those of the fallbacks or next
/// deployments after the first's). `call` is what the route called and the call's report, if it made one.
pub(crate) fn spans(
    request: &RequestFacts<'_>,
    call: Option<(&Called, &OutcomeReport)>,
    deployments: &Deployments,
    new_span_id: &mut dyn FnMut() -> u64,
) -> Vec<SpanData> {
    let timeline = &request.timeline;
    let mut attributes = request_attributes(request);
    let mut status = Status::Unset;
    let name = match call {
        None => request.method.to_owned(),
        Some((called, report)) => {
            attributes.extend(call_attributes(request, called, report, deployments));
            let code = outcome(report);
            attributes.push(KeyValue::new("ballast.code", code));
            if code != "ok" && code != "fallback" {
                status = Status::error(code);
            }
            match called {
                Called::Tool => format!("execute_tool {}", report.target),
                Called::Model { api, route } => format!("{} {route}", operation(*api)),
            }
        }
    };
    if call.is_none() {
        let code = header(request.headers, &BALLAST_CODE).unwrap_or(if request.status < 400 {
            "ok"
        } else {
            "error"
        });
        attributes.push(KeyValue::new("ballast.code", code.to_owned()));
    }
    if request.status >= 500 && matches!(status, Status::Unset) {
        status = Status::error(format!("{}", request.status));
    }
    let parent = timeline.parent.unwrap_or(0);
    let mut spans = vec![span(
        (timeline.trace_id, timeline.span_id, parent),
        name,
        SpanKind::Server,
        (timeline.wall(timeline.started.0), timeline.wall(timeline.ended)),
        attributes,
        status,
    )];
    spans[0].parent_span_is_remote = timeline.parent.is_some();
    if let Some((called, report)) = call {
        let mut next = Some(report);
        let mut previous_end = timeline.started.0;
        while let Some(report) = next {
            for (index, attempt) in report.attempts.iter().enumerate() {
                let started = attempt.started.unwrap_or(previous_end);
                let ended = started + attempt.duration;
                previous_end = ended;
                let span_id = attempt.span_id.unwrap_or_else(&mut *new_span_id);
                let later = report.attempts.get(index + 1);
                let mut attributes = super::attempt::attributes(attempt, report, later);
                let name = match called {
                    Called::Tool => format!("execute_tool {}", report.target),
                    Called::Model { api, .. } => {
                        let model = deployments.model_of(&report.target).unwrap_or(&report.target);
                        attributes.push(KeyValue::new("gen_ai.operation.name", operation(*api)));
                        attributes.push(KeyValue::new("gen_ai.provider.name", provider(*api)));
                        attributes.push(KeyValue::new("gen_ai.request.model", model.to_owned()));
                        format!("{} {model}", operation(*api))
                    }
                };
                let status = match &attempt.result {
                    AttemptResult::Status(code) if *code < 400 => Status::Unset,
                    AttemptResult::Status(code) => Status::error(code.to_string()),
                    AttemptResult::Error(why) | AttemptResult::Refused(why) => Status::error(why.clone()),
                    AttemptResult::Pending => Status::Unset,
                };
                spans.push(span(
                    (timeline.trace_id, span_id, timeline.span_id),
                    name,
                    SpanKind::Client,
                    (timeline.wall(started), timeline.wall(ended)),
                    attributes,
                    status,
                ));
            }
            next = report.fallback_report.as_deref();
        }
    }
    spans
}

/// The attributes every request span has.
fn request_attributes(request: &RequestFacts<'_>) -> Vec<KeyValue> {
    let headers = request.headers;
    let mut attributes = vec![
        KeyValue::new("http.request.method", request.method.to_owned()),
        KeyValue::new("url.path", request.path.to_owned()),
        KeyValue::new("http.response.status_code", i64::from(request.status)),
    ];
    let mut text = |key: &'static str, value: Option<&str>| {
        if let Some(value) = value {
            attributes.push(KeyValue::new(key, value.to_owned()));
        }
    };
    text("ballast.request_id", header(headers, &X_REQUEST_ID));
    text("ballast.run_id", request.run_id);
    text("ballast.shed", header(headers, &BALLAST_SHED));
    text("ballast.fallback", header(headers, &BALLAST_FALLBACK));
    if let Some(attempts) = header(headers, &BALLAST_ATTEMPTS).and_then(|a| a.parse::<i64>().ok()) {
        attributes.push(KeyValue::new("ballast.attempts", attempts));
    }
    if let Some(left) = header(headers, &BALLAST_REMAINING_MS).and_then(|l| l.parse::<u64>().ok()) {
        let timeline = &request.timeline;
        let spent = timeline.answered.saturating_duration_since(timeline.started.0);
        let given = spent + Duration::from_millis(left);
        attributes.push(KeyValue::new(
            "ballast.deadline_left_ms",
            millis(Duration::from_millis(left)),
        ));
        attributes.push(KeyValue::new("ballast.deadline_ms", millis(given)));
    }
    attributes.push(KeyValue::new(
        "ballast.idempotency.replayed",
        header(headers, &IDEMPOTENT_REPLAYED) == Some("true"),
    ));
    attributes.push(KeyValue::new("ballast.deferred", request.status == 202));
    attributes
}

/// What a call's report adds to its request's span.
fn call_attributes(
    request: &RequestFacts<'_>,
    called: &Called,
    report: &OutcomeReport,
    deployments: &Deployments,
) -> Vec<KeyValue> {
    let answering = report.answering();
    let mut attributes = Vec::with_capacity(16);
    match called {
        Called::Tool => {
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
            attributes.push(KeyValue::new("gen_ai.tool.name", report.target.clone()));
            attributes.push(KeyValue::new("ballast.target", report.target.clone()));
        }
        Called::Model { api, route } => {
            attributes.push(KeyValue::new("gen_ai.operation.name", operation(*api)));
            attributes.push(KeyValue::new("gen_ai.provider.name", provider(*api)));
            attributes.push(KeyValue::new("gen_ai.request.model", route.clone()));
            attributes.push(KeyValue::new("ballast.route", route.clone()));
            attributes.push(KeyValue::new("ballast.target", answering.target.clone()));
            if answering.code.is_none()
                && let Some(model) = deployments.model_of(&answering.target)
            {
                attributes.push(KeyValue::new("gen_ai.response.model", model.to_owned()));
            }
            if let Some(tokens) = answering.tokens {
                let answered = tokens.answered;
                attributes.push(KeyValue::new(
                    "gen_ai.usage.input_tokens",
                    count(answered.prompt_tokens),
                ));
                attributes.push(KeyValue::new(
                    "gen_ai.usage.output_tokens",
                    count(answered.completion_tokens),
                ));
            }
        }
    }
    let mut retries = 0;
    let mut next = Some(report);
    while let Some(r) = next {
        retries += r.attempts_made().saturating_sub(1);
        next = r.fallback_report.as_deref();
    }
    attributes.push(KeyValue::new("ballast.retries", count(retries as u64)));
    if let Some(stop) = answering.stop.as_ref() {
        attributes.push(KeyValue::new("ballast.stop", stop.to_string()));
    }
    if let Some(state) = answering.breaker {
        attributes.push(KeyValue::new("ballast.breaker", state.as_str()));
    }
    if let Some(left) = answering.budget_left {
        attributes.push(KeyValue::new("ballast.retry_budget_left", count(left)));
    }
    if let Some(left) = answering.run_allowance_left {
        attributes.push(KeyValue::new("ballast.run_allowance_left", i64::from(left)));
    }
    let unknown = report.outcome_unknown || header(request.headers, &BALLAST_OUTCOME) == Some("unknown");
    attributes.push(KeyValue::new("ballast.outcome_unknown", unknown));
    if report.replayed {
        attributes.push(KeyValue::new("ballast.upstream_replayed", true));
    }
    attributes
}

/// `ok`, `fallback` (answered by a fallback), or the stable code: what `ballast_requests_total{outcome}` says.
fn outcome(report: &OutcomeReport) -> &'static str {
    if report.answered_by_fallback() {
        "fallback"
    } else {
        report.answering().code.map_or("ok", |code| code.as_str())
    }
}

/// GenAI's `gen_ai.operation.name` of a call of `api`.
fn operation(api: Api) -> &'static str {
    match api {
        Api::Embeddings => "embeddings",
        _ => "chat",
    }
}

/// GenAI's `gen_ai.provider.name`: by the API spoken.
fn provider(api: Api) -> &'static str {
    match api {
        Api::Messages => "anthropic",
        _ => "openai",
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &http::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// One finished span.
fn span(
    (trace_id, span_id, parent): (u128, u64, u64),
    name: String,
    kind: SpanKind,
    (start, end): (SystemTime, SystemTime),
    attributes: Vec<KeyValue>,
    status: Status,
) -> SpanData {
    SpanData {
        span_context: SpanContext::new(
            TraceId::from(trace_id),
            SpanId::from(span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        ),
        parent_span_id: SpanId::from(parent),
        parent_span_is_remote: false,
        span_kind: kind,
        name: Cow::Owned(name),
        start_time: start,
        end_time: end.max(start),
        attributes,
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope(),
    }
}

/// The instrumentation scope of every span: the gateway, at its version (built once).
fn scope() -> InstrumentationScope {
    static SCOPE: std::sync::OnceLock<InstrumentationScope> = std::sync::OnceLock::new();
    SCOPE
        .get_or_init(|| {
            InstrumentationScope::builder("ballast-gateway")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build()
        })
        .clone()
}

#[cfg(test)]
#[path = "spans_tests.rs"]
mod tests;
