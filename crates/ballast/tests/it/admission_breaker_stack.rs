//! The guard layers in the assembled tool stack over the chaos upstream (in process, paused time, seeded):
//! `deadline -> admission -> retry -> breaker -> attempt -> ServiceTransport(chaos)`.
//!
//! Admission sits outside retry, so a call keeps its slot through every retry and backoff; the breaker sits
//! inside retry, so it counts each attempt, and the retry layer stops at once on an open circuit.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use ballast::{
    Error, clock,
    context::CallContext,
    layer::{AdmissionLayer, AttemptLayer, BreakerLayer, DeadlineLayer, RetryLayer},
    transport::ServiceTransport,
};
use ballast_chaos::ScriptStep;
use ballast_core::{
    AdmissionConfig, BreakerConfig, BreakerState, CallKind, CircuitBreaker, Deadline, ErrorCode, RatioBudget,
    RetryPolicy,
};
use bytes::Bytes;
use serde_json::{Value, json};
use support::{BODY_LIMIT, Stack, requests, scripted, slow, tool_request, with_context};
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt, service_fn};

const TIMEOUT: Duration = Duration::from_secs(30);

/// The operations in the order their attempts reached the upstream.
type Arrivals = Arc<Mutex<Vec<String>>>;

/// The transport over `router`, noting each attempt's operation as it leaves.
fn transport(router: &Router, arrivals: &Arrivals) -> Stack {
    let transport = ServiceTransport::new(router.clone()).with_body_limit(BODY_LIMIT);
    let arrivals = Arc::clone(arrivals);
    BoxCloneService::new(service_fn(move |request: http::Request<Bytes>| {
        let args: Value = serde_json::from_slice(request.body()).unwrap();
        arrivals
            .lock()
            .unwrap()
            .push(args["op"].as_str().unwrap().to_owned());
        transport.clone().oneshot(request)
    }))
}

/// The whole tool stack for a read-only tool, one slot, breaker opening on three failures in a row.
fn stack(
    router: &Router,
    admission: &AdmissionLayer,
    breaker: &Arc<CircuitBreaker>,
    arrivals: &Arrivals,
) -> Stack {
    let retry = RetryLayer::new(RetryPolicy::default(), Arc::new(RatioBudget::default())).with_rng_seed(4);
    BoxCloneService::new(
        ServiceBuilder::new()
            .layer(
                DeadlineLayer::new(TIMEOUT)
                    .kind(CallKind::ReadOnlyTool)
                    .target("lookup_order"),
            )
            .layer(admission.clone())
            .layer(retry)
            .layer(BreakerLayer::new(Arc::clone(breaker)))
            .layer(AttemptLayer::new(Duration::from_secs(2)))
            .service(transport(router, arrivals)),
    )
}

fn breaker() -> Arc<CircuitBreaker> {
    let config = BreakerConfig::builder()
        .consecutive_failures(3)
        .consecutive_spread(Duration::ZERO)
        .build()
        .unwrap();
    Arc::new(CircuitBreaker::seeded(config, Some(9)))
}

/// A `lookup_order` call for `op` with its own context (to read its report).
fn call(op: &str) -> (http::Request<Bytes>, CallContext) {
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), TIMEOUT));
    let request = tool_request("lookup_order", &json!({"op": op, "order_id": "A-1001"}));
    (with_context(request, &ctx), ctx)
}

#[tokio::test(start_paused = true)]
async fn a_call_keeps_its_admission_slot_through_its_retries() {
    let flaky = [ScriptStep::Status(503), ScriptStep::Status(503), ScriptStep::Ok];
    let router = ballast_chaos::router(scripted(
        "lookup_order",
        slow(Duration::from_millis(50)),
        &[("flaky", &flaky)],
    ));
    let admission = AdmissionLayer::new(AdmissionConfig::new(1, 4)).unwrap();
    let arrivals = Arrivals::default();
    let service = stack(&router, &admission, &breaker(), &arrivals);

    let (request, flaky_ctx) = call("flaky");
    let first = tokio::spawn(service.clone().oneshot(request));
    tokio::task::yield_now().await;
    let (request, _) = call("next");
    let second = tokio::spawn(service.clone().oneshot(request));
    tokio::task::yield_now().await;
    assert_eq!((admission.in_flight(), admission.queued()), (1, 1));

    assert_eq!(first.await.unwrap().unwrap().status(), 200);
    assert_eq!(second.await.unwrap().unwrap().status(), 200);
    assert_eq!(flaky_ctx.report.snapshot().attempts.len(), 3);
    assert_eq!(
        *arrivals.lock().unwrap(),
        ["flaky", "flaky", "flaky", "next"],
        "the waiting call started only after every retry of the first"
    );
    assert_eq!((admission.in_flight(), admission.queued()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn the_breaker_counts_each_attempt_and_the_retry_layer_stops_on_an_open_circuit() {
    let down = [ScriptStep::Status(503); 3];
    let router = ballast_chaos::router(scripted(
        "lookup_order",
        slow(Duration::from_millis(50)),
        &[("down", &down)],
    ));
    let admission = AdmissionLayer::new(AdmissionConfig::new(4, 4)).unwrap();
    let arrivals = Arrivals::default();
    let breaker = breaker();
    let service = stack(&router, &admission, &breaker, &arrivals);

    // One call, three attempts, three 503s: three failures in a row open the breaker.
    let (request, ctx) = call("down");
    let answer = service.clone().oneshot(request).await.unwrap();
    assert_eq!(answer.status(), 503);
    let report = ctx.report.snapshot();
    assert_eq!(report.attempts.len(), 3);
    assert_eq!(report.breaker, Some(BreakerState::Open));
    assert_eq!(breaker.state(clock::now()), BreakerState::Open);

    // The next call fails fast: nothing sent, no retries, no backoff.
    let (request, ctx) = call("fine");
    let asked = clock::now();
    match service.oneshot(request).await {
        Err(Error::CircuitOpen { retry_in: Some(_) }) => {}
        other => panic!("expected a fail-fast circuit_open, got {other:?}"),
    }
    assert_eq!(clock::now(), asked);
    assert_eq!(requests(&router, "lookup_order").await, 3);
    let report = ctx.report.snapshot();
    assert_eq!(report.code, Some(ErrorCode::CircuitOpen));
    assert_eq!(report.breaker, Some(BreakerState::Open));
}
