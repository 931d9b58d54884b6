//! The attempt layer as the upstream sees it and as the report tells it: each attempt carries its own timeout,
//! its number and the hop count; it is bounded by that timeout; it is refused when the deadline cannot hold it;
//! and each attempt is a line of the report.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast::{
    Error, clock,
    context::{AttemptNumber, CallContext},
    layer::{AttemptLayer, DeadlineLayer},
    report::AttemptResult,
};
use ballast_chaos::{EndpointProfile, ScriptStep};
use ballast_core::{
    BALLAST_ATTEMPT, BALLAST_HOP, BALLAST_TIMEOUT_MS, CallKind, Deadline, ENVOY_EXPECTED_RQ_TIMEOUT_MS,
};
use bytes::Bytes;
use http::HeaderMap;
use serde_json::json;
use support::*;
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt as _, service_fn};

const SECOND: Duration = Duration::from_secs(1);

/// An upstream that answers `status` and keeps the headers of every request it received.
fn capturing(status: u16) -> (Upstream, Arc<Mutex<Vec<HeaderMap>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let service = service_fn(move |request: http::Request<Bytes>| {
        log.lock().unwrap().push(request.headers().clone());
        let response = http::Response::builder().status(status).body(Bytes::new());
        async move { Ok::<_, Error>(response.expect("a response")) }
    });
    (BoxCloneService::new(service), seen)
}

fn request() -> http::Request<Bytes> {
    http::Request::get("http://upstream.test/orders/1")
        .header(BALLAST_TIMEOUT_MS, "600000")
        .header(BALLAST_HOP, "9")
        .body(Bytes::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_upstream_sees_the_attempt_timeout_number_and_hop() {
    let (upstream, seen) = capturing(200);
    let service = ServiceBuilder::new()
        .layer(AttemptLayer::new(2 * SECOND))
        .service(upstream);
    let mut ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), 30 * SECOND));
    ctx.hop = 2;

    // Early in the call the per-try timeout is the smaller; the retry layer numbers the attempt.
    let mut third = with_context(request(), &ctx);
    third.extensions_mut().insert(AttemptNumber(3));
    service.clone().oneshot(third).await.unwrap();
    // 29 s later what remains (minus the reserve) is the smaller; no number means the first attempt.
    tokio::time::advance(29 * SECOND).await;
    service.oneshot(with_context(request(), &ctx)).await.unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0][BALLAST_TIMEOUT_MS], "2000",
        "replacing the caller's value"
    );
    assert_eq!(seen[0][ENVOY_EXPECTED_RQ_TIMEOUT_MS], "2000");
    assert_eq!(seen[0][BALLAST_ATTEMPT], "3");
    assert_eq!(
        seen[0].get_all(BALLAST_HOP).iter().collect::<Vec<_>>(),
        ["3"],
        "the context's hop + 1, once"
    );
    assert_eq!(seen[1][BALLAST_TIMEOUT_MS], "950");
    assert_eq!(seen[1][ENVOY_EXPECTED_RQ_TIMEOUT_MS], "950");
    assert_eq!(seen[1][BALLAST_ATTEMPT], "1");
}

#[tokio::test(start_paused = true)]
async fn used_alone_an_attempt_gets_its_per_try_timeout_and_the_first_hop() {
    let (upstream, seen) = capturing(200);
    let service = ServiceBuilder::new()
        .layer(AttemptLayer::new(1500 * Duration::from_millis(1)))
        .service(upstream);
    service.oneshot(request()).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0][BALLAST_TIMEOUT_MS], "1500");
    assert_eq!(seen[0][BALLAST_ATTEMPT], "1");
    assert_eq!(seen[0][BALLAST_HOP], "1");
}

#[tokio::test(start_paused = true)]
async fn each_attempt_is_a_line_of_the_report() {
    let (upstream, _seen) = capturing(503);
    let service = ServiceBuilder::new()
        .layer(AttemptLayer::new(2 * SECOND))
        .service(upstream);
    let ctx = CallContext::new(CallKind::Model, Deadline::after(clock::now(), 30 * SECOND));
    let answer = service
        .clone()
        .oneshot(with_context(request(), &ctx))
        .await
        .unwrap();
    assert_eq!(answer.status(), 503, "statuses are the retry layer's to judge");
    let mut second = with_context(request(), &ctx);
    second.extensions_mut().insert(AttemptNumber(2));
    service.oneshot(second).await.unwrap();
    let attempts = ctx.report.snapshot().attempts;
    assert_eq!(attempts.len(), 2);
    assert_eq!((attempts[0].number, attempts[1].number), (1, 2));
    assert!(
        attempts
            .iter()
            .all(|a| a.result == AttemptResult::Status(503) && a.sent && !a.background)
    );
}

#[tokio::test(start_paused = true)]
async fn a_hung_attempt_times_out_at_its_own_timeout_and_is_recorded_as_sent() {
    let hang: &[ScriptStep] = &[ScriptStep::Hang];
    let router = ballast_chaos::router(scripted(
        "lookup_order",
        EndpointProfile::default(),
        &[("o-1", hang)],
    ));
    let service = ServiceBuilder::new()
        .layer(AttemptLayer::new(2 * SECOND))
        .service(ballast::transport::ServiceTransport::new(router.clone()).with_body_limit(BODY_LIMIT));
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), 30 * SECOND));
    let started = clock::now();
    let body = json!({"op": "o-1", "order_id": "A-1"});
    let error = service
        .oneshot(with_context(tool_request("lookup_order", &body), &ctx))
        .await
        .expect_err("hung");
    assert!(
        matches!(error, Error::Timeout { after, .. } if after == 2 * SECOND),
        "{error}"
    );
    assert_eq!(clock::now().saturating_duration_since(started), 2 * SECOND);
    let attempt = &ctx.report.snapshot().attempts[0];
    assert_eq!(attempt.result, AttemptResult::Error("timeout".into()));
    assert_eq!(attempt.duration, 2 * SECOND);
    assert!(attempt.sent);
    let stats = get_json(&router, "/stats").await;
    assert_eq!(stats["endpoints"]["lookup_order"]["statuses"], json!({"hang": 1}));
}

#[tokio::test(start_paused = true)]
async fn an_attempt_the_deadline_cannot_hold_is_never_sent() {
    let (upstream, seen) = capturing(200);
    let service = ServiceBuilder::new()
        .layer(AttemptLayer::new(2 * SECOND))
        .service(upstream);
    // 99 ms left: 49 ms after the reserve, under the 50 ms minimum attempt.
    let ctx = CallContext::new(
        CallKind::ReadOnlyTool,
        Deadline::after(clock::now(), Duration::from_millis(99)),
    );
    let error = service
        .oneshot(with_context(request(), &ctx))
        .await
        .expect_err("refused");
    assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
    assert!(seen.lock().unwrap().is_empty());
    assert!(ctx.report.snapshot().attempts.is_empty(), "no attempt started");
}

#[tokio::test(start_paused = true)]
async fn a_never_sent_error_is_recorded_as_not_sent() {
    let refused = service_fn(|_request: http::Request<Bytes>| async {
        Err::<http::Response<Bytes>, _>(Error::transport(false, "connection refused"))
    });
    let service = ServiceBuilder::new()
        .layer(AttemptLayer::new(2 * SECOND))
        .service(refused);
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), 30 * SECOND));
    let error = service
        .oneshot(with_context(request(), &ctx))
        .await
        .expect_err("refused");
    assert!(matches!(error, Error::Transport { sent: false, .. }), "{error}");
    let attempt = &ctx.report.snapshot().attempts[0];
    assert_eq!(
        attempt.result,
        AttemptResult::Error("never sent: connection refused".into())
    );
    assert!(!attempt.sent);
}

#[tokio::test(start_paused = true)]
async fn a_requests_own_traceparent_goes_on_with_the_attempts_parent_id_and_none_is_made_up() {
    let (upstream, seen) = capturing(200);
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(30 * SECOND))
        .layer(AttemptLayer::new(2 * SECOND))
        .service(upstream);
    let given = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut traced = request();
    traced.headers_mut().insert("traceparent", given.parse().unwrap());
    service.clone().oneshot(traced).await.unwrap();
    service.oneshot(request()).await.unwrap();

    let seen = seen.lock().unwrap();
    let sent = seen[0]["traceparent"].to_str().unwrap();
    let sent = ballast::policy::TraceContext::parse(sent).expect("W3C trace context");
    let given = ballast::policy::TraceContext::parse(given).unwrap();
    assert_eq!(sent.trace_id(), given.trace_id());
    assert_eq!(sent.flags(), given.flags());
    assert_ne!(
        sent.parent_id(),
        given.parent_id(),
        "the attempt is the upstream's parent"
    );
    assert!(
        seen[1].get("traceparent").is_none(),
        "no trace of the caller's, none sent"
    );
}
