//! The Messages protocol over recorded event sequences: where a stream commits, what each event after that means,
//! how an error answer is classified, the tokens, the bodies and the cut.

use serde_json::json;

use super::*;
use crate::model::{ProviderError, ProviderErrorKind};

/// A streamed tool use as Anthropic sends it (recorded shapes, ids shortened).
const TOOL_USE_STREAM: [&str; 9] = [
    r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_read_input_tokens":100,"output_tokens":2}}}"#,
    r#"{"type":"ping"}"#,
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}"#,
    r#"{"type":"content_block_stop","index":0}"#,
    r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"refund","input":{}}}"#,
    r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"order\": \"1234\"}"}}"#,
    r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
    r#"{"type":"message_stop"}"#,
];

#[test]
fn message_start_and_ping_are_held_and_the_first_content_block_commits() {
    assert_eq!(commit(TOOL_USE_STREAM[0]), Commit::Hold);
    assert_eq!(commit(TOOL_USE_STREAM[1]), Commit::Hold);
    for event in &TOOL_USE_STREAM[2..] {
        assert_eq!(commit(event), Commit::Now, "{event}");
    }
    // A thinking block's delta, or an event Ballast does not know, is content too.
    let thinking =
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#;
    assert_eq!(commit(thinking), Commit::Now);
    assert_eq!(commit(r#"{"type":"some_new_event"}"#), Commit::Now);
}

/// An `overloaded_error` after `message_start` (Anthropic under load) is an error answer before the commit point,
/// with 529: overload, which the breaker does not count, retried or moved on.
#[test]
fn an_error_before_content_is_an_error_answer_in_anthropics_envelope() {
    let cases = [
        ("overloaded_error", 529, ProviderErrorKind::Overloaded),
        ("rate_limit_error", 429, ProviderErrorKind::RateLimited),
        ("api_error", 502, ProviderErrorKind::ServerError),
        ("invalid_request_error", 400, ProviderErrorKind::BadRequest),
    ];
    for (kind, status, classified) in cases {
        let event = json!({"type": "error", "error": {"type": kind, "message": "Overloaded"}}).to_string();
        let Commit::Error { status: got, body } = commit(&event) else {
            panic!("{kind}: not an error answer")
        };
        assert_eq!(got.as_u16(), status, "{kind}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            json!({"type": "error", "error": {"type": kind, "message": "Overloaded"}})
        );
        let error = ProviderError::classify(status, &serde_json::to_vec(&body).unwrap(), None);
        if kind != "api_error" {
            assert_eq!(error.kind, classified, "{kind}");
        }
    }
}

#[test]
fn what_is_not_a_messages_event_fails_the_attempt() {
    for data in ["[DONE]", "not json", r#"{"choices": []}"#, r#"{"type": 7}"#, "[]"] {
        assert!(matches!(commit(data), Commit::Fail(_)), "{data}");
    }
}

#[test]
fn after_the_commit_message_stop_is_the_last_and_the_usage_is_read_where_anthropic_puts_it() {
    let read: Vec<_> = TOOL_USE_STREAM.iter().map(|event| read_event(event)).collect();
    let Read::Item(start, Some(usage)) = &read[0] else {
        panic!("message_start is an item with the input tokens")
    };
    assert_eq!(start.kind(), "message_start");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (572, 2));
    assert!(matches!(&read[1], Read::Item(ping, None) if ping.kind() == "ping"));
    let Read::Item(_, Some(usage)) = &read[7] else {
        panic!("message_delta carries the output tokens")
    };
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (0, 89));
    assert!(matches!(&read[8], Read::Last(stop, None) if stop.kind() == "message_stop"));
    for item in &read[2..7] {
        assert!(matches!(item, Read::Item(_, None)));
    }
}

#[test]
fn after_the_commit_an_error_event_ends_the_stream_and_a_chat_end_is_a_cut() {
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let Read::Upstream(error) = read_event(overloaded) else {
        panic!("not the upstream's error")
    };
    assert_eq!(
        error,
        json!({"type": "overloaded_error", "message": "Overloaded"})
    );
    assert!(matches!(read_event("[DONE]"), Read::Cut));
    assert!(matches!(read_event("nope"), Read::Malformed(_)));
}

#[test]
fn usage_counts_the_cache_as_input() {
    let usage = json!({"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 20,
                       "output_tokens": 7});
    let counted = usage_of(&usage).unwrap();
    assert_eq!(
        (
            counted.prompt_tokens,
            counted.completion_tokens,
            counted.total_tokens
        ),
        (35, 7, 42)
    );
    assert_eq!(usage_of(&json!({"service_tier": "standard"})), None);
    let body = json!({"id": "msg_1", "type": "message", "content": [], "usage": {"input_tokens": 3, "output_tokens": 4}});
    assert_eq!(
        Messages::usage(&serde_json::to_vec(&body).unwrap()).map(|u| u.total_tokens),
        Some(7)
    );
    assert_eq!(
        CountTokens::usage(br#"{"input_tokens": 12}"#),
        None,
        "counting spends nothing"
    );
}

/// Anthropic's spend limit: a 429 that names its code in `details`, or a 400 that says so in words — no wait
/// fixes either, so both are a spent quota (the next deployment, never a retry).
#[test]
fn a_spend_limit_is_a_spent_quota_whether_its_code_or_its_words_say_so() {
    let limit = json!({"type": "error", "error": {"type": "rate_limit_error",
        "message": "You have reached your specified workspace API usage limits.",
        "details": {"error_code": "enforced_spend_limit_reached"}}});
    let error = Messages::classify(429, &serde_json::to_vec(&limit).unwrap(), None);
    assert_eq!(error.kind, ProviderErrorKind::InsufficientQuota);
    assert_eq!(error.code.as_deref(), Some("enforced_spend_limit_reached"));
    let workspace = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "You have reached your specified workspace API usage limits. You will regain access on 2026-06-01 at 00:00 UTC."}});
    let error = Messages::classify(400, &serde_json::to_vec(&workspace).unwrap(), None);
    assert_eq!(error.kind, ProviderErrorKind::InsufficientQuota);
    let rate = json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}});
    assert_eq!(
        Messages::classify(429, &serde_json::to_vec(&rate).unwrap(), None).kind,
        ProviderErrorKind::RateLimited
    );
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    assert_eq!(
        Messages::classify(529, &serde_json::to_vec(&overloaded).unwrap(), None).kind,
        ProviderErrorKind::Overloaded
    );
}

#[test]
fn a_request_passes_through_and_its_headers_are_anthropics() {
    let body = json!({"model": "claude", "max_tokens": 1024, "system": "be brief",
                      "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}],
                      "tools": [{"name": "refund", "input_schema": {"type": "object"}}], "stream": true,
                      "metadata": null});
    let mut request: MessagesRequest = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(serde_json::to_value(&request).unwrap(), body);
    Messages::set_model(&mut request, "claude-sonnet-4-5");
    Messages::set_stream(&mut request, false);
    let sent = serde_json::to_value(&request).unwrap();
    assert_eq!(sent["model"], "claude-sonnet-4-5");
    assert!(sent.get("stream").is_none());
    let mut headers = HeaderMap::new();
    Messages::headers(&request, &mut headers);
    assert_eq!(headers[VERSION_HEADER], ANTHROPIC_VERSION);
    assert!(!headers.contains_key(BETA_HEADER));
    request.version = Some("2024-01-01".into());
    request.beta = Some("prompt-caching-2024-07-31,token-counting-2024-11-01".into());
    let mut headers = HeaderMap::new();
    CountTokens::headers(&request, &mut headers);
    assert_eq!(headers[VERSION_HEADER], "2024-01-01");
    assert_eq!(
        headers[BETA_HEADER],
        "prompt-caching-2024-07-31,token-counting-2024-11-01"
    );
}

#[test]
fn an_answer_reads_its_text_and_tool_uses_and_becomes_the_next_turn() {
    let body = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                      "content": [{"type": "text", "text": "Refunding."},
                                  {"type": "tool_use", "id": "toolu_1", "name": "refund", "input": {"order": "1234"}}],
                      "stop_reason": "tool_use", "stop_sequence": null,
                      "usage": {"input_tokens": 3, "output_tokens": 4}});
    let answer: MessagesResponse = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(serde_json::to_value(&answer).unwrap(), body);
    assert_eq!(answer.text(), "Refunding.");
    let uses = answer.tool_uses();
    assert_eq!((uses[0].id, uses[0].name), ("toolu_1", "refund"));
    assert_eq!(uses[0].input, &json!({"order": "1234"}));
    let turn = answer.to_message();
    assert_eq!(turn.role(), Some("assistant"));
    assert_eq!(turn.0["content"], body["content"]);
}

fn message(value: Value) -> MessageParam {
    serde_json::from_value(value).unwrap()
}

/// The chat rule over Messages: older turns go whole; a user message of tool results is a reply that stays with
/// its tool use, never a turn of its own.
#[test]
fn truncation_drops_whole_older_turns_and_keeps_tool_uses_with_their_results() {
    let tool_use = |id: &str| json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "t", "input": {}}]});
    let result = |id: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]});
    let conversation = vec![
        message(json!({"role": "user", "content": "first"})),
        message(tool_use("toolu_1")),
        message(result("toolu_1")),
        message(json!({"role": "assistant", "content": "done"})),
        message(json!({"role": "user", "content": "second"})),
        message(tool_use("toolu_2")),
        message(result("toolu_2")),
    ];
    let mut request = MessagesRequest::new("claude", 100, conversation.clone());
    let dropped = Messages::truncate(&mut request, TruncationGoal::HalfOfTurns).unwrap();
    assert_eq!((dropped.dropped_messages, dropped.dropped_turns), (4, 1));
    assert_eq!(request.messages, conversation[4..]);
    assert_eq!(
        Messages::truncate(&mut request, TruncationGoal::HalfOfTurns),
        Err(CannotTruncate::NothingToDrop),
        "the newest turn, with its tool use and result, is never cut"
    );
    let mut counted = MessagesRequest::new("claude", 100, conversation);
    assert_eq!(
        CountTokens::truncate(&mut counted, TruncationGoal::HalfOfTurns),
        Err(CannotTruncate::NothingToDrop)
    );
}
