//! Shared fixtures of the layer tests: chaos profiles with scripts, the deadline and attempt layers over the
//! chaos router in process, tool requests, and what the chaos upstream saw (stats, ledger).

// Each test file uses its own subset of the fixtures.
#![allow(dead_code)]

pub(crate) mod chat;
pub(crate) mod idempotency;
pub(crate) mod shared;
pub(crate) mod tools;

use std::time::Duration;

use axum::Router;
use ballast::{
    context::CallContext,
    layer::{AttemptLayer, AttemptService, DeadlineLayer, DeadlineService},
    transport::ServiceTransport,
};
use ballast_chaos::{EndpointProfile, Latency, Profile, ScriptStep};
use bytes::Bytes;
use serde_json::Value;
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt as _};

/// The body limit of the transports under test.
pub(crate) const BODY_LIMIT: u64 = 1 << 20;

/// The seed of every chaos profile of these tests.
pub(crate) const SEED: u64 = 4;

/// A profile (under [`SEED`]) where `endpoint` has `faults` and meets `steps` for each (op, steps).
pub(crate) fn scripted(
    endpoint: &str,
    faults: EndpointProfile,
    scripts: &[(&str, &[ScriptStep])],
) -> Profile {
    ballast_testkit::scripted(SEED, endpoint, faults, scripts)
}

/// Faults of an endpoint that always takes exactly `latency` before it acts.
pub(crate) fn slow(latency: Duration) -> EndpointProfile {
    EndpointProfile {
        latency: Some(Latency {
            p50: latency,
            p99: latency,
        }),
        ..EndpointProfile::default()
    }
}

/// `POST /tools/{tool}` on the in-process chaos upstream with a JSON `body`.
pub(crate) fn tool_request(tool: &str, body: &Value) -> http::Request<Bytes> {
    http::Request::post(format!("http://chaos.test/tools/{tool}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Bytes::from(body.to_string()))
        .expect("a valid request")
}

/// The same request carrying `ctx`.
pub(crate) fn with_context(mut request: http::Request<Bytes>, ctx: &CallContext) -> http::Request<Bytes> {
    request.extensions_mut().insert(ctx.clone());
    request
}

/// A boxed upstream test double.
pub(crate) type Upstream = BoxCloneService<http::Request<Bytes>, http::Response<Bytes>, ballast::Error>;

/// A boxed stack of Ballast's layers (or a transport): what it answers is a [`ballast::Body`].
pub(crate) type Stack = BoxCloneService<http::Request<Bytes>, http::Response<ballast::Body>, ballast::Error>;

/// `deadline -> attempt(per_try) -> ServiceTransport(router)`: the ends of the tool stack, in process.
pub(crate) fn stack(
    router: Router,
    deadline: DeadlineLayer,
    per_try: Duration,
) -> DeadlineService<AttemptService<ServiceTransport<Router>>> {
    ServiceBuilder::new()
        .layer(deadline)
        .layer(AttemptLayer::new(per_try))
        .service(ServiceTransport::new(router).with_body_limit(BODY_LIMIT))
}

/// `GET path` on the chaos router, as JSON (`/stats`, `/ledger`).
pub(crate) async fn get_json(router: &Router, path: &str) -> Value {
    let request = http::Request::get(path)
        .body(axum::body::Body::empty())
        .expect("a valid request");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("a body");
    serde_json::from_slice(&body).expect("JSON")
}

/// How many requests `endpoint` of the chaos router received.
pub(crate) async fn requests(router: &Router, endpoint: &str) -> u64 {
    get_json(router, "/stats").await["endpoints"][endpoint]["requests"]
        .as_u64()
        .unwrap_or(0)
}

/// How many times `op` executed, by the chaos ledger.
pub(crate) async fn executions(router: &Router, op: &str) -> u64 {
    get_json(router, "/ledger").await["ops"][op]["executions"]
        .as_u64()
        .unwrap_or(0)
}
