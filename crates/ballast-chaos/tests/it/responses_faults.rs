//! The model endpoint's faults on `/v1/responses`: drawn under chat's keys (the same faults for the same
//! conversation), injected errors delivered as stream events, cuts after N events, stalls with keep-alives.

use crate::support;

use std::time::Duration;

use axum::Router;
use ballast_chaos::{
    EndpointProfile, ErrorDelivery, ErrorRate, Profile, RetryAfterForm, Script, ScriptStep, StreamFaults,
    error_body, reply, responses_reply, router,
};
use serde_json::{Value, json};
use support::oneshot::{Sse, get, post, send};

const ASK: &str = "Refund order 1234, op=op-77";

/// `profile` with `model` faults and no pause between streamed events.
fn with_model(faults: EndpointProfile, scripts: &[(&str, &[ScriptStep])]) -> Router {
    let mut profile = Profile::default();
    profile.model.chunk_interval = Duration::ZERO;
    profile.endpoints.insert("model".into(), faults);
    profile.scripts = scripts
        .iter()
        .map(|(op, steps)| Script {
            endpoint: "model".into(),
            op: (*op).into(),
            steps: steps.to_vec(),
        })
        .collect();
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
async fn an_insufficient_quota_in_a_stream_comes_as_error_events_after_the_preamble() {
    let faults = streaming(StreamFaults {
        error_delivery: ErrorDelivery::Events,
        ..StreamFaults::default()
    });
    let quota: &[ScriptStep] = &[ScriptStep::InsufficientQuota, ScriptStep::InsufficientQuota];
    let server = with_model(faults, &[("op-77", quota), ("op-88", quota)]);

    let streamed = post(&server, "/v1/responses", &json!({"input": ASK, "stream": true})).await;
    assert_eq!(streamed.status, 200);
    assert_eq!(streamed.headers["content-type"], "text/event-stream");
    assert!(!streamed.failed, "the stream ends cleanly, with response.failed");
    let events = streamed.events();
    assert_eq!(
        names(&events),
        [
            "response.created",
            "response.in_progress",
            "error",
            "response.failed"
        ]
    );
    let error = events[2].json();
    assert_eq!(error["type"], "error");
    assert_eq!(error["code"], "insufficient_quota");
    assert_eq!(error["sequence_number"], 2);
    assert_eq!(error["error"], error_body(429, true)["error"]);
    let failed = events[3].json()["response"].clone();
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], "insufficient_quota");
    let id = failed["id"].as_str().expect("an id");
    assert_eq!(events[0].json()["response"]["id"], id);
    assert_eq!(
        get(&server, &format!("/v1/responses/{id}")).await.json()["status"],
        "failed"
    );

    // The same fault, not streamed: OpenAI's 429, without Retry-After.
    let plain = post(&server, "/v1/responses", &json!({"input": ASK})).await;
    assert_eq!(plain.status, 429);
    assert_eq!(plain.json(), error_body(429, true));
    assert!(plain.headers.get("retry-after").is_none());

    // A chat stream in that mode: its role chunk, then the error, and no [DONE].
    let chat = json!({"messages": [{"role": "user", "content": "Pay order 5, op=op-88"}], "stream": true});
    let streamed = post(&server, "/v1/chat/completions", &chat).await;
    assert_eq!(streamed.status, 200);
    let events = streamed.events();
    assert_eq!(events.len(), 2, "{}", streamed.text);
    assert_eq!(events[0].json()["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(events[1].json(), error_body(429, true));
    assert!(!streamed.text.contains("[DONE]"));

    let stats = get(&server, "/stats").await.json();
    assert_eq!(stats["endpoints"]["model"]["statuses"]["429"], 3, "{stats}");
}

#[tokio::test(start_paused = true)]
async fn by_default_an_injected_error_is_the_status_before_any_byte() {
    let server = with_model(
        EndpointProfile::default(),
        &[("op-77", &[ScriptStep::Status(503)])],
    );
    let streamed = post(&server, "/v1/responses", &json!({"input": ASK, "stream": true})).await;
    assert_eq!(streamed.status, 503);
    assert_eq!(streamed.json(), error_body(503, false));
}

#[tokio::test(start_paused = true)]
async fn a_cut_after_n_events_ends_the_body_in_an_error_before_response_completed() {
    for (after, sent) in [(1, 1), (3, 3), (99, 8)] {
        let server = with_model(
            streaming(StreamFaults {
                cut: 1.0,
                cut_after_chunks: after,
                ..StreamFaults::default()
            }),
            &[],
        );
        let cut = post(&server, "/v1/responses", &json!({"input": ASK, "stream": true})).await;
        assert_eq!(cut.status, 200);
        assert!(cut.failed, "the body ends in an error: {}", cut.text);
        let events = cut.events();
        assert_eq!(events.len(), sent, "{after}: {}", cut.text);
        assert_eq!(events[0].name(), Some("response.created"), "the preamble counts");
        assert!(!names(&events).contains(&"response.completed"));
        let stats = get(&server, "/stats").await.json();
        assert_eq!(stats["endpoints"]["model"]["statuses"]["stream_cut"], 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_stall_before_the_first_event_sends_keep_alives_then_the_stream() {
    let server = with_model(
        streaming(StreamFaults {
            stall: 1.0,
            stall_after_chunks: 0,
            stall_for: Duration::from_secs(3),
            keep_alive: Some(Duration::from_secs(1)),
            ..StreamFaults::default()
        }),
        &[],
    );
    let stalled = post(&server, "/v1/responses", &json!({"input": ASK, "stream": true})).await;
    let events = stalled.events();
    assert_eq!(
        events[..2],
        [
            Sse::Comment("keep-alive".into()),
            Sse::Comment("keep-alive".into())
        ]
    );
    assert!(
        stalled
            .text
            .starts_with(": keep-alive\n\n: keep-alive\n\nevent: response.created\n")
    );
    assert_eq!(events.last().and_then(Sse::name), Some("response.completed"));
    assert!(events[2..].iter().all(|e| matches!(e, Sse::Event { .. })));
}

/// Every turn of one conversation, as chat messages and as (stateless) Responses input.
fn turns() -> Vec<(Value, Value)> {
    let settings = ballast_chaos::ModelSettings::default();
    let mut messages = vec![json!({"role": "user", "content": ASK})];
    let mut input = vec![json!({"role": "user", "content": ASK})];
    let mut turns = Vec::new();
    for turn in 0..3 {
        let chat = json!({"messages": messages});
        let responses = json!({"input": input});
        turns.push((chat.clone(), responses.clone()));
        let message = reply(&chat, &settings).expect("chat").completion["choices"][0]["message"].clone();
        let Some(call) = message["tool_calls"].get(0).cloned() else {
            break;
        };
        let answer = responses_reply(&responses, &[], &settings, &format!("resp_{turn}")).expect("responses");
        let id = call["id"].clone();
        messages.push(message);
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "{}"}));
        input.extend(answer.response["output"].as_array().cloned().unwrap_or_default());
        input.push(json!({"type": "function_call_output", "call_id": id, "output": "{}"}));
    }
    turns
}

#[tokio::test(start_paused = true)]
async fn chat_and_responses_meet_the_same_drawn_faults_turn_by_turn() {
    let faults = EndpointProfile {
        errors: [500, 503, 429]
            .map(|status| ErrorRate { status, rate: 0.2 })
            .to_vec(),
        insufficient_quota: 0.1,
        retry_after: Some(RetryAfterForm::Seconds(1)),
        ..EndpointProfile::default()
    };
    let mut profile = Profile {
        seed: 11,
        ..Profile::default()
    };
    profile.endpoints.insert("model".into(), faults);
    let server = router(profile);
    let turns = turns();
    assert_eq!(turns.len(), 3);
    let mut seen = std::collections::BTreeSet::new();
    for (chat, responses) in &turns {
        for attempt in 1..=12 {
            let attempt = attempt.to_string();
            let headers = [("ballast-attempt", attempt.as_str())];
            let by_chat = send(&server, "POST", "/v1/chat/completions", Some(chat), &headers).await;
            let by_responses = send(&server, "POST", "/v1/responses", Some(responses), &headers).await;
            assert_eq!(by_chat.status, by_responses.status, "attempt {attempt} of {chat}");
            assert_eq!(
                by_chat.headers.get("retry-after"),
                by_responses.headers.get("retry-after")
            );
            if by_chat.status != 200 {
                assert_eq!(by_chat.json(), by_responses.json());
            }
            seen.insert(by_chat.status.as_u16());
        }
    }
    assert!(
        seen.contains(&200) && seen.len() >= 3,
        "the draw is exercised: {seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_turn_continued_by_previous_response_id_counts_the_stored_turns() {
    let once: &[ScriptStep] = &[ScriptStep::Status(503)];
    let server = with_model(EndpointProfile::default(), &[("op-77/turn-1", once)]);
    let first = post(&server, "/v1/responses", &json!({"input": ASK}))
        .await
        .json();
    let output =
        json!({"type": "function_call_output", "call_id": first["output"][0]["call_id"], "output": "{}"});
    let next = json!({"input": [output], "previous_response_id": first["id"]});
    assert_eq!(
        post(&server, "/v1/responses", &next).await.status,
        503,
        "turn 1 is scripted"
    );
    let retried = post(&server, "/v1/responses", &next).await;
    assert_eq!(retried.status, 200, "attempt 2 of turn 1 is past the script");
    assert_eq!(retried.json()["output"][0]["name"], "create_refund");
}

#[tokio::test(start_paused = true)]
async fn a_commit_then_lose_keeps_the_turn_in_its_conversation() {
    let lose: &[ScriptStep] = &[ScriptStep::CommitThenLose];
    let server = with_model(EndpointProfile::default(), &[("op-77/turn-0", lose)]);
    let body = json!({"input": ASK, "conversation": "conv_9"});
    let lost = post(&server, "/v1/responses", &body).await;
    assert!(lost.failed, "the answer is lost: {}", lost.text);
    // The conversation holds the lost turn's call: the retry is turn 1 of it, a second user turn after the call.
    let retried = post(&server, "/v1/responses", &body).await.json();
    assert_eq!(retried["output"][0]["call_id"], "call_lookup_op-77", "{retried}");
    let stats = get(&server, "/stats").await.json();
    assert_eq!(stats["endpoints"]["model"]["statuses"]["commit_then_lose"], 1);
}
