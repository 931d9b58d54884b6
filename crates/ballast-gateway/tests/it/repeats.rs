//! A client that retries on status alone, as the gateway answers it: one round of upstream attempts per request
//! and window, its repeats answered from the failure and counted.
//!
//! It reads `/metrics`: its route and tool are named after it (`support::metrics`).

use ballast_testkit::{ConfigText, deployment};
use serde_json::json;

use crate::support::metrics::sample;
use crate::support::models::chat;
use crate::support::{Gateway, Upstream, header, read};

/// A client that retries on status alone (the Vercel AI SDK, a hand-written loop) against a failing deployment
/// and a failing read-only tool: one round of upstream attempts; its retries answered from the failure, nothing
/// sent, marked and counted; a different request in the same window, or an SDK's first try, still served.
///
/// Paused time: twelve failures in a row would open the deployment's breaker if they spread over its
/// `consecutive_spread` (500 ms) — which a loaded machine's real time can make them do; here only the backoffs pass.
#[tokio::test(start_paused = true)]
async fn a_client_that_retries_on_status_alone_gets_one_round_of_upstream_attempts() {
    let upstream = Upstream::chaos(
        "[endpoints.model]\nerrors = { 500 = 1.0 }\n[endpoints.lookup_order]\nerrors = { 500 = 1.0 }\n",
    );
    let retry = r#"retry = { max_attempts = 3, base = "10ms", cap = "20ms" }"#;
    let config = ConfigText::new()
        .model(
            "failing-repeated",
            &[deployment("http://chaos/v1", "mock")],
            retry,
        )
        .tool("lookup_repeated", "http://chaos/tools/lookup_order", retry)
        .build();
    let gateway = Gateway::metered(&config, &[("chaos", &upstream)], &[]).await;
    let sent = |endpoint: &'static str| {
        let upstream = upstream.clone();
        async move { upstream.stats().await["endpoints"][endpoint]["requests"].as_u64() }
    };
    let routes = [
        (
            "/v1/chat/completions",
            chat("failing-repeated", "op-repeat"),
            "model",
        ),
        (
            "/v1/tools/lookup_repeated",
            json!({"order_id": "A-1001"}),
            "lookup_order",
        ),
    ];
    for (path, body, endpoint) in &routes {
        // The first try and two retries on status alone, as the AI SDK makes them (its 2 s and 4 s backoff
        // shortened: the window is 10 s).
        let mut answers = Vec::new();
        for _ in 0..3 {
            answers.push(read(gateway.post(path, body, &[]).await).await);
        }
        let (status, headers, first) = &answers[0];
        assert_eq!(
            (*status, header(headers, "ballast-attempts")),
            (500, "3"),
            "{first}"
        );
        assert_eq!(
            header(headers, "ballast-repeat"),
            "",
            "{path}: the first try is served"
        );
        for (status, headers, again) in &answers[1..] {
            assert_eq!(*status, 500, "{path}: {again}");
            assert_eq!(again, first, "{path}: the failure again, as it was");
            assert_eq!(header(headers, "ballast-repeat"), "replayed", "{path}");
            assert_eq!(header(headers, "ballast-attempts"), "0", "{path}");
            assert_eq!(header(headers, "x-should-retry"), "false", "{path}");
            assert!(!header(headers, "ballast-remaining-ms").is_empty(), "{path}");
        }
        assert_eq!(
            sent(endpoint).await,
            Some(3),
            "{path}: one round of upstream attempts"
        );

        // A different request in the window is served: another body, another run.
        let mut other = body.clone();
        other["note"] = json!("another request");
        let (_, headers, _) = read(gateway.post(path, &other, &[]).await).await;
        assert_eq!(header(&headers, "ballast-repeat"), "", "{path}");
        let (_, headers, _) = read(gateway.post(path, body, &[("ballast-run-id", "run-2")]).await).await;
        assert_eq!(header(&headers, "ballast-repeat"), "", "{path}");
        assert_eq!(sent(endpoint).await, Some(9), "{path}");

        // `x-stainless-retry-count` is the exact signal: 0 is an SDK's first try, always served; above 0, its
        // retry, answered from the failure.
        let first_try = [("x-stainless-retry-count", "0")];
        let (_, headers, _) = read(gateway.post(path, body, &first_try).await).await;
        assert_eq!(header(&headers, "ballast-repeat"), "", "{path}");
        let retry = [("x-stainless-retry-count", "1")];
        let (_, headers, _) = read(gateway.post(path, body, &retry).await).await;
        assert_eq!(header(&headers, "ballast-repeat"), "replayed", "{path}");
        assert_eq!(sent(endpoint).await, Some(12), "{path}");
    }
    let metrics = gateway.metrics().await;
    for target in ["failing-repeated", "lookup_repeated"] {
        let label = format!("target=\"{target}\"");
        assert_eq!(
            sample(&metrics, "ballast_sdk_retries_total", &[&label]),
            Some(3.0),
            "{target}: two repeats and an SDK's retry\n{metrics}"
        );
    }
}
