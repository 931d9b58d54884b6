//! A model call's time: an SDK's timeout is the deadline of its answer, callers that give up early are never held
//! against a healthy model, and a provider's 429 passes its wait on. Paused time: the providers' latencies, hangs
//! and `Retry-After` waits pass at once, and what the tests time is the gateway's clock (`ballast::clock`, tokio's).

use std::time::Duration;

use ballast::clock;
use ballast_testkit::{ConfigText, deployment};
use serde_json::json;

use crate::support::models::{Providers, chat, responses, streamed};
use crate::support::{Gateway, Upstream, header, read};

/// DESIGN.md, "Deadline": an SDK's timeout on a request that is not streamed is the time to the whole answer:
/// the gateway answers `deadline_exceeded` before the SDK's own timeout fires.
#[tokio::test(start_paused = true)]
async fn an_sdk_timeout_is_the_deadline_of_an_answer() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    // The reserve (300 ms here) is what keeps the answer ahead of the SDK's timeout.
    for (name, value) in [("x-stainless-timeout", "2"), ("x-stainless-read-timeout", "2.0")] {
        let started = clock::now();
        let (status, headers, answer) = read(
            gateway
                .post("/v1/responses", &responses("slow", "op-5"), &[(name, value)])
                .await,
        )
        .await;
        let took = clock::now().saturating_duration_since(started);
        assert_eq!(status, 504, "{name}: {answer}");
        assert_eq!(answer["error"]["code"], "deadline_exceeded");
        assert_eq!(header(&headers, "x-should-retry"), "false");
        assert!(
            took < Duration::from_secs(2),
            "{name}: answered after {took:?}, past the SDK's own timeout"
        );
        assert!(
            took > Duration::from_secs(1),
            "{name}: the provider was given the time: {took:?}"
        );
    }
    // Streamed, the SDK's timeout bounds the time to the first byte: nothing came, so 504 before it.
    let started = clock::now();
    let (status, _, answer) = read(
        gateway
            .post(
                "/v1/responses",
                &streamed(responses("slow", "op-5s")),
                &[("x-stainless-timeout", "2")],
            )
            .await,
    )
    .await;
    let took = clock::now().saturating_duration_since(started);
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (504, Some("deadline_exceeded")),
        "{answer}"
    );
    assert!(
        took < Duration::from_secs(2),
        "answered after {took:?}, past the SDK's own timeout"
    );
}

/// Callers whose own timeouts (1 s, by `ballast-timeout-ms` or the SDKs' `x-stainless-timeout`) are shorter than a
/// healthy model's answers (2 s) get 504 `deadline_exceeded`, and none of it is held against the model: three
/// rounds of eight such callers open no breaker and throttle nothing, and the next caller, with the route's 10 s,
/// is served — by the provider, not refused with `circuit_open`.
#[tokio::test(start_paused = true)]
async fn callers_with_short_timeouts_never_open_a_healthy_models_breaker() {
    let provider = Upstream::chaos("[endpoints.model]\nlatency = { p50 = \"2s\", p99 = \"2s\" }");
    let config = ConfigText::new()
        .server("default_timeout = \"10s\"")
        .model("unhurried", &[deployment("http://slow/v1", "mock")], "")
        .build();
    let gateway = Gateway::start_with(&config, &[("slow", &provider)], &[]).await;
    for round in 0..3 {
        let hurried = (0..8).map(|i| {
            let header = if i % 2 == 0 {
                ("ballast-timeout-ms", "1000")
            } else {
                ("x-stainless-timeout", "1")
            };
            let gateway = &gateway;
            async move {
                let body = chat("unhurried", &format!("op-hurry-{round}-{i}"));
                read(gateway.post("/v1/chat/completions", &body, &[header]).await).await
            }
        });
        for (status, _, answer) in futures::future::join_all(hurried).await {
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (504, Some("deadline_exceeded")),
                "round {round}: {answer}"
            );
        }
    }
    let (status, headers, answer) = read(
        gateway
            .post("/v1/chat/completions", &chat("unhurried", "op-patient"), &[])
            .await,
    )
    .await;
    assert_eq!(status, 200, "the next caller with time to spare: {answer}");
    assert_eq!(header(&headers, "ballast-attempts"), "1");
}

/// A provider that answers 429 with `Retry-After: 60` to everything: with 30 s left the call ends at once, code
/// `deadline_exceeded` and a message saying the same (not "retries are spent"); and the answer passes the
/// provider's wait on as `Retry-After` (jittered, at most 60 s), so a caller can back off by itself. With a
/// `Retry-After` over `max_retry_after` (here 10 s, the call has 30 s), the same, code `upstream_error`.
#[tokio::test(start_paused = true)]
async fn a_rate_limited_providers_429_passes_its_wait_on_with_one_truth() {
    let provider = Upstream::chaos("[endpoints.model]\nerrors = { 429 = 1.0 }\nretry_after = \"60s\"");
    for (max_retry_after, code, says) in [
        ("60s", "deadline_exceeded", "deadline"),
        ("10s", "upstream_error", "max_retry_after"),
    ] {
        let config = ConfigText::new()
            .server(&format!("max_retry_after = \"{max_retry_after}\""))
            .model("limited", &[deployment("http://limited/v1", "mock")], "")
            .build();
        let gateway = Gateway::start_with(&config, &[("limited", &provider)], &[]).await;
        let started = clock::now();
        let body = chat("limited", "op-limited");
        let (status, headers, answer) = read(
            gateway
                .post("/v1/chat/completions", &body, &[("ballast-timeout-ms", "30000")])
                .await,
        )
        .await;
        let took = clock::now().saturating_duration_since(started);
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (429, Some(code)),
            "{answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(says) && !message.contains("retries are spent"),
            "{message}"
        );
        let retry_after: u64 = header(&headers, "retry-after")
            .parse()
            .expect("Retry-After in seconds");
        assert!((55..=60).contains(&retry_after), "Retry-After: {retry_after}");
        assert_eq!(header(&headers, "x-should-retry"), "false");
        assert!(
            took < Duration::from_secs(5),
            "ended at once, not after a wait: {took:?}"
        );
    }
}

/// A provider that answers 429 with `Retry-After: 1` to everything: the gateway waits it out once per retry, and
/// when its attempts are spent the final 429 passes the provider's wait on (`Retry-After` and `retry-after-ms`,
/// jittered by at most a second), on a model route and on a tool route alike, so a caller can back off by itself.
#[tokio::test(start_paused = true)]
async fn a_429_after_the_retries_passes_the_providers_wait_on() {
    let provider = Upstream::chaos(
        "[endpoints.model]\nerrors = { 429 = 1.0 }\nretry_after = \"1s\"\n\
         [endpoints.lookup_order]\nerrors = { 429 = 1.0 }\nretry_after = \"1s\"",
    );
    let config = ConfigText::new()
        .model(
            "limited",
            &[deployment("http://chaos/v1", "mock")],
            "retry = { max_attempts = 2 }",
        )
        .tool(
            "lookup_order",
            "http://chaos/tools/lookup_order",
            "retry = { max_attempts = 2 }",
        )
        .build();
    let gateway = Gateway::start(&config, &provider, &[]).await;
    let deadline = [("ballast-timeout-ms", "30000")];
    for (route, path, body) in [
        ("model", "/v1/chat/completions", chat("limited", "op-limited")),
        ("tool", "/v1/tools/lookup_order", json!({"order_id": "A1"})),
    ] {
        let (status, headers, body) = read(gateway.post(path, &body, &deadline).await).await;
        assert_eq!(status, 429, "{route}: {body}");
        assert_eq!(header(&headers, "ballast-attempts"), "2", "{route}");
        assert_eq!(header(&headers, "x-should-retry"), "false", "{route}");
        let millis: u64 = header(&headers, "retry-after-ms")
            .parse()
            .expect("retry-after-ms");
        assert!(
            (1000..=2000).contains(&millis),
            "{route}: retry-after-ms {millis}"
        );
        let seconds: u64 = header(&headers, "retry-after").parse().expect("Retry-After");
        assert!((1..=2).contains(&seconds), "{route}: Retry-After {seconds}");
    }
}
