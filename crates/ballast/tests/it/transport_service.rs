//! `ServiceTransport` over the chaos router in process (paused time): the same contract as `HttpTransport`
//! without a socket — answers pass through whole, a body that fails midway is a transport error after sending,
//! a body over the limit is refused, and a failing service is sorted by whether it had the request.

use crate::support;

use std::task::{Context, Poll};
use std::time::Duration;

use ballast::{Error, layer::AttemptLayer, transport::ServiceTransport};
use ballast_chaos::{EndpointProfile, ScriptStep};
use bytes::Bytes;
use futures::future::{Ready, ready};
use http_body_util::Full;
use serde_json::{Value, json};
use support::*;
use tower::{ServiceBuilder, ServiceExt as _, service_fn};

const LOOKUP: &str = "lookup_order";

fn lookup(op: &str) -> http::Request<Bytes> {
    tool_request(LOOKUP, &json!({"op": op, "order_id": "A-1001"}))
}

fn chaos(scripts: &[(&str, &[ScriptStep])]) -> axum::Router {
    ballast_chaos::router(scripted(LOOKUP, EndpointProfile::default(), scripts))
}

#[tokio::test(start_paused = true)]
async fn the_chaos_router_answers_in_process() {
    let transport = ServiceTransport::new(chaos(&[])).with_body_limit(BODY_LIMIT);
    let answer = transport.oneshot(lookup("o-1")).await.expect("answered");
    assert_eq!(answer.status(), 200);
    let body: Value =
        serde_json::from_slice(answer.body().as_bytes().expect("a whole answer")).expect("JSON");
    assert_eq!(body["op"], "o-1");
}

#[tokio::test(start_paused = true)]
async fn a_scripted_error_status_passes_through_with_its_headers() {
    let unavailable: &[ScriptStep] = &[ScriptStep::Status(503)];
    let faults = EndpointProfile {
        retry_after: Some(ballast_chaos::RetryAfterForm::Seconds(2)),
        ..EndpointProfile::default()
    };
    let router = ballast_chaos::router(scripted(LOOKUP, faults, &[("o-503", unavailable)]));
    let answer = ServiceTransport::new(router)
        .with_body_limit(BODY_LIMIT)
        .oneshot(lookup("o-503"))
        .await
        .expect("answered");
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.headers()[http::header::RETRY_AFTER], "2");
}

#[tokio::test(start_paused = true)]
async fn a_reset_is_a_transport_error_after_sending() {
    let reset: &[ScriptStep] = &[ScriptStep::Reset];
    let error = ServiceTransport::new(chaos(&[("o-reset", reset)]))
        .with_body_limit(BODY_LIMIT)
        .oneshot(lookup("o-reset"))
        .await
        .expect_err("reset");
    assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_body_over_the_limit_is_refused() {
    let error = ServiceTransport::new(chaos(&[]))
        .with_body_limit(16)
        .oneshot(lookup("o-big"))
        .await
        .expect_err("too large");
    assert!(matches!(error, Error::BodyTooLarge { limit: 16 }), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_hang_is_bounded_by_the_attempt_timeout() {
    let hang: &[ScriptStep] = &[ScriptStep::Hang];
    let service = ServiceBuilder::new()
        .layer(AttemptLayer::new(Duration::from_secs(3)))
        .service(ServiceTransport::new(chaos(&[("o-hang", hang)])).with_body_limit(BODY_LIMIT));
    let started = ballast::clock::now();
    let error = service.oneshot(lookup("o-hang")).await.expect_err("hung");
    assert!(matches!(error, Error::Timeout { .. }), "{error}");
    assert_eq!(
        ballast::clock::now().saturating_duration_since(started),
        Duration::from_secs(3)
    );
}

#[tokio::test(start_paused = true)]
async fn any_request_body_type_made_from_bytes_can_be_used() {
    let echo = service_fn(|request: http::Request<axum::body::Body>| async move {
        let body = axum::body::to_bytes(request.into_body(), 1024).await?;
        Ok::<_, axum::Error>(http::Response::new(Full::new(body)))
    });
    let transport =
        ServiceTransport::<_, axum::body::Body>::with_request_body(echo).with_body_limit(BODY_LIMIT);
    let request = http::Request::post("http://echo.test/")
        .body(Bytes::from_static(b"ping"))
        .unwrap();
    let answer = transport.oneshot(request).await.expect("echoed");
    assert_eq!(answer.body().as_bytes().expect("a whole answer"), &b"ping"[..]);
}

#[tokio::test(start_paused = true)]
async fn a_failing_call_may_have_acted_and_a_service_never_ready_never_had_the_request() {
    let failing = service_fn(|_request: http::Request<Full<Bytes>>| async {
        Err::<http::Response<Full<Bytes>>, _>(std::io::Error::other("the handler failed"))
    });
    let error = ServiceTransport::new(failing)
        .with_body_limit(BODY_LIMIT)
        .oneshot(lookup("o-1"))
        .await
        .expect_err("failed");
    assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");

    let error = ServiceTransport::new(NeverReady)
        .with_body_limit(BODY_LIMIT)
        .oneshot(lookup("o-1"))
        .await
        .expect_err("not ready");
    assert!(matches!(error, Error::Transport { sent: false, .. }), "{error}");
}

/// A service whose readiness fails.
#[derive(Clone)]
struct NeverReady;

impl tower::Service<http::Request<Full<Bytes>>> for NeverReady {
    type Response = http::Response<Full<Bytes>>;
    type Error = std::io::Error;
    type Future = Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Err(std::io::Error::other("the service is closed")))
    }

    fn call(&mut self, _request: http::Request<Full<Bytes>>) -> Self::Future {
        ready(Ok(http::Response::new(Full::new(Bytes::new()))))
    }
}
