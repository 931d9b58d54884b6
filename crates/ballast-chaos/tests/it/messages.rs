//! Anthropic's Messages API on the chaos router: a message and its stream, Anthropic's headers, the
//! `anthropic-version` check, counting tokens, a scripted conversation, and the stats of the model endpoint.

use crate::support;

use std::time::Duration;

use axum::Router;
use ballast_chaos::{EndpointProfile, ErrorRate, Profile, RetryAfterForm, messages_reply, router};
use serde_json::{Value, json};
use support::oneshot::{Reply, Sse, get, send};

const ASK: &str = "Refund order 1234, op=op-77";

/// The header every Messages request carries.
pub(crate) const VERSION: (&str, &str) = ("anthropic-version", "2023-06-01");

/// A Messages body asking `messages`.
pub(crate) fn asking(messages: &[Value], stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": stream, "messages": messages})
}

/// The first turn: the user's ask.
pub(crate) fn first_turn(stream: bool) -> Value {
    asking(&[json!({"role": "user", "content": ASK})], stream)
}

/// `POST /v1/messages` with the version header.
pub(crate) async fn post_message(server: &Router, body: &Value) -> Reply {
    send(server, "POST", "/v1/messages", Some(body), &[VERSION]).await
}

fn quick(profile: Profile) -> Router {
    router(Profile {
        model: ballast_chaos::ModelSettings {
            chunk_interval: Duration::ZERO,
            ..Default::default()
        },
        ..profile
    })
}

#[tokio::test(start_paused = true)]
async fn a_message_is_a_tool_use_with_anthropics_headers() {
    let server = quick(Profile::default());
    let answered = post_message(&server, &first_turn(false)).await;
    assert_eq!(answered.status, 200);
    let message = answered.json();
    assert_eq!(
        message,
        messages_reply(&first_turn(false), &Default::default())
            .expect("a reply")
            .message,
        "the router serves the pure function's answer"
    );
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["name"], "lookup_order");
    let headers = &answered.headers;
    let request_id = headers["request-id"].to_str().expect("ascii");
    assert!(request_id.starts_with("req_"), "{request_id}");
    for name in [
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-tokens-limit",
        "anthropic-ratelimit-tokens-remaining",
    ] {
        assert!(headers.contains_key(name), "{name} is missing: {headers:?}");
    }
    let reset = headers["anthropic-ratelimit-requests-reset"]
        .to_str()
        .expect("ascii");
    assert!(
        reset.len() == 20 && reset.ends_with('Z') && &reset[10..11] == "T",
        "{reset}"
    );
    let again = post_message(&server, &first_turn(false)).await;
    assert_ne!(
        again.headers["request-id"], headers["request-id"],
        "one id per answer"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_is_read_to_its_end() {
    let server = quick(Profile::default());
    let streamed = post_message(&server, &first_turn(true)).await;
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed.headers["content-type"], "text/event-stream");
    assert!(streamed.headers.contains_key("request-id"));
    assert!(!streamed.failed);
    let events = streamed.events();
    let expected = messages_reply(&first_turn(true), &Default::default())
        .expect("a reply")
        .events;
    assert_eq!(events.len(), expected.len());
    for (event, expected) in events.iter().zip(&expected) {
        assert_eq!(
            event.name(),
            expected["type"].as_str(),
            "event: names its data's type"
        );
        assert_eq!(&event.json(), expected);
    }
    assert_eq!(events.first().and_then(Sse::name), Some("message_start"));
    assert_eq!(events.last().and_then(Sse::name), Some("message_stop"));
}

#[tokio::test(start_paused = true)]
async fn a_request_without_anthropic_version_is_refused_as_anthropic_refuses_it() {
    let server = quick(Profile::default());
    let refused = send(&server, "POST", "/v1/messages", Some(&first_turn(false)), &[]).await;
    assert_eq!(refused.status, 400);
    let request_id = refused.headers["request-id"].to_str().expect("ascii").to_owned();
    assert_eq!(
        refused.json(),
        json!({"type": "error", "error": {"type": "invalid_request_error",
               "message": "anthropic-version: header is required"}, "request_id": request_id})
    );
    assert!(
        refused
            .headers
            .get("anthropic-ratelimit-requests-limit")
            .is_none()
    );
    let stats = get(&server, "/stats").await.json();
    assert_eq!(stats["endpoints"]["model"]["statuses"]["400"], 1, "{stats}");
}

#[tokio::test(start_paused = true)]
async fn count_tokens_is_the_messages_input_tokens_without_faults_or_stats() {
    let mut profile = Profile::default();
    profile.endpoints.insert(
        "model".into(),
        EndpointProfile {
            errors: vec![ErrorRate {
                status: 529,
                rate: 1.0,
            }],
            ..EndpointProfile::default()
        },
    );
    let server = quick(profile);
    let mut counted = first_turn(false);
    counted.as_object_mut().expect("an object").remove("max_tokens");
    let count = send(
        &server,
        "POST",
        "/v1/messages/count_tokens",
        Some(&counted),
        &[VERSION],
    )
    .await;
    assert_eq!(count.status, 200, "never faulted: {}", count.text);
    let expected = messages_reply(&first_turn(false), &Default::default()).expect("a reply");
    assert_eq!(
        count.json(),
        json!({"input_tokens": expected.message["usage"]["input_tokens"]})
    );
    assert!(count.headers.contains_key("request-id"));
    let unversioned = send(&server, "POST", "/v1/messages/count_tokens", Some(&counted), &[]).await;
    assert_eq!(unversioned.status, 400);
    let stats = get(&server, "/stats").await.json();
    assert_eq!(stats["endpoints"].get("model"), None, "not in the stats: {stats}");
}

/// What the fake tools answer.
fn tool_output(name: &str) -> &'static str {
    match name {
        "lookup_order" => r#"{"order_id": "1234", "amount": 19.99}"#,
        _ => r#"{"refund_id": "re_1", "status": "succeeded"}"#,
    }
}

/// A whole conversation through Messages on `server`, each turn retried until it answers: every (status,
/// stop_reason) met, in order, and the answers' blocks.
async fn converse_in_messages(server: &Router) -> (Vec<(u16, String)>, Vec<Value>) {
    let mut messages = vec![json!({"role": "user", "content": ASK})];
    let (mut met, mut blocks) = (Vec::new(), Vec::new());
    for _turn in 0..3 {
        let message = loop {
            let answered = post_message(server, &asking(&messages, false)).await;
            let body = answered.json();
            let stop = body["stop_reason"].as_str().unwrap_or("error").to_owned();
            met.push((answered.status.as_u16(), stop));
            if answered.status == 200 {
                break body;
            }
            assert!(met.len() < 40, "the draw lets every turn through: {met:?}");
        };
        let block = message["content"][0].clone();
        blocks.push(block.clone());
        if block["type"] != "tool_use" {
            break;
        }
        messages.push(json!({"role": "assistant", "content": message["content"]}));
        let output = tool_output(block["name"].as_str().expect("a name"));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": output}]}));
    }
    (met, blocks)
}

/// The same conversation through chat on `server`: every status met, in order.
async fn converse_in_chat(server: &Router) -> Vec<u16> {
    let mut messages = vec![json!({"role": "user", "content": ASK})];
    let mut met = Vec::new();
    for _turn in 0..3 {
        let completion = loop {
            let chat = json!({"messages": messages});
            let answered = send(server, "POST", "/v1/chat/completions", Some(&chat), &[]).await;
            met.push(answered.status.as_u16());
            if answered.status == 200 {
                break answered.json();
            }
        };
        let message = completion["choices"][0]["message"].clone();
        let Some(call) = message["tool_calls"].get(0).cloned() else {
            break;
        };
        messages.push(message);
        let output = tool_output(call["function"]["name"].as_str().expect("a name"));
        messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": output}));
    }
    met
}

fn flaky(seed: u64) -> Profile {
    let mut profile = Profile {
        seed,
        ..Profile::default()
    };
    profile.endpoints.insert(
        "model".into(),
        EndpointProfile {
            errors: [529, 500, 429]
                .map(|status| ErrorRate { status, rate: 0.15 })
                .to_vec(),
            retry_after: Some(RetryAfterForm::Seconds(1)),
            ..EndpointProfile::default()
        },
    );
    profile
}

#[tokio::test(start_paused = true)]
async fn a_scripted_conversation_is_tool_use_then_end_turn_with_the_faults_chat_meets() {
    let (met, blocks) = converse_in_messages(&quick(flaky(5))).await;
    assert_eq!(
        blocks
            .iter()
            .map(|b| b["type"].as_str().unwrap_or(""))
            .collect::<Vec<_>>(),
        ["tool_use", "tool_use", "text"]
    );
    assert_eq!(blocks[0]["name"], "lookup_order");
    assert_eq!(blocks[1]["name"], "create_refund");
    assert_eq!(
        blocks[1]["input"],
        json!({"amount": 19.99, "op": "op-77", "order_id": "1234"})
    );
    let stops: Vec<&str> = met
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, stop)| stop.as_str())
        .collect();
    assert_eq!(stops, ["tool_use", "tool_use", "end_turn"]);
    assert!(
        met.iter().any(|(status, _)| *status != 200),
        "seed 5 meets faults: {met:?}"
    );

    // The same seed: the same faults, attempt by attempt — and the ones chat meets.
    assert_eq!(
        converse_in_messages(&quick(flaky(5))).await,
        (met.clone(), blocks)
    );
    let statuses: Vec<u16> = met.iter().map(|(status, _)| *status).collect();
    assert_eq!(converse_in_chat(&quick(flaky(5))).await, statuses);
    let other: Vec<u16> = converse_in_messages(&quick(flaky(6)))
        .await
        .0
        .iter()
        .map(|(status, _)| *status)
        .collect();
    assert_ne!(other, statuses, "another seed, other faults");
}

#[tokio::test(start_paused = true)]
async fn messages_requests_count_under_the_model_endpoint() {
    let server = quick(flaky(5));
    let (met, _) = converse_in_messages(&server).await;
    let stats = get(&server, "/stats").await.json();
    let model = &stats["endpoints"]["model"];
    assert_eq!(model["requests"], met.len(), "{stats}");
    for status in [200, 429, 500, 529] {
        let count = met.iter().filter(|(s, _)| *s == status).count() as u64;
        assert_eq!(
            model["statuses"][status.to_string()].as_u64().unwrap_or(0),
            count,
            "{status}"
        );
    }
    assert_eq!(model["in_flight"], 0);
}
