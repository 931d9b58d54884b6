//! `HttpTransport` against a real chaos server on 127.0.0.1 (real time, short timeouts): answers pass through
//! whatever their status, and failures are sorted by whether the request may have reached the upstream.

use crate::support;

use std::net::Ipv4Addr;
use std::time::Duration;

use ballast::{Error, transport::HttpTransport};
use ballast_chaos::{ChaosServer, EndpointProfile, ScriptStep};
use bytes::Bytes;
use serde_json::{Value, json};
use support::*;
use tokio::net::TcpSocket;
use tower::ServiceExt as _;

const LOOKUP: &str = "lookup_order";

/// The longest any request of these tests may take.
const PATIENCE: Duration = Duration::from_secs(5);

fn transport() -> HttpTransport {
    let client = reqwest::Client::builder()
        .timeout(PATIENCE)
        .build()
        .expect("a client");
    HttpTransport::new(client).with_body_limit(BODY_LIMIT)
}

fn lookup(server: &ChaosServer, op: &str) -> http::Request<Bytes> {
    http::Request::post(server.url(&format!("/tools/{LOOKUP}")))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Bytes::from(json!({"op": op, "order_id": "A-1001"}).to_string()))
        .expect("a request")
}

async fn server(scripts: &[(&str, &[ScriptStep])]) -> ChaosServer {
    ballast_chaos::spawn(scripted(LOOKUP, EndpointProfile::default(), scripts))
        .await
        .expect("a chaos server")
}

#[tokio::test]
async fn an_answer_comes_back_whole_with_its_status_and_headers() {
    let server = server(&[]).await;
    let answer = transport()
        .oneshot(lookup(&server, "o-1"))
        .await
        .expect("answered");
    assert_eq!(answer.status(), 200);
    assert!(
        answer.headers()[http::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body: Value =
        serde_json::from_slice(answer.body().as_bytes().expect("a whole answer")).expect("JSON");
    assert_eq!(body["order_id"], "A-1001");
    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn an_error_status_is_an_answer_not_a_transport_error() {
    let unavailable: &[ScriptStep] = &[ScriptStep::Status(503)];
    let server = server(&[("o-503", unavailable)]).await;
    let answer = transport()
        .oneshot(lookup(&server, "o-503"))
        .await
        .expect("answered");
    assert_eq!(answer.status(), 503);
    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn a_reset_after_sending_may_have_reached_the_upstream() {
    let reset: &[ScriptStep] = &[ScriptStep::Reset];
    let server = server(&[("o-reset", reset)]).await;
    let error = transport()
        .oneshot(lookup(&server, "o-reset"))
        .await
        .expect_err("reset");
    assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");
    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn a_closed_port_is_never_sent() {
    // A socket bound to the port but never listening: connections to it are refused, and while it is held no
    // other socket can bind the port (neither sets SO_REUSEADDR/SO_REUSEPORT) and the kernel picks it for no
    // outgoing connection — unlike a listener dropped before the request, whose port another test could take.
    let reserved = TcpSocket::new_v4().expect("a socket");
    assert!(
        !reserved.reuseaddr().expect("SO_REUSEADDR"),
        "an exclusive hold on the port"
    );
    reserved.bind((Ipv4Addr::LOCALHOST, 0).into()).expect("a port");
    let closed = reserved.local_addr().expect("its address");
    let request = http::Request::get(format!("http://{closed}/tools/{LOOKUP}"))
        .body(Bytes::new())
        .expect("a request");
    let error = transport().oneshot(request).await.expect_err("refused");
    assert!(matches!(error, Error::Transport { sent: false, .. }), "{error}");
    drop(reserved);
}

#[tokio::test]
async fn a_request_without_an_absolute_url_is_never_sent() {
    let request = http::Request::get("/tools/lookup_order")
        .body(Bytes::new())
        .unwrap();
    let error = transport().oneshot(request).await.expect_err("no URL");
    assert!(matches!(error, Error::Transport { sent: false, .. }), "{error}");
}

#[tokio::test]
async fn the_client_timeout_is_a_timeout_of_a_sent_attempt() {
    let hang: &[ScriptStep] = &[ScriptStep::Hang];
    let server = server(&[("o-hang", hang)]).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .expect("a client");
    let error = HttpTransport::new(client)
        .with_body_limit(BODY_LIMIT)
        .oneshot(lookup(&server, "o-hang"))
        .await
        .expect_err("hung");
    match error {
        Error::Timeout { after, .. } => assert!(after >= Duration::from_millis(200), "{after:?}"),
        other => panic!("a timeout: {other}"),
    }
    server.shutdown().await.expect("a clean stop");
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused() {
    let server = server(&[]).await;
    let small = HttpTransport::new(reqwest::Client::new()).with_body_limit(16);
    let error = small
        .oneshot(lookup(&server, "o-big"))
        .await
        .expect_err("too large");
    assert!(matches!(error, Error::BodyTooLarge { limit: 16 }), "{error}");
    server.shutdown().await.expect("a clean stop");
}
