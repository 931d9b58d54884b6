//! ModelClient context handling and pass-through against chaos upstreams in process (paused time): a
//! context-length error truncated (whole old turns dropped, what the upstream received checked) or moved to a
//! larger-context deployment; unknown fields both ways; the answer's tokens.

use crate::support;

use ballast::{
    model::{ChatError, Truncation},
    report::AttemptResult,
};
use ballast_chaos::ModelSettings;
use serde_json::{Value, json};
use support::chat::{Upstreams, call, client, config, first_turn, profile};

/// A conversation of 2 old turns (the first with a tool call and its reply, 1200 characters; the second 300)
/// and a newest user turn, about 1560 characters in all.
fn long_conversation() -> Value {
    json!({
        "model": "agent",
        "messages": [
            {"role": "system", "content": "You handle refunds."},
            {"role": "user", "content": "a".repeat(1_000)},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "b".repeat(200)},
            {"role": "user", "content": "c".repeat(150)},
            {"role": "assistant", "content": "d".repeat(150)},
            {"role": "user", "content": "Refund order 1234, op=op-c1"},
        ],
    })
}

/// Chaos with a context of `chars` characters.
fn context_of(chars: usize) -> ballast_chaos::Profile {
    profile(&format!("[model]\ncontext_limit_chars = {chars}"))
}

/// Issue 6, test 4 (end to end): a context-length error with truncation on; the resent request dropped the
/// oldest whole turn — its tool call with its reply — and kept the system message and the newest turns.
#[tokio::test(start_paused = true)]
async fn a_context_length_error_is_truncated_and_resent() {
    let upstreams = Upstreams::new(&[("primary", context_of(1_000)), ("fallback", profile(""))]);
    let route = client(&config("context = { on_overflow = \"truncate\" }"), &upstreams);
    let sent = long_conversation();
    let answer = route
        .complete(call(&sent))
        .await
        .expect("answered after truncation");

    assert_eq!(
        answer.deployment, "agent[0] mock",
        "the same deployment, asked again"
    );
    assert_eq!(
        answer.truncated,
        Some(Truncation {
            dropped_messages: 3,
            dropped_turns: 1
        })
    );
    let seen = upstreams.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.host == "primary"));
    let messages = |i: usize| seen[i].body["messages"].as_array().unwrap().clone();
    assert_eq!(messages(0), sent["messages"].as_array().unwrap().clone());
    let kept: Vec<Value> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(i, _)| ![1, 2, 3].contains(i))
        .map(|(_, m)| m.clone())
        .collect();
    assert_eq!(
        messages(1),
        kept,
        "the first old turn dropped whole, tool call and reply together"
    );
    assert_eq!(
        seen[1].headers["ballast-attempt"], "2",
        "the resend numbered after the first try"
    );
    let results: Vec<_> = answer
        .report
        .attempts
        .iter()
        .map(|a| (a.number, a.result.clone()))
        .collect();
    assert_eq!(
        results,
        [(1, AttemptResult::Status(400)), (2, AttemptResult::Status(200))]
    );
    assert_eq!(answer.report.code, None);
}

/// When nothing more can be dropped, the context-length error is the answer (no endless resending).
#[tokio::test(start_paused = true)]
async fn a_conversation_that_cannot_shrink_enough_gets_the_error() {
    let upstreams = Upstreams::new(&[("primary", context_of(300)), ("fallback", profile(""))]);
    let route = client(&config("context = { on_overflow = \"truncate\" }"), &upstreams);
    // Instructions alone over the context: no truncation can make it fit.
    let mut sent = long_conversation();
    sent["messages"][0]["content"] = json!("s".repeat(400));
    let error = route.complete(call(&sent)).await.unwrap_err();
    let ChatError::Upstream { status, body, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(*status, 400);
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    assert!(
        upstreams.count("primary") >= 2,
        "truncated at least once before giving up"
    );
    assert_eq!(upstreams.count("fallback"), 0);
    let last = upstreams.seen().last().unwrap().body["messages"].clone();
    assert_eq!(
        last.as_array().map(Vec::len),
        Some(2),
        "system and the newest user turn are never dropped"
    );
}

/// `on_overflow = "fallback"`: the next (larger-context) deployment gets the whole conversation.
#[tokio::test(start_paused = true)]
async fn a_context_length_error_moves_to_a_larger_context_deployment() {
    let upstreams = Upstreams::new(&[("primary", context_of(1_000)), ("fallback", context_of(10_000))]);
    let route = client(&config("context = { on_overflow = \"fallback\" }"), &upstreams);
    let sent = long_conversation();
    let answer = route.complete(call(&sent)).await.expect("the fallback answers");
    assert_eq!(answer.deployment, "agent[1] gpt-4.1");
    assert_eq!(answer.truncated, None);
    let to_fallback = &upstreams.seen()[1];
    assert_eq!(to_fallback.host, "fallback");
    assert_eq!(to_fallback.body["messages"], sent["messages"]);
}

/// By default a context-length error is the caller's answer.
#[tokio::test(start_paused = true)]
async fn by_default_a_context_length_error_is_answered() {
    let upstreams = Upstreams::new(&[("primary", context_of(1_000)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let error = route.complete(call(&long_conversation())).await.unwrap_err();
    assert!(
        matches!(error, ChatError::Upstream { status: 400, .. }),
        "{error}"
    );
    assert_eq!(upstreams.count("primary"), 1);
    assert_eq!(upstreams.count("fallback"), 0);
}

/// Regression: the error of a context-length answer said only `agent: the upstream answered 400` — neither that
/// the request did not fit the context window nor what to do. It now carries the upstream's message and why the
/// route stopped, with what the caller can do.
#[tokio::test(start_paused = true)]
async fn an_upstream_error_says_what_happened_and_what_to_do() {
    let upstreams = Upstreams::new(&[("primary", context_of(1_000)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let error = route.complete(call(&long_conversation())).await.unwrap_err();
    let ChatError::Upstream { body, report, .. } = &error else {
        panic!("{error}")
    };
    let text = error.to_string();
    let upstream_message = body["error"]["message"].as_str().expect("the upstream's message");
    assert!(text.contains(upstream_message), "{text}");
    let stop = report.stop.expect("why the route stopped");
    assert!(text.contains(&stop.to_string()), "{text}");
}

/// Issue 6, test 5: unknown request fields reach the upstream unchanged, unknown response fields reach the
/// caller unchanged; the answer's tokens are in the report.
#[tokio::test(start_paused = true)]
async fn unknown_fields_pass_through_both_ways() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let mut sent = first_turn("op-p1");
    sent["reasoning_effort"] = json!("low");
    sent["metadata"] = json!({"team": "refunds", "ticket": 7});
    sent["temperature"] = json!(0.2);
    sent["messages"][1]["cache_control"] = json!({"type": "ephemeral"});
    let answer = route.complete(call(&sent)).await.expect("answered");

    let received = &upstreams.seen()[0].body;
    let mut expected = sent.clone();
    expected["model"] = json!("mock");
    assert_eq!(received, &expected, "only the model name changed");

    let completion = ballast_chaos::reply(received, &ModelSettings::default())
        .unwrap()
        .completion;
    assert_eq!(serde_json::to_value(&answer.response).unwrap(), completion);
    assert_eq!(answer.response.extra["system_fingerprint"], "fp_ballast_chaos");

    let tokens = answer.report.tokens.expect("the answer's tokens");
    assert_eq!(
        Some(tokens.answered.total_tokens),
        completion["usage"]["total_tokens"].as_u64()
    );
    assert!(tokens.answered.total_tokens > 0);
    assert_eq!(tokens.failed.total_tokens, 0);
}

/// Regression: `complete` turned a streamed request into a plain one but kept its `stream_options`, which OpenAI
/// refuses with a 400 when `stream` is off. Both go; everything else stays.
#[tokio::test(start_paused = true)]
async fn a_completion_sends_no_stream_options() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let mut sent = first_turn("op-so");
    sent["stream"] = json!(true);
    sent["stream_options"] = json!({"include_usage": true});
    sent["metadata"] = json!({"kept": true});
    route.complete(call(&sent)).await.expect("answered");
    let received = &upstreams.seen()[0].body;
    assert_eq!(received.get("stream"), None);
    assert_eq!(received.get("stream_options"), None);
    assert_eq!(received["metadata"], json!({"kept": true}));
}
