//! The model routes as a caller reads them: answers passed through with what Ballast did, OpenAI-style errors with
//! stable codes and an explicit `x-should-retry`, the 401 in OpenAI's envelope, a shed that invites a retry, a
//! context overflow handled per route, `/v1/models`, `/status`.

use http::Method;
use serde_json::json;

use crate::support::models::{Providers, chat, responses};
use crate::support::{header, read};

/// Paused time: what is left of the route's 10 s is exact.
#[tokio::test(start_paused = true)]
async fn answers_pass_through_with_what_ballast_did() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;

    let (status, headers, answer) = read(
        gateway
            .post("/v1/responses", &responses("agent", "op-1"), &[])
            .await,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "response");
    assert_eq!(answer["output"][0]["name"], "lookup_order");
    assert_eq!(answer["model"], "mock", "the provider's answer, as it sent it");
    assert_eq!(header(&headers, "ballast-attempts"), "1");
    assert!(header(&headers, "ballast-remaining-ms").parse::<u64>().unwrap() > 9_000);
    assert!(!header(&headers, "x-request-id").is_empty());

    let (status, _, answer) = read(
        gateway
            .post("/v1/chat/completions", &chat("agent", "op-1"), &[])
            .await,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "lookup_order"
    );

    let body = json!({"model": "embed", "input": ["a", "b"]});
    let (status, _, answer) = read(gateway.post("/v1/embeddings", &body, &[]).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"].as_array().unwrap().len(), 2);

    let models = gateway.get_json("/v1/models").await;
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"agent") && ids.contains(&"small-fallback"),
        "{ids:?}"
    );
}

#[tokio::test]
async fn errors_are_openai_style_with_a_stable_code_and_say_whether_to_retry() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;

    // The provider fails every attempt: the gateway's own three, then an answer that invites no more.
    let (status, headers, answer) = read(
        gateway
            .post("/v1/responses", &responses("failing", "op-2"), &[])
            .await,
    )
    .await;
    assert_eq!(status, 500, "{answer}");
    assert_eq!(answer["error"]["code"], "upstream_error");
    assert_eq!(answer["error"]["type"], "server_error");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retries are spent"),
        "{answer}"
    );
    assert_eq!(header(&headers, "x-should-retry"), "false");
    assert_eq!(header(&headers, "ballast-attempts"), "3");
    let stats = providers.at("failing").stats().await;
    assert_eq!(stats["endpoints"]["model"]["requests"], 3, "{stats}");

    // Another Ballast in front (`ballast-hop`): one attempt here, retries happen at one layer.
    let hop = [("ballast-hop", "1")];
    let (status, headers, _) = read(
        gateway
            .post("/v1/chat/completions", &chat("failing", "op-3"), &hop)
            .await,
    )
    .await;
    assert_eq!((status, header(&headers, "ballast-attempts")), (500, "1"));

    let cases = [
        (
            json!({"model": "nope", "input": "hi"}),
            "/v1/responses",
            404,
            "model_not_found",
        ),
        (json!({"input": "hi"}), "/v1/responses", 400, "invalid_request"),
        (
            json!({"model": "chat-only", "input": "hi"}),
            "/v1/responses",
            400,
            "invalid_request",
        ),
        (
            json!({"model": "agent", "messages": "not a list"}),
            "/v1/chat/completions",
            400,
            "invalid_request",
        ),
    ];
    for (body, path, want_status, code) in cases {
        let (status, headers, answer) = read(gateway.post(path, &body, &[]).await).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (want_status, Some(code)),
            "{body}: {answer}"
        );
        assert_eq!(header(&headers, "x-should-retry"), "false");
        assert!(
            answer["error"]["message"].as_str().is_some_and(|m| m.len() > 20),
            "{answer}"
        );
    }
    let (status, headers, _) = read(
        gateway
            .without_body(Method::GET, "/v1/chat/completions", &[])
            .await,
    )
    .await;
    assert_eq!((status, header(&headers, "allow")), (405, "POST"));
}

#[tokio::test]
async fn the_401_of_a_model_route_is_openai_style() {
    let providers = Providers::new();
    let config = crate::support::models::config()
        .principal("agents", "AGENTS_KEY")
        .build();
    let gateway = providers
        .gateway_of(&config, &[("AGENTS_KEY", "sk-agents-0123456789")])
        .await;
    let (status, headers, answer) = read(
        gateway
            .post("/v1/responses", &responses("agent", "op-4"), &[])
            .await,
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(answer["error"]["code"], "unauthorized", "{answer}");
    assert_eq!(header(&headers, "www-authenticate"), "Bearer");
    let key = [("authorization", "Bearer sk-agents-0123456789")];
    let (status, _, _) = read(
        gateway
            .post("/v1/responses", &responses("agent", "op-4"), &key)
            .await,
    )
    .await;
    assert_eq!(status, 200);
}

/// Paused time: the shed provider takes 600 ms, and the second call is refused while the first holds the slot.
#[tokio::test(start_paused = true)]
async fn a_shed_invites_a_retry_and_a_context_overflow_is_handled_per_route() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let body = responses("shed", "op-12");
    let (a, b) = tokio::join!(
        gateway.post("/v1/responses", &body, &[]),
        gateway.post("/v1/responses", &body, &[]),
    );
    let mut statuses = vec![a.status().as_u16(), b.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 503], "one slot, no queue");
    let shed = if a.status() == 503 { a } else { b };
    assert_eq!(header(shed.headers(), "x-should-retry"), "true");
    assert_eq!(header(shed.headers(), "ballast-shed"), "queue_full");
    let wait: u64 = header(shed.headers(), "retry-after").parse().unwrap();
    assert!((1..=60).contains(&wait));
    let (_, _, answer) = read(shed).await;
    assert_eq!(answer["error"]["code"], "overloaded");

    let long = "x".repeat(500);
    let history = json!([
        {"role": "user", "content": format!("earlier question {long}")},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "Refund order 1234, op=op-13"},
    ]);
    let body = json!({"model": "small", "input": history});
    let (status, headers, answer) = read(gateway.post("/v1/responses", &body, &[]).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "ballast-truncated"), "2");
    let body = json!({"model": "small-fallback", "messages": history});
    let (status, headers, answer) = read(gateway.post("/v1/chat/completions", &body, &[]).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["model"], "large-model");
    assert_eq!(
        header(&headers, "ballast-fallback"),
        "small-fallback[1] large-model"
    );

    let status = gateway.get_json("/status").await;
    let deployments = status["models"]["quota"]["deployments"].as_array().unwrap();
    assert_eq!(deployments[1]["name"], "quota[1] fallback-model");
    assert_eq!(deployments[0]["breaker"]["state"], "closed");
}
