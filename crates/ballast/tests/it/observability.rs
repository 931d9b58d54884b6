//! Observability (DESIGN.md, "Observability"), seen as an operator sees it, through a metrics recorder installed
//! for the test: the metrics of a call, a retry, a shed, idempotency and tokens; and the W3C `traceparent` each
//! attempt sends. The spans are in `spans.rs`.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast::idempotency::IdempotencyLayer;
use ballast::policy::TraceContext;
use ballast::{
    policy::{ErrorCode, Priority},
    tool::ToolCall,
};
use ballast_chaos::{EndpointProfile, ScriptStep};
use bytes::Bytes;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::json;
use support::scripted;
use support::tools::{LOOKUP, SyncUpstream, clients, clients_over};
use tower::ServiceExt as _;

/// The chaos upstream where `op-ok` meets a 503 then succeeds, and `op-down` two 503s.
fn flaky_lookup() -> axum::Router {
    ballast_chaos::router(scripted(
        "lookup_order",
        EndpointProfile::default(),
        &[
            ("op-ok", &[ScriptStep::Status(503), ScriptStep::Ok]),
            ("op-down", &[ScriptStep::Status(503), ScriptStep::Status(503)]),
        ],
    ))
}

/// The W3C example value.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// An upstream that answers 503 to every first attempt and 200 after, and keeps each request's `traceparent`.
fn recording_upstream() -> (SyncUpstream, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    let upstream = tower::service_fn(move |request: http::Request<Bytes>| {
        let seen = Arc::clone(&kept);
        async move {
            let traceparent = request
                .headers()
                .get("traceparent")
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let first = request.headers().get("ballast-attempt").is_some_and(|v| v == "1");
            seen.lock().unwrap().push(traceparent);
            let status = if first { 503 } else { 200 };
            Ok::<_, ballast::Error>(
                http::Response::builder()
                    .status(status)
                    .body(Bytes::from_static(b"{}"))
                    .unwrap(),
            )
        }
    });
    (SyncUpstream::new(upstream), seen)
}

#[tokio::test(start_paused = true)]
async fn every_attempt_sends_the_callers_trace_with_a_parent_id_of_its_own() {
    let (upstream, seen) = recording_upstream();
    let tools = clients_over(LOOKUP, upstream);
    let tool = tools.get("lookup_order").unwrap();
    let trace = TraceContext::parse(TRACEPARENT).unwrap();
    tool.call(ToolCall::new(json!({"order_id": "1"})).trace(trace))
        .await
        .expect("the retry succeeds");
    // A call with no trace of the caller's (its request id is Ballast's own) sends none.
    tool.call(ToolCall::new(json!({"order_id": "2"})).run("run-1"))
        .await
        .unwrap();
    tool.call(ToolCall::new(json!({"order_id": "3"}))).await.unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6, "two attempts per call");
    let given: Vec<TraceContext> = seen[0..2]
        .iter()
        .map(|value| TraceContext::parse(value).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    for attempt in &given {
        assert_eq!(attempt.trace_id(), trace.trace_id());
        assert_eq!(attempt.flags(), trace.flags(), "the caller's flags are kept");
        assert_ne!(
            attempt.parent_id(),
            trace.parent_id(),
            "the attempt is the upstream's parent"
        );
    }
    assert_ne!(
        given[0].parent_id(),
        given[1].parent_id(),
        "each attempt has its own id"
    );
    assert!(seen[2..].iter().all(String::is_empty), "{seen:?}");
}

/// What a recorder saw.
struct Seen(Vec<Metric>);

/// One metric: its name, its labels, its value.
type Metric = (String, Vec<(String, String)>, DebugValue);

impl Seen {
    fn of(snapshotter: &Snapshotter) -> Self {
        Seen(
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, value)| {
                    let key = key.key();
                    let labels = key
                        .labels()
                        .map(|l| (l.key().to_owned(), l.value().to_owned()))
                        .collect();
                    (key.name().to_owned(), labels, value)
                })
                .collect(),
        )
    }

    /// The value of metric `name` with exactly `labels`.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<&DebugValue> {
        self.0.iter().find_map(|(n, l, value)| {
            let same = l.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v));
            (n == name && same).then_some(value)
        })
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.get(name, labels) {
            Some(DebugValue::Counter(n)) => *n,
            None => 0,
            other => panic!("{name} is not a counter: {other:?}"),
        }
    }

    fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        match self.get(name, labels) {
            Some(DebugValue::Histogram(values)) => values.iter().map(|v| v.into_inner()).collect(),
            other => panic!("{name}{labels:?} is not a histogram: {other:?}\n{:?}", self.0),
        }
    }
}

/// Runs `test` on a paused current-thread runtime with `recorder` as the thread's recorder: everything the
/// test builds and runs (spawned tasks included) records there.
fn with_recorder<F: std::future::Future>(
    recorder: &DebuggingRecorder,
    test: impl FnOnce() -> F,
) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(recorder, || runtime.block_on(test()))
}

#[test]
fn a_calls_metrics_count_its_outcome_attempts_retries_and_times() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, || async {
        let tools = clients(LOOKUP, &flaky_lookup());
        let tool = tools.get("lookup_order").unwrap();
        tool.call(ToolCall::new(json!({"order_id": "1", "op": "op-ok"})))
            .await
            .unwrap();
        tool.call(ToolCall::new(json!({"order_id": "2", "op": "op-down"})))
            .await
            .expect_err("both attempts fail");
    });
    let seen = Seen::of(&snapshotter);
    let requests = |outcome| {
        seen.counter(
            "ballast_requests_total",
            &[
                ("route", "lookup_order"),
                ("target", "lookup_order"),
                ("outcome", outcome),
            ],
        )
    };
    assert_eq!(requests("ok"), 1);
    assert_eq!(requests("upstream_error"), 1);
    assert_eq!(
        requests("circuit_open"),
        0,
        "every outcome is registered, at zero"
    );
    let target = [("target", "lookup_order")];
    assert_eq!(seen.counter("ballast_attempts_total", &target), 4);
    assert_eq!(
        seen.counter(
            "ballast_retries_total",
            &[("target", "lookup_order"), ("reason", "503")]
        ),
        2
    );
    let route = [("route", "lookup_order")];
    let totals = seen.histogram("ballast_request_duration_seconds", &route);
    let overheads = seen.histogram("ballast_overhead_seconds", &route);
    assert_eq!((totals.len(), overheads.len()), (2, 2));
    // The overhead is the call's time less its attempts': here the backoff before each retry.
    for (total, overhead) in totals.iter().zip(&overheads) {
        assert!(*overhead > 0.0 && overhead <= total, "{overhead} of {total}");
    }
    assert!(matches!(
        seen.get("ballast_breaker_state", &target),
        Some(DebugValue::Gauge(state)) if state.into_inner() == 0.0
    ));
    assert_eq!(seen.counter("ballast_deadline_exceeded_total", &target), 0);
}

const ONE_AT_A_TIME: &str = r#"
    version = 1
    [[tools]]
    name = "lookup_order"
    upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
    concurrency = 1
    queue = 0
"#;

#[test]
fn a_shed_call_is_counted_by_target_priority_and_reason() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, || async {
        let mut profile = scripted("lookup_order", support::slow(Duration::from_millis(200)), &[]);
        profile.seed = support::SEED;
        let tools = clients(ONE_AT_A_TIME, &ballast_chaos::router(profile));
        let tool = tools.get("lookup_order").unwrap();
        let (first, second) = tokio::join!(
            tool.call(ToolCall::new(json!({"order_id": "1"}))),
            tool.call(ToolCall::new(json!({"order_id": "2"})).priority(Priority::Sheddable)),
        );
        first.expect("the first call has the slot");
        assert_eq!(
            second.expect_err("no slot, no queue").code(),
            ErrorCode::Overloaded
        );
    });
    let seen = Seen::of(&snapshotter);
    assert_eq!(
        seen.counter(
            "ballast_shed_total",
            &[
                ("target", "lookup_order"),
                ("priority", "sheddable"),
                ("reason", "queue_full")
            ]
        ),
        1,
        "{:?}",
        seen.0
    );
    assert_eq!(
        seen.counter(
            "ballast_requests_total",
            &[
                ("route", "lookup_order"),
                ("target", "lookup_order"),
                ("outcome", "overloaded")
            ]
        ),
        1
    );
}

#[test]
fn the_idempotency_layer_counts_claims_replays_and_mismatches() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, || async {
        let store = ballast::idempotency::store::open("sqlite::memory:", Default::default())
            .await
            .unwrap();
        let app = axum::Router::new()
            .route("/refunds", axum::routing::post(|| async { "refunded" }))
            .layer(IdempotencyLayer::new(store));
        let post = |body: &'static str| {
            http::Request::post("/refunds")
                .header("idempotency-key", "k-1")
                .header("content-type", "application/json")
                .body(axum::body::Body::from(body))
                .unwrap()
        };
        for body in [r#"{"amount":1}"#, r#"{"amount":1}"#, r#"{"amount":2}"#] {
            app.clone().oneshot(post(body)).await.unwrap();
        }
    });
    let seen = Seen::of(&snapshotter);
    let result = |r| seen.counter("ballast_idempotency_total", &[("result", r)]);
    assert_eq!(
        (result("claimed"), result("replayed"), result("mismatch")),
        (1, 1, 1)
    );
}

#[test]
fn a_model_calls_tokens_are_counted_by_deployment() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, || async {
        let upstreams = support::chat::Upstreams::new(&[("primary", support::chat::profile(""))]);
        let config = support::chat::config("");
        let client = support::chat::client(&config, &upstreams);
        client
            .complete(support::chat::call(&support::chat::first_turn("op-1")))
            .await
            .expect("answered");
    });
    let seen = Seen::of(&snapshotter);
    let answered: u64 = seen
        .0
        .iter()
        .filter(|(name, labels, _)| {
            name == "ballast_tokens_total" && labels.iter().any(|(k, v)| k == "outcome" && v == "answered")
        })
        .map(|(_, _, value)| match value {
            DebugValue::Counter(n) => *n,
            _ => 0,
        })
        .sum();
    assert!(answered > 0, "{:?}", seen.0);
}

/// Issue 18: a model call that falls back is counted as one: by its route's fallbacks and `outcome="fallback"`,
/// the primary's retries by their reason, and the tokens on the deployment that answered.
#[test]
fn a_model_calls_fallback_retries_and_tokens_are_counted_where_they_happened() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, || async {
        let upstreams = support::chat::Upstreams::new(&[
            (
                "primary",
                support::chat::profile("[endpoints.model]\nerrors = { 500 = 1.0 }"),
            ),
            ("fallback", support::chat::profile("")),
        ]);
        let config = support::chat::config("");
        let client = support::chat::client(&config, &upstreams);
        client
            .complete(support::chat::call(&support::chat::first_turn("op-1")))
            .await
            .expect("the fallback answers");
    });
    let seen = Seen::of(&snapshotter);
    let all = || format!("{:?}", seen.0);
    assert_eq!(
        seen.counter("ballast_fallbacks_total", &[("route", "agent")]),
        1,
        "{}",
        all()
    );
    assert_eq!(
        seen.counter(
            "ballast_requests_total",
            &[
                ("route", "agent"),
                ("target", "agent[1] gpt-4.1"),
                ("outcome", "fallback")
            ]
        ),
        1,
        "the call, counted once, on the deployment that answered it: {}",
        all()
    );
    assert_eq!(
        seen.counter(
            "ballast_retries_total",
            &[("target", "agent[0] mock"), ("reason", "500")]
        ),
        2,
        "{}",
        all()
    );
    assert_eq!(
        seen.counter("ballast_attempts_total", &[("target", "agent[0] mock")]),
        3
    );
    let tokens =
        |model, outcome| seen.counter("ballast_tokens_total", &[("model", model), ("outcome", outcome)]);
    assert!(tokens("agent[1] gpt-4.1", "answered") > 0, "{}", all());
    assert_eq!(
        tokens("agent[0] mock", "answered"),
        0,
        "the primary answered nothing"
    );
}

const ONE_RETRY_EVER: &str = r#"
    version = 1
    [[tools]]
    name = "lookup_order"
    upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
    per_try_timeout = "1s"
    retry = { max_attempts = 3 }
    budget = { kind = "token_bucket", capacity = 1, refill_per_sec = 0 }
"#;

#[test]
fn a_retry_the_budget_refuses_is_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_recorder(&recorder, || async {
        let router = ballast_chaos::router(scripted(
            "lookup_order",
            EndpointProfile::default(),
            &[("op-down", &[ScriptStep::Status(503); 3])],
        ));
        let tools = clients(ONE_RETRY_EVER, &router);
        let error = tools
            .get("lookup_order")
            .unwrap()
            .call(ToolCall::new(json!({"order_id": "1", "op": "op-down"})))
            .await
            .expect_err("the upstream is down");
        assert_eq!(error.code(), ErrorCode::RetryBudgetExhausted, "{error}");
    });
    let seen = Seen::of(&snapshotter);
    let target = [("target", "lookup_order")];
    assert_eq!(seen.counter("ballast_retry_budget_exhausted_total", &target), 1);
    assert_eq!(
        seen.counter(
            "ballast_retries_total",
            &[("target", "lookup_order"), ("reason", "503")]
        ),
        1,
        "the one retry the bucket held"
    );
    assert_eq!(seen.counter("ballast_attempts_total", &target), 2);
}
