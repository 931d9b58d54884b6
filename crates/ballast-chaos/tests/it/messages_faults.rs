//! The model endpoint's faults in Anthropic's words on `/v1/messages` — 529 and 429 with `retry-after`, a spend
//! limit, a spent credit, errors delivered as events, cuts — and the error after content on all three streamed
//! APIs.

use crate::messages::{VERSION, first_turn, post_message};
use crate::support;

use std::time::Duration;

use axum::Router;
use ballast_chaos::{
    EndpointProfile, ErrorDelivery, Profile, RetryAfterForm, Script, ScriptStep, StreamFaults, router,
};
use serde_json::json;
use support::oneshot::{Sse, get, send};

/// A router whose `model` endpoint has `faults` and meets `steps` on every turn of `op-77`.
fn scripted(faults: EndpointProfile, steps: &[ScriptStep]) -> Router {
    let mut profile = Profile::default();
    profile.model.chunk_interval = Duration::ZERO;
    profile.endpoints.insert("model".into(), faults);
    profile.scripts = vec![Script {
        endpoint: "model".into(),
        op: "op-77".into(),
        steps: steps.to_vec(),
    }];
    router(profile)
}

fn streaming(stream: StreamFaults) -> EndpointProfile {
    EndpointProfile {
        stream,
        ..EndpointProfile::default()
    }
}

fn names(events: &[Sse]) -> Vec<&str> {
    events.iter().filter_map(Sse::name).collect()
}

#[tokio::test(start_paused = true)]
async fn a_529_is_overloaded_and_a_429_rate_limited_with_retry_after() {
    let faults = EndpointProfile {
        retry_after: Some(RetryAfterForm::Seconds(2)),
        ..EndpointProfile::default()
    };
    let server = scripted(faults, &[ScriptStep::Status(529), ScriptStep::Status(429)]);

    let overloaded = post_message(&server, &first_turn(false)).await;
    assert_eq!(overloaded.status, 529);
    let request_id = overloaded.headers["request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert_eq!(
        overloaded.json(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
               "request_id": request_id})
    );
    assert!(overloaded.headers.get("retry-after").is_none());

    let limited = post_message(&server, &first_turn(false)).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.json()["error"]["type"], "rate_limit_error");
    assert_eq!(limited.headers["retry-after"], "2");
    assert_eq!(limited.headers["anthropic-ratelimit-requests-remaining"], "0");
    assert!(limited.headers.contains_key("anthropic-ratelimit-requests-reset"));

    assert_eq!(
        post_message(&server, &first_turn(false)).await.status,
        200,
        "past the script"
    );
}

#[tokio::test(start_paused = true)]
async fn a_spend_limit_is_a_429_with_its_code_and_no_retry_after() {
    let faults = EndpointProfile {
        retry_after: Some(RetryAfterForm::Seconds(2)),
        ..EndpointProfile::default()
    };
    let server = scripted(faults, &[ScriptStep::SpendLimit, ScriptStep::InsufficientQuota]);

    let limited = post_message(&server, &first_turn(false)).await;
    assert_eq!(limited.status, 429);
    assert!(
        limited.headers.get("retry-after").is_none(),
        "no wait fixes a spend limit"
    );
    let body = limited.json();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert_eq!(
        body["error"]["details"],
        json!({"error_code": "enforced_spend_limit_reached"})
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("You have reached your specified workspace API usage limits.")),
        "{body}"
    );
    assert_eq!(
        body["request_id"],
        limited.headers["request-id"].to_str().expect("ascii")
    );

    let broke = post_message(&server, &first_turn(false)).await;
    assert_eq!(broke.status, 400, "a spent credit is Anthropic's 400");
    assert!(
        broke.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Your credit balance is too low")),
        "{}",
        broke.text
    );
    let stats = get(&server, "/stats").await.json();
    assert_eq!(stats["endpoints"]["model"]["statuses"]["429"], 1);
    assert_eq!(stats["endpoints"]["model"]["statuses"]["400"], 1);
}

#[tokio::test(start_paused = true)]
async fn a_spend_limit_on_chat_is_openais_insufficient_quota() {
    let server = scripted(EndpointProfile::default(), &[ScriptStep::SpendLimit]);
    let chat = json!({"messages": [{"role": "user", "content": "Refund order 1234, op=op-77"}]});
    let limited = send(&server, "POST", "/v1/chat/completions", Some(&chat), &[]).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.json(), ballast_chaos::error_body(429, true));
}

#[tokio::test(start_paused = true)]
async fn an_error_delivered_as_events_comes_after_message_start_and_ping() {
    let faults = streaming(StreamFaults {
        error_delivery: ErrorDelivery::Events,
        ..StreamFaults::default()
    });
    let server = scripted(faults, &[ScriptStep::Status(529)]);
    let streamed = post_message(&server, &first_turn(true)).await;
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed.headers["content-type"], "text/event-stream");
    assert!(!streamed.failed, "the stream ends cleanly, after its error");
    let events = streamed.events();
    assert_eq!(names(&events), ["message_start", "ping", "error"]);
    assert_eq!(
        events[2].json(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let stats = get(&server, "/stats").await.json();
    assert_eq!(stats["endpoints"]["model"]["statuses"]["529"], 1, "{stats}");
}

#[tokio::test(start_paused = true)]
async fn a_stream_error_comes_after_content_on_all_three_apis() {
    let faults = streaming(StreamFaults {
        error_after_chunks: 2,
        ..StreamFaults::default()
    });
    let steps = [ScriptStep::StreamError; 4];
    let server = scripted(faults, &steps);

    let messages = post_message(&server, &first_turn(true)).await;
    assert_eq!(messages.status, 200);
    let events = messages.events();
    assert_eq!(
        names(&events),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "error"
        ]
    );
    assert_eq!(events[5].json()["error"]["type"], "overloaded_error");
    assert!(!messages.text.contains("message_stop"));

    let ask = "Refund order 1234, op=op-77";
    let responses = send(
        &server,
        "POST",
        "/v1/responses",
        Some(&json!({"input": ask, "stream": true})),
        &[],
    )
    .await;
    let events = responses.events();
    assert_eq!(
        names(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "error",
            "response.failed"
        ]
    );
    assert_eq!(events[5].json()["code"], "server_error");
    assert_eq!(events[5].json()["sequence_number"], 5);
    assert_eq!(events[6].json()["response"]["status"], "failed");

    let chat = json!({"messages": [{"role": "user", "content": ask}], "stream": true});
    let chat = send(&server, "POST", "/v1/chat/completions", Some(&chat), &[]).await;
    let events = chat.events();
    assert_eq!(
        events.len(),
        4,
        "the role chunk, two argument chunks, the error: {}",
        chat.text
    );
    assert_eq!(events[3].json(), ballast_chaos::error_body(503, false));
    assert!(!chat.text.contains("[DONE]"));

    let stats = get(&server, "/stats").await.json();
    assert_eq!(
        stats["endpoints"]["model"]["statuses"]["stream_error"], 3,
        "{stats}"
    );

    // Not streamed, the same fault (attempt 4) is served normally.
    let plain = send(
        &server,
        "POST",
        "/v1/messages",
        Some(&first_turn(false)),
        &[VERSION],
    )
    .await;
    assert_eq!(plain.status, 200);
}

#[tokio::test(start_paused = true)]
async fn a_cut_messages_stream_has_no_message_stop() {
    let faults = streaming(StreamFaults {
        cut: 1.0,
        cut_after_chunks: 3,
        ..StreamFaults::default()
    });
    let mut profile = Profile::default();
    profile.model.chunk_interval = Duration::ZERO;
    profile.endpoints.insert("model".into(), faults);
    let server = router(profile);
    let cut = post_message(&server, &first_turn(true)).await;
    assert_eq!(cut.status, 200);
    assert!(cut.failed, "the body ends in an error: {}", cut.text);
    let events = cut.events();
    assert_eq!(
        names(&events),
        ["message_start", "ping", "content_block_start"],
        "the preamble counts"
    );
    let stats = get(&server, "/stats").await.json();
    assert_eq!(stats["endpoints"]["model"]["statuses"]["stream_cut"], 1);
}
