//! The Messages model through its functions: the agent loop against chat's, the message and its stream, the
//! failure streams, counting tokens, the refusals.

use serde_json::{Value, json};

use super::*;
use crate::model::{chat_fault_key, reply};

const ASK: &str = "Refund order 1234, op=op-77";

fn settings() -> ModelSettings {
    ModelSettings::default()
}

/// What the fake tools answer.
fn tool_output(name: &str) -> &'static str {
    match name {
        "lookup_order" => r#"{"order_id": "1234", "amount": 19.99}"#,
        _ => r#"{"refund_id": "re_1", "status": "succeeded"}"#,
    }
}

fn body(messages: &[Value]) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a support agent.",
           "messages": messages})
}

/// One turn through Messages.
fn turn(messages: &[Value]) -> MessagesReply {
    messages_reply(&body(messages), &settings()).expect("a reply")
}

/// One conversation's turns: the calls (name, arguments as JSON text), the final text, the fault keys, and the
/// (input, output) tokens of each turn.
#[derive(Debug, PartialEq)]
struct Played {
    calls: Vec<(String, String)>,
    text: String,
    keys: Vec<Option<String>>,
    tokens: Vec<(u64, u64)>,
}

fn play_chat() -> Played {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a support agent."}),
        json!({"role": "user", "content": ASK}),
    ];
    let mut played = Played {
        calls: Vec::new(),
        text: String::new(),
        keys: Vec::new(),
        tokens: Vec::new(),
    };
    loop {
        let request = json!({"model": "mock", "messages": messages});
        played.keys.push(chat_fault_key(&request));
        let answer = reply(&request, &settings()).expect("a reply");
        let usage = &answer.completion["usage"];
        played.tokens.push((
            usage["prompt_tokens"].as_u64().expect("tokens"),
            usage["completion_tokens"].as_u64().expect("tokens"),
        ));
        let message = answer.completion["choices"][0]["message"].clone();
        let Some(call) = message["tool_calls"].get(0).cloned() else {
            played.text = message["content"].as_str().expect("text").to_owned();
            return played;
        };
        let name = call["function"]["name"].as_str().expect("name");
        let arguments = call["function"]["arguments"].as_str().expect("arguments");
        played.calls.push((name.to_owned(), arguments.to_owned()));
        messages.push(message.clone());
        messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": tool_output(name)}));
    }
}

fn play_messages() -> Played {
    let mut messages = vec![json!({"role": "user", "content": ASK})];
    let mut played = Played {
        calls: Vec::new(),
        text: String::new(),
        keys: Vec::new(),
        tokens: Vec::new(),
    };
    loop {
        let request = body(&messages);
        played
            .keys
            .push(MessagesRequest::parse(&request).expect("valid").fault_key());
        let answer = turn(&messages);
        let message = &answer.message;
        played.tokens.push((
            message["usage"]["input_tokens"].as_u64().expect("tokens"),
            message["usage"]["output_tokens"].as_u64().expect("tokens"),
        ));
        let block = &message["content"][0];
        if block["type"] == "text" {
            assert_eq!(message["stop_reason"], "end_turn");
            played.text = block["text"].as_str().expect("text").to_owned();
            return played;
        }
        assert_eq!(message["stop_reason"], "tool_use");
        assert_eq!(block["type"], "tool_use");
        let name = block["name"].as_str().expect("name");
        played.calls.push((name.to_owned(), block["input"].to_string()));
        messages.push(json!({"role": "assistant", "content": message["content"]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block["id"], "content": tool_output(name)},
        ]}));
    }
}

#[test]
fn the_agent_loop_through_messages_is_chats() {
    let messages = play_messages();
    assert_eq!(messages, play_chat());
    assert_eq!(messages.calls.len(), 2);
    assert_eq!(
        messages.keys,
        [
            Some("op-77/turn-0".to_owned()),
            Some("op-77/turn-1".to_owned()),
            Some("op-77/turn-2".to_owned()),
        ]
    );
    assert!(messages.text.contains("op-77"), "{}", messages.text);
}

#[test]
fn a_tool_call_is_one_tool_use_block() {
    let answer = turn(&[json!({"role": "user", "content": ASK})]);
    let message = &answer.message;
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["model"], "claude-sonnet-4-5");
    assert_eq!(message["stop_sequence"], Value::Null);
    assert!(
        message["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("msg_") && id.len() == 4 + 24),
        "{message}"
    );
    assert_eq!(
        message["content"],
        json!([{"type": "tool_use", "id": "toolu_lookup_op-77", "name": "lookup_order",
                "input": {"op": "op-77", "order_id": "1234"}}])
    );
    let usage = message["usage"].as_object().expect("usage");
    let mut keys: Vec<&str> = usage.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["input_tokens", "output_tokens"]);
    assert_eq!(
        turn(&[json!({"role": "user", "content": ASK})]),
        answer,
        "a replay is the same answer"
    );
}

/// The type of each event.
fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|event| event["type"].as_str()).collect()
}

#[test]
fn a_tool_use_streams_in_anthropics_order_and_its_pieces_are_its_input() {
    let answer = turn(&[json!({"role": "user", "content": ASK})]);
    let events = &answer.events;
    let deltas = events.len() - 6;
    assert!(deltas >= 2, "{events:?}");
    let mut expected = vec!["message_start", "ping", "content_block_start"];
    expected.extend(std::iter::repeat_n("content_block_delta", deltas));
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(types(events), expected);

    let start = &events[0]["message"];
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stop_reason"], Value::Null);
    assert_eq!(start["id"], answer.message["id"]);
    assert_eq!(
        start["usage"],
        json!({"input_tokens": answer.message["usage"]["input_tokens"], "output_tokens": 1})
    );
    assert_eq!(
        events[2],
        json!({"type": "content_block_start", "index": 0, "content_block":
               {"type": "tool_use", "id": "toolu_lookup_op-77", "name": "lookup_order", "input": {}}})
    );
    let partial: String = events[3..3 + deltas]
        .iter()
        .map(|event| {
            assert_eq!(event["index"], 0);
            assert_eq!(event["delta"]["type"], "input_json_delta");
            event["delta"]["partial_json"].as_str().expect("a piece")
        })
        .collect();
    let input: Value = serde_json::from_str(&partial).expect("the pieces are JSON");
    assert_eq!(input, answer.message["content"][0]["input"]);
    assert_eq!(
        events[3 + deltas],
        json!({"type": "content_block_stop", "index": 0})
    );
    assert_eq!(
        events[4 + deltas],
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
               "usage": {"output_tokens": answer.message["usage"]["output_tokens"]}})
    );
    assert_eq!(events[5 + deltas], json!({"type": "message_stop"}));
}

#[test]
fn a_text_streams_as_text_deltas_that_make_the_text() {
    let answer = turn(&[json!({"role": "user", "content": "Hello there"})]);
    assert_eq!(answer.message["stop_reason"], "end_turn");
    let text = answer.message["content"][0]["text"].as_str().expect("text");
    assert_eq!(
        answer.events[2]["content_block"],
        json!({"type": "text", "text": ""})
    );
    let streamed: String = answer
        .events
        .iter()
        .filter(|event| event["type"] == "content_block_delta")
        .map(|event| {
            assert_eq!(event["delta"]["type"], "text_delta");
            event["delta"]["text"].as_str().expect("text")
        })
        .collect();
    assert_eq!(streamed, text);
}

#[test]
fn max_tokens_cuts_the_answer() {
    let mut request = body(&[json!({"role": "user", "content": "Hello there"})]);
    request["max_tokens"] = json!(2);
    let answer = messages_reply(&request, &settings()).expect("a reply");
    assert_eq!(answer.message["stop_reason"], "max_tokens");
    assert_eq!(answer.message["usage"]["output_tokens"], 2);
    assert_eq!(
        answer.message["content"][0]["text"]
            .as_str()
            .map(|t| t.chars().count()),
        Some(8)
    );
    assert_eq!(
        answer.events[answer.events.len() - 2]["delta"]["stop_reason"],
        "max_tokens"
    );
}

#[test]
fn an_error_delivered_as_events_comes_after_the_preamble_and_before_content() {
    let answer = turn(&[json!({"role": "user", "content": ASK})]);
    let failed = answer.failure(&MessagesError::OVERLOADED);
    assert_eq!(types(&failed), ["message_start", "ping", "error"]);
    assert_eq!(
        failed[2],
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}

#[test]
fn a_stream_error_comes_after_n_content_deltas_and_never_reaches_message_stop() {
    let answer = turn(&[json!({"role": "user", "content": ASK})]);
    let deltas = types(&answer.events)
        .iter()
        .filter(|kind| **kind == "content_block_delta")
        .count();
    for (after, sent) in [(0, 1), (1, 1), (2, 2), (99, deltas)] {
        let failed = answer.overloaded_after(after);
        let kinds = types(&failed);
        assert_eq!(
            kinds[..3],
            ["message_start", "ping", "content_block_start"],
            "{after}"
        );
        assert_eq!(
            kinds
                .iter()
                .filter(|kind| **kind == "content_block_delta")
                .count(),
            sent,
            "{after}"
        );
        assert_eq!(kinds.last(), Some(&"error"), "{after}");
        assert_eq!(failed.last(), Some(&MessagesError::OVERLOADED.event()));
        assert!(!kinds.contains(&"message_stop") && !kinds.contains(&"content_block_stop"));
    }
}

#[test]
fn chat_and_responses_fail_after_content_in_openais_words() {
    let request = json!({"messages": [{"role": "user", "content": ASK}]});
    let chat = reply(&request, &settings()).expect("a reply");
    let failed = chat.overloaded_after(2);
    assert_eq!(failed.len(), 4, "the role chunk, two argument chunks, the error");
    assert_eq!(failed[..3], chat.chunks[..3]);
    assert_eq!(
        failed[3],
        json!({"error": {"message": "The server is overloaded or not ready yet.", "type": "server_error",
                         "param": null, "code": null}})
    );
}

#[test]
fn count_tokens_is_the_messages_input_tokens() {
    let messages = [json!({"role": "user", "content": ASK})];
    let answer = turn(&messages);
    let mut counted = body(&messages);
    counted.as_object_mut().expect("an object").remove("max_tokens");
    assert_eq!(
        MessagesRequest::count_tokens(&counted).expect("counted"),
        json!({"input_tokens": answer.message["usage"]["input_tokens"]})
    );
}

#[test]
fn refusals_name_the_field() {
    let refused = |request: Value| match messages_reply(&request, &settings()) {
        Err(MessagesError::InvalidRequest(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let user = json!([{"role": "user", "content": ASK}]);
    assert_eq!(refused(json!({"messages": user})), "max_tokens: Field required");
    assert_eq!(
        refused(json!({"messages": user, "max_tokens": 0})),
        "max_tokens: Input should be greater than or equal to 1"
    );
    assert_eq!(
        refused(json!({"messages": user, "max_tokens": "9"})),
        "max_tokens: Input should be a valid integer, not a string"
    );
    assert_eq!(
        refused(json!([])),
        "The request body must be a JSON object, but got an array instead."
    );
    let long = json!({"max_tokens": 5, "messages": [{"role": "user", "content": "x".repeat(41)}]});
    let tight = ModelSettings {
        context_limit_chars: 40,
        ..settings()
    };
    assert_eq!(
        messages_reply(&long, &tight),
        Err(MessagesError::PromptTooLong {
            tokens: 11,
            limit: 10
        })
    );
}
