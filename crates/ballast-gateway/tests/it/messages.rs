//! Anthropic's Messages API through the gateway, in process over chaos providers that speak it: a message and a
//! stream with the provider's headers passed on, an `overloaded_error` before content falling back unseen and one
//! after content ending the stream with Anthropic's own error event, a 529 storm that leaves the breaker closed,
//! the spend limit answered once with `x-should-retry: false`, token counting, and every error of the gateway's
//! own in Anthropic's envelope.

use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::routing::post;
use ballast_testkit::ConfigText;
use http::HeaderMap;
use serde_json::{Value, json};

use crate::support::models::{Providers, streamed};
use crate::support::{Gateway, Upstream, events, header, read};

/// A first turn on route `model`, `op` naming the operation.
fn message(model: &str, op: &str) -> Value {
    json!({"model": model, "max_tokens": 1024,
           "messages": [{"role": "user", "content": format!("Refund order 1234, op={op}")}]})
}

/// What an Anthropic SDK sends beside the body.
const SDK: [(&str, &str); 2] = [
    ("anthropic-version", "2023-06-01"),
    ("x-stainless-retry-count", "0"),
];

#[tokio::test]
async fn a_message_comes_back_as_the_provider_sent_it_with_its_rate_limits() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let (status, headers, answer) = read(
        gateway
            .post("/v1/messages", &message("claude", "op-g1"), &SDK)
            .await,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["type"], "message");
    assert_eq!(
        answer["model"], "claude-mock",
        "the deployment's model, as the provider answered"
    );
    assert_eq!(answer["content"][0]["type"], "tool_use");
    assert_eq!(answer["content"][0]["name"], "lookup_order");
    assert!(answer["usage"]["input_tokens"].as_u64().unwrap() > 0, "{answer}");
    assert_eq!(header(&headers, "ballast-attempts"), "1");
    assert!(
        !header(&headers, "anthropic-ratelimit-requests-remaining").is_empty(),
        "{headers:?}"
    );
    assert!(header(&headers, "request-id").starts_with("req_"), "{headers:?}");

    let counted = json!({"model": "claude", "messages": message("claude", "op-g1")["messages"]});
    let (status, _, count) = read(gateway.post("/v1/messages/count_tokens", &counted, &SDK).await).await;
    assert_eq!(status, 200, "{count}");
    assert_eq!(count["input_tokens"], answer["usage"]["input_tokens"]);
}

#[tokio::test(start_paused = true)]
async fn a_stream_is_anthropics_events_from_message_start_to_message_stop() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let response = gateway
        .post("/v1/messages", &streamed(message("claude", "op-g2")), &SDK)
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "content-type"), "text/event-stream");
    assert!(!header(response.headers(), "anthropic-ratelimit-tokens-limit").is_empty());
    let (events, whole) = events(response).await;
    assert!(whole);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(names.last(), Some(&"message_stop"), "{names:?}");
    assert!(names.contains(&"content_block_delta"), "{names:?}");
    for (name, data) in &events {
        assert_eq!(
            data["type"],
            name.as_str(),
            "each event's name is its data's type"
        );
    }
}

/// Anthropic under load: every attempt of the primary is a 529 (a stream hears `overloaded_error` after
/// `message_start`). The caller gets the fallback's answer and never sees the error; the primary's breaker
/// stays closed — overload is not failure.
#[tokio::test(start_paused = true)]
async fn an_overloaded_error_before_content_falls_back_unseen_and_a_storm_leaves_the_breaker_closed() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let response = gateway
        .post(
            "/v1/messages",
            &streamed(message("claude-overloaded", "op-g3")),
            &SDK,
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(response.headers(), "ballast-fallback"),
        "claude-overloaded[1] claude-fallback"
    );
    let (events, _) = events(response).await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "message_start").count(),
        1,
        "{names:?}"
    );
    assert!(!names.contains(&"error"), "{names:?}");
    assert_eq!(names.last(), Some(&"message_stop"));

    // The primary alone: its 529s are the answer once the gateway's retries are spent (not to be retried by the
    // SDK), then its throttle refuses before sending (503, to be retried after the wait) — overload each time, and
    // the breaker stays closed.
    let mut statuses = Vec::new();
    for i in 0..12 {
        let (status, headers, answer) = read(
            gateway
                .post(
                    "/v1/messages",
                    &message("claude-storm", &format!("op-s{i}")),
                    &SDK,
                )
                .await,
        )
        .await;
        assert_eq!(answer["type"], "error");
        assert_eq!(answer["error"]["type"], "overloaded_error", "{answer}");
        let retry = header(&headers, "x-should-retry");
        match status {
            529 => assert_eq!(retry, "false", "the gateway retried what it could: {answer}"),
            503 => assert_eq!(
                (retry, answer["error"]["code"].as_str()),
                ("true", Some("overloaded")),
                "{answer}"
            ),
            _ => panic!("{status}: {answer}"),
        }
        statuses.push(status);
    }
    assert_eq!(statuses[0], 529, "{statuses:?}");
    let status = gateway.get_json("/status").await;
    let breaker = &status["models"]["claude-storm"]["deployments"][0]["breaker"];
    assert_eq!(breaker["state"], "closed", "{breaker}");
}

/// After the commit point: the provider's `overloaded_error` ends the stream with Anthropic's own error event,
/// and nothing after it — never `message_stop`.
#[tokio::test(start_paused = true)]
async fn an_overloaded_error_after_content_ends_the_stream_with_anthropics_error_event() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let response = gateway
        .post("/v1/messages", &streamed(message("claude-late", "op-g4")), &SDK)
        .await;
    assert_eq!(response.status(), 200);
    let (events, _) = events(response).await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert!(names.contains(&"content_block_delta"), "{names:?}");
    let (last, data) = events.last().expect("events");
    assert_eq!(last, "error", "{names:?}");
    assert_eq!(data["type"], "error");
    assert_eq!(data["error"]["type"], "overloaded_error", "{data}");
    assert_eq!(data["error"]["code"], "upstream_error", "{data}");
    assert!(!names.contains(&"message_stop"), "{names:?}");
}

/// A spend limit no wait fixes: one request reaches the provider, and the caller is told not to retry.
#[tokio::test]
async fn a_spend_limit_is_sent_once_and_answered_not_to_retry() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let (status, headers, answer) = read(
        gateway
            .post("/v1/messages", &message("claude-spend", "op-g5"), &SDK)
            .await,
    )
    .await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["type"], "error", "Anthropic's envelope: {answer}");
    assert_eq!(answer["error"]["type"], "rate_limit_error", "{answer}");
    assert_eq!(
        answer["error"]["details"]["error_code"], "enforced_spend_limit_reached",
        "the provider's own refusal, as it came (the SDK raises its own class on it): {answer}"
    );
    assert!(header(&headers, "request-id").starts_with("req_"), "{headers:?}");
    assert_eq!(header(&headers, "x-should-retry"), "false");
    assert_eq!(header(&headers, "ballast-attempts"), "1");
    assert_eq!(
        header(&headers, "anthropic-ratelimit-requests-remaining"),
        "0",
        "the provider's limits, passed on"
    );
    let stats = providers.at("spend").stats().await;
    assert_eq!(stats["endpoints"]["model"]["requests"], 1, "{stats}");
}

/// Every error of the gateway's own on the Messages routes is Anthropic's envelope, with the stable code beside
/// the type: an SDK raises its own exception with the gateway's message.
#[tokio::test]
async fn the_gateways_own_errors_are_anthropics_envelope() {
    let providers = Providers::new();
    let config = crate::support::models::config()
        .principal("agents", "AGENTS_KEY")
        .build();
    let gateway = providers
        .gateway_of(&config, &[("AGENTS_KEY", "sk-agents-0123456789")])
        .await;
    let error = |answer: &Value| {
        (
            answer["type"].clone(),
            answer["error"]["type"].clone(),
            answer["error"]["code"].clone(),
        )
    };

    let (status, _, answer) = read(
        gateway
            .post("/v1/messages", &message("claude", "op-e1"), &SDK)
            .await,
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(
        error(&answer),
        (
            json!("error"),
            json!("authentication_error"),
            json!("unauthorized")
        ),
        "{answer}"
    );

    let key = [SDK[0], ("x-api-key", "sk-agents-0123456789")];
    let (status, _, answer) = read(
        gateway
            .post("/v1/messages", &message("nope", "op-e2"), &key)
            .await,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        error(&answer),
        (json!("error"), json!("not_found_error"), json!("model_not_found")),
        "{answer}"
    );
    assert!(
        answer["error"]["message"].as_str().unwrap().contains("claude"),
        "names the routes: {answer}"
    );

    let (status, _, answer) = read(
        gateway
            .post("/v1/messages", &message("agent", "op-e3"), &key)
            .await,
    )
    .await;
    assert_eq!(status, 400, "an OpenAI route speaks no Messages: {answer}");
    assert_eq!(answer["error"]["type"], "invalid_request_error");
    assert!(
        answer["error"]["message"].as_str().unwrap().contains("Messages"),
        "{answer}"
    );

    let (status, _, answer) = read(
        gateway
            .post("/v1/messages", &json!({"model": "claude"}), &key)
            .await,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["type"], "invalid_request_error", "{answer}");

    let (status, headers, answer) = read(
        gateway
            .without_body(http::Method::GET, "/v1/messages", &key)
            .await,
    )
    .await;
    assert_eq!((status, header(&headers, "allow")), (405, "POST"));
    assert_eq!(answer["error"]["type"], "invalid_request_error", "{answer}");

    let late = [key[0], key[1], ("ballast-timeout-ms", "0")];
    let (status, headers, answer) = read(
        gateway
            .post("/v1/messages", &message("claude", "op-e4"), &late)
            .await,
    )
    .await;
    assert_eq!(status, 504);
    assert_eq!(answer["error"]["type"], "timeout_error", "{answer}");
    assert_eq!(header(&headers, "x-should-retry"), "false");

    // Anthropic's endpoints the gateway does not serve are a 404 in Anthropic's envelope too.
    let (status, _, answer) = read(
        gateway
            .post("/v1/messages/batches", &json!({"requests": []}), &key)
            .await,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        error(&answer),
        (json!("error"), json!("not_found_error"), json!("not_found")),
        "{answer}"
    );

    // Two versions: which one counts would be a guess.
    let mut request = http::Request::post("/v1/messages")
        .header("content-type", "application/json")
        .header("x-api-key", "sk-agents-0123456789");
    for version in ["2023-06-01", "2024-10-22"] {
        request = request.header("anthropic-version", version);
    }
    let body = axum::body::Body::from(message("claude", "op-e5").to_string());
    let (status, _, answer) = read(gateway.send(request.body(body).unwrap()).await).await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["code"], "invalid_header", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("more than once"),
        "{answer}"
    );

    // The chat routes keep OpenAI's envelope.
    let chat = json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]});
    let (_, _, answer) = read(gateway.post("/v1/chat/completions", &chat, &key).await).await;
    assert!(
        answer.get("type").is_none() && answer["error"]["code"] == "model_not_found",
        "{answer}"
    );
}

/// What the caller's Anthropic headers become upstream: its version and betas are passed on, its key never is —
/// the deployment's own goes as `x-api-key`.
#[tokio::test]
async fn the_callers_version_and_betas_go_upstream_and_the_deployments_key_replaces_the_callers() {
    let seen: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
    let recorded = Arc::clone(&seen);
    let provider = Router::new().route(
        "/v1/messages",
        post(move |headers: HeaderMap| {
            let recorded = Arc::clone(&recorded);
            async move {
                recorded
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(headers);
                axum::Json(
                    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                                  "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                                  "usage": {"input_tokens": 1, "output_tokens": 1}}),
                )
            }
        }),
    );
    let route = r#"{ base_url = "http://anthropic/v1", model = "claude-x", api_key_env = "ANTHROPIC_KEY", api = ["messages"] }"#;
    let config = ConfigText::new().model("claude", &[route.to_owned()], "").build();
    let gateway = Gateway::start_with(
        &config,
        &[("anthropic", &Upstream::router(provider))],
        &[("ANTHROPIC_KEY", "sk-ant-provider")],
    )
    .await;
    let headers = [
        ("x-api-key", "sk-caller"),
        ("anthropic-beta", "files-api-2025-04-14"),
        ("anthropic-beta", "token-efficient-tools-2025-02-19"),
    ];
    let (status, _, answer) = read(
        gateway
            .post("/v1/messages", &message("claude", "op-h1"), &headers)
            .await,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    assert_eq!(header(&seen[0], "x-api-key"), "sk-ant-provider");
    assert_eq!(
        header(&seen[0], "anthropic-version"),
        "2023-06-01",
        "the default when the caller sends none"
    );
    assert_eq!(
        header(&seen[0], "anthropic-beta"),
        "files-api-2025-04-14,token-efficient-tools-2025-02-19",
        "the betas of every line, one list"
    );
    assert!(!seen[0].contains_key("authorization"));
}

/// Anthropic's Python SDK sends its timeout as written (`15.0`), and `NOT_GIVEN` for a stream or a timeout set on
/// the client: the first is a deadline, the second no deadline at all — never a 400 its caller cannot fix. A
/// deadline header the caller writes is still refused when it is not a time.
#[tokio::test]
async fn the_python_sdks_timeout_headers_are_read_as_it_writes_them() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    // The fixture's default deadline is 10 s.
    for (value, op) in [("5.0", "op-t1"), ("NOT_GIVEN", "op-t2"), ("600", "op-t3")] {
        let headers = [SDK[0], ("x-stainless-timeout", value)];
        let (status, headers, answer) = read(
            gateway
                .post("/v1/messages", &message("claude", op), &headers)
                .await,
        )
        .await;
        assert_eq!(status, 200, "{value}: {answer}");
        let left: u64 = header(&headers, "ballast-remaining-ms").parse().unwrap();
        if value == "5.0" {
            assert!(
                left <= 5_000,
                "{value}: the SDK's timeout is the deadline ({left} ms left)"
            );
        } else {
            assert!(left > 5_000, "{value}: {left} ms left");
        }
    }
    let headers = [SDK[0], ("x-stainless-read-timeout", "NOT_GIVEN")];
    let (status, _, answer) = read(
        gateway
            .post("/v1/messages", &message("claude", "op-t5"), &headers)
            .await,
    )
    .await;
    assert_eq!(status, 200, "the read timeout alike: {answer}");
    let headers = [SDK[0], ("ballast-timeout-ms", "NOT_GIVEN")];
    let (status, _, answer) = read(
        gateway
            .post("/v1/messages", &message("claude", "op-t4"), &headers)
            .await,
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_header", "{answer}");
}
