//! A Responses API response's state: continued, retrieved, deleted and cancelled at the deployment that made it,
//! and only by the principal that made it.

use http::Method;
use serde_json::json;

use crate::support::models::{Providers, config, responses};
use crate::support::{header, read};

/// DESIGN.md, "Fallback and context": a response is continued by the deployment that made it, retrieved and
/// deleted there, and another principal's is not found.
#[tokio::test]
async fn a_response_is_continued_retrieved_and_deleted_where_it_was_made() {
    let providers = Providers::new();
    let gateway = providers.gateway(&[]).await;
    let (status, headers, first) = read(
        gateway
            .post("/v1/responses", &responses("stateful", "op-state"), &[])
            .await,
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["model"], "fallback-model");
    assert_eq!(header(&headers, "ballast-fallback"), "stateful[1] fallback-model");
    let id = first["id"].as_str().unwrap();
    let call_id = first["output"][0]["call_id"].as_str().unwrap();
    let next = json!({"model": "stateful", "previous_response_id": id,
                      "input": [{"type": "function_call_output", "call_id": call_id, "output": "{\"amount\": 3}"}]});
    let (status, headers, second) = read(gateway.post("/v1/responses", &next, &[]).await).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["model"], "fallback-model",
        "the primary is healthy for this turn, and not asked"
    );
    assert_eq!(header(&headers, "ballast-fallback"), "");
    assert_eq!(second["output"][0]["name"], "create_refund");

    let path = format!("/v1/responses/{id}");
    let (status, _, got) = read(gateway.without_body(Method::GET, &path, &[]).await).await;
    assert_eq!((status, got["id"].as_str()), (200, Some(id)));
    let (status, _, gone) = read(gateway.without_body(Method::DELETE, &path, &[]).await).await;
    assert_eq!((status, &gone["deleted"]), (200, &json!(true)), "{gone}");
    let (status, _, unknown) = read(
        gateway
            .without_body(Method::GET, "/v1/responses/resp_unknown", &[])
            .await,
    )
    .await;
    assert_eq!(
        (status, unknown["error"]["code"].as_str()),
        (404, Some("invalid_request")),
        "{unknown}"
    );
}

/// A stored response belongs to the principal that made it: another principal cannot retrieve, delete or cancel
/// it (404, as for an id that does not exist); its own principal cancels it where it was made; a retrieval
/// asking for a stream is refused.
#[tokio::test]
async fn a_response_is_its_principals_and_is_cancelled_where_it_was_made() {
    let providers = Providers::new();
    let config = config()
        .principal("alice", "ALICE_KEY")
        .principal("bob", "BOB_KEY")
        .build();
    let (alice, bob) = ("alice-key-0123456789", "bob-key-0123456789");
    let gateway = providers
        .gateway_of(&config, &[("ALICE_KEY", alice), ("BOB_KEY", bob)])
        .await;
    let (alice, bob) = (format!("Bearer {alice}"), format!("Bearer {bob}"));
    let (as_alice, as_bob) = (
        [("authorization", alice.as_str())],
        [("authorization", bob.as_str())],
    );
    let mut body = responses("agent", "op-30");
    body["background"] = json!(true);
    let (status, _, made) = read(gateway.post("/v1/responses", &body, &as_alice).await).await;
    assert_eq!((status, &made["status"]), (200, &json!("queued")), "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/responses/{id}");
    let cancel = format!("{path}/cancel");
    for (method, path) in [
        (Method::GET, &path),
        (Method::DELETE, &path),
        (Method::POST, &cancel),
    ] {
        let answer = gateway.without_body(method.clone(), path, &as_bob).await;
        let (status, headers, answer) = read(answer).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (404, Some("invalid_request")),
            "{method} {path} as bob: {answer}"
        );
        assert_eq!(header(&headers, "x-should-retry"), "false");
        assert!(!header(&headers, "x-request-id").is_empty());
    }
    let streamed = gateway
        .without_body(Method::GET, &format!("{path}?stream=true"), &as_alice)
        .await;
    let (status, _, answer) = read(streamed).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]["message"].as_str().unwrap().contains("stream"),
        "{answer}"
    );
    let cancelled = gateway.without_body(Method::POST, &cancel, &as_alice).await;
    let (status, _, cancelled) = read(cancelled).await;
    assert_eq!(
        (status, &cancelled["id"], &cancelled["status"]),
        (200, &json!(id), &json!("cancelled")),
        "{cancelled}"
    );
    let (status, _, got) = read(gateway.without_body(Method::GET, &path, &as_alice).await).await;
    assert_eq!((status, &got["status"]), (200, &json!("cancelled")), "{got}");
}
