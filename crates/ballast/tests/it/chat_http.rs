//! The chat client over `HttpTransport` on a real socket (reqwest) against the chaos server on 127.0.0.1: a streamed answer
//! read to `[DONE]`, and a stream cut mid-way ending in an error. Real time (another task serves the socket);
//! chunks 5 ms apart, no fixed sleeps.

use crate::support;

use ballast::{Clients, model::StreamErrorKind, transport::HttpTransport};
use ballast_testkit::{ConfigText, deployment};
use futures::StreamExt as _;
use support::chat::{call, first_turn, profile};

/// The route `agent` with one deployment at `base_url`.
fn route(base_url: &str) -> ballast::model::ModelClient {
    let config = ConfigText::new()
        .model(
            "agent",
            &[deployment(base_url, "mock")],
            "per_try_timeout = \"5s\"",
        )
        .build();
    let config = ballast_config::Config::from_toml_str(&config).expect("a valid config");
    let transport = HttpTransport::new(reqwest::Client::new()).with_body_limit(1 << 20);
    let clients = Clients::from_config(&config).build(transport).unwrap().models;
    clients.get("agent").unwrap().clone()
}

#[tokio::test]
async fn a_stream_over_http_is_read_to_done() {
    let chaos = ballast_chaos::spawn(profile("")).await.expect("chaos listens");
    let route = route(&chaos.url("/v1"));
    let answer = route
        .complete(call(&first_turn("op-h1")))
        .await
        .expect("answered");
    assert_eq!(answer.status, 200);
    let mut stream = route.stream(call(&first_turn("op-h1"))).await.expect("committed");
    let mut chunks = 0;
    while let Some(item) = stream.next().await {
        item.expect("a chunk");
        chunks += 1;
    }
    assert!(chunks >= 4, "{chunks}");
    chaos.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stream_cut_over_http_ends_in_an_error() {
    let cut = "[endpoints.model]\nstream = { cut = 1.0, cut_after_chunks = 2 }";
    let chaos = ballast_chaos::spawn(profile(cut)).await.expect("chaos listens");
    let route = route(&chaos.url("/v1"));
    let mut stream = route.stream(call(&first_turn("op-h2"))).await.expect("committed");
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item);
    }
    assert_eq!(items.len(), 3);
    assert!(items[..2].iter().all(Result::is_ok));
    let error = items[2].as_ref().expect_err("the cut");
    assert_eq!(error.kind, StreamErrorKind::Cut);
    chaos.shutdown().await.unwrap();
}
