//! Streamed model answers: committed at their first content event, ended by their API's error event when the
//! provider goes silent or is cut, never cut while their events keep coming, falling back unseen before the commit
//! point, and counting their tokens. Paused time: the providers' stalls and event intervals pass at once.
//!
//! The tests that read `/metrics` open their gateway with model routes named after them (`support::metrics`).

use std::time::Duration;

use ballast::clock;
use ballast_testkit::{ConfigText, deployment};
use serde_json::{Value, json};

use crate::support::metrics::sample;
use crate::support::models::{Providers, chat, responses, streamed};
use crate::support::{events as read_events, header};

/// The Python SDK's read timeout bounds a stream's gaps: a provider gone silent ends the stream with the API's
/// error event before the SDK's own timeout would cut it without one.
#[tokio::test(start_paused = true)]
async fn a_silent_gap_ends_the_stream_with_its_error_event_before_the_sdk_gives_up() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let response = gateway
        .post(
            "/v1/responses",
            &streamed(responses("stall", "op-gap")),
            &[("x-stainless-read-timeout", "2.0")],
        )
        .await;
    assert_eq!(response.status(), 200);
    let started = clock::now();
    let (events, _) = read_events(response).await;
    let took = clock::now().saturating_duration_since(started);
    let (name, last) = events.last().expect("events");
    assert_eq!(name, "error", "{events:?}");
    assert!(
        last["message"].as_str().unwrap().contains("stream_idle_timeout"),
        "{last}"
    );
    assert!(
        took < Duration::from_secs(2),
        "ended after {took:?}: the SDK's read timeout would have fired first"
    );
}

/// A streamed answer longer than the SDK's timeout is not cut while its events keep coming: the SDK's timeout
/// bounds the time to the commit point (the status line) and, the Python SDK's, the gaps.
#[tokio::test(start_paused = true)]
async fn a_stream_longer_than_the_sdk_timeout_is_not_cut() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let started = clock::now();
    let response = gateway
        .post(
            "/v1/responses",
            &streamed(responses("slow-stream", "op-6")),
            &[("x-stainless-timeout", "2"), ("x-stainless-read-timeout", "2.0")],
        )
        .await;
    assert_eq!(response.status(), 200);
    let (events, whole) = read_events(response).await;
    assert!(whole, "the stream ended cleanly");
    assert!(
        clock::now().saturating_duration_since(started) > Duration::from_secs(3),
        "well over the SDK's timeout"
    );
    assert_eq!(
        events.last().map(|(name, _)| name.as_str()),
        Some("response.completed")
    );
}

/// DESIGN.md, "Streaming": an error the provider sends after `response.created` (insufficient quota) falls back
/// before the status line: the caller sees the fallback's stream only, and the failed deployment is skipped.
#[tokio::test]
async fn a_quota_error_after_response_created_falls_back_unseen() {
    let providers = Providers::new();
    // The route is named after the test: the fallbacks counted are its own.
    let config = ConfigText::new()
        .server("default_timeout = \"10s\"\nreserve = \"300ms\"")
        .model(
            "quota-unseen",
            &[
                deployment("http://quota/v1", "primary-model"),
                deployment("http://ok/v1", "fallback-model"),
            ],
            "",
        )
        .build();
    let gateway = providers.metered(&config).await;
    for (path, body) in [
        ("/v1/responses", streamed(responses("quota-unseen", "op-7"))),
        ("/v1/chat/completions", streamed(chat("quota-unseen", "op-8"))),
    ] {
        let response = gateway.post(path, &body, &[]).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            header(response.headers(), "ballast-fallback"),
            "quota-unseen[1] fallback-model"
        );
        let (events, whole) = read_events(response).await;
        assert!(whole);
        assert!(
            events
                .iter()
                .all(|(name, data)| name != "error" && data.get("error").is_none_or(Value::is_null)),
            "{path}: {events:?}"
        );
    }
    let stats = providers.at("quota").stats().await;
    assert_eq!(
        stats["endpoints"]["model"]["requests"], 1,
        "skipped after its quota was spent: {stats}"
    );
    let metrics = gateway.metrics().await;
    assert_eq!(
        sample(&metrics, "ballast_fallbacks_total", &["route=\"quota-unseen\""]),
        Some(2.0),
        "both calls answered by the fallback:\n{metrics}"
    );
}

/// A stream cut after its commit point ends with the API's error event, never a clean end.
#[tokio::test]
async fn a_cut_stream_ends_with_the_apis_error_event() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let response = gateway
        .post("/v1/responses", &streamed(responses("cut", "op-9")), &[])
        .await;
    assert_eq!(response.status(), 200);
    let (events, _) = read_events(response).await;
    let (last_name, last) = events.last().expect("events");
    assert_eq!(last_name, "error", "{events:?}");
    assert_eq!(last["type"], "error");
    assert_eq!(
        last["error"]["code"], "upstream_error",
        "an error object the Python SDK raises on: {last}"
    );
    let before = events[events.len() - 2].1["sequence_number"].as_u64().unwrap();
    assert_eq!(last["sequence_number"], before + 1);
    assert!(!events.iter().any(|(name, _)| name == "response.completed"));

    let response = gateway
        .post("/v1/chat/completions", &streamed(chat("cut", "op-10")), &[])
        .await;
    let (events, _) = read_events(response).await;
    let (_, last) = events.last().expect("events");
    assert_eq!(last["error"]["code"], "upstream_error", "{events:?}");
    assert!(!events.iter().any(|(_, data)| data == "[DONE]"));
}

/// Issue 18: chat token usage is counted — the gateway asks the provider for it even when the caller did not
/// (the SDKs do not by default) — and the extra chunk is dropped when the caller did not ask for it.
#[tokio::test]
async fn chat_streams_count_their_tokens_and_hand_usage_only_to_who_asked() {
    let providers = Providers::new();
    // The route is named after the test: the tokens counted are its own.
    let config = ConfigText::new()
        .model("usage-counted", &[deployment("http://ok/v1", "mock")], "")
        .build();
    let gateway = providers.metered(&config).await;
    let answered = ["model=\"usage-counted[0] mock\"", "outcome=\"answered\""];
    let mut asked = streamed(chat("usage-counted", "op-11"));
    asked["stream_options"] = json!({"include_usage": true});
    let mut counted = 0.0;
    for (body, wants_usage) in [(streamed(chat("usage-counted", "op-11")), false), (asked, true)] {
        let (events, _) = read_events(gateway.post("/v1/chat/completions", &body, &[]).await).await;
        let usage_chunks = events
            .iter()
            .filter(|(_, d)| d.get("usage").is_some_and(|u| !u.is_null()))
            .count();
        assert_eq!(usage_chunks, usize::from(wants_usage), "{events:?}");
        assert_eq!(events.last().unwrap().1, "[DONE]");
        // The chaos provider sends usage only to a request that asks for it: tokens counted for a caller that
        // did not ask mean the gateway asked on its behalf.
        let metrics = gateway.metrics().await;
        let now = sample(&metrics, "ballast_tokens_total", &answered)
            .unwrap_or_else(|| panic!("no token count:\n{metrics}"));
        assert!(
            now > counted,
            "asked for usage: {wants_usage}; {counted} -> {now}"
        );
        counted = now;
    }
}
