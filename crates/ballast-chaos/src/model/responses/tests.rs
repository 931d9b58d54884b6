//! The Responses model through its functions: the agent loop against chat's, the stream against the answer,
//! reasoning, `max_output_tokens`, the failure stream, the fault keys.

use serde_json::{Map, Value, json};

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

/// One conversation's turns: the calls (call id, name, arguments) and the final text.
#[derive(Debug, PartialEq)]
struct Played {
    calls: Vec<(String, String, String)>,
    text: String,
    keys: Vec<Option<String>>,
}

fn play_chat() -> Played {
    let mut messages = vec![json!({"role": "user", "content": ASK})];
    let (mut calls, mut keys) = (Vec::new(), Vec::new());
    loop {
        let request = json!({"model": "mock", "messages": messages});
        keys.push(chat_fault_key(&request));
        let answer = reply(&request, &settings()).expect("a reply");
        let message = answer.completion["choices"][0]["message"].clone();
        let Some(call) = message["tool_calls"].get(0).cloned() else {
            let text = message["content"].as_str().expect("text").to_owned();
            return Played { calls, text, keys };
        };
        let (id, name) = (
            call["id"].as_str().expect("id"),
            call["function"]["name"].as_str().expect("name"),
        );
        calls.push((
            id.to_owned(),
            name.to_owned(),
            call["function"]["arguments"].as_str().expect("args").to_owned(),
        ));
        messages.push(message.clone());
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": tool_output(name)}));
    }
}

/// The Responses loop: `stateful` continues the previous response's items (sending only the new
/// `function_call_output`), otherwise the full input goes each turn with the earlier output items.
fn play_responses(stateful: bool) -> Played {
    let (mut calls, mut keys) = (Vec::new(), Vec::new());
    let mut history: Vec<Value> = Vec::new();
    let mut input = vec![json!({"role": "user", "content": [{"type": "input_text", "text": ASK}]})];
    for turn in 0.. {
        let request = json!({"model": "mock", "input": input, "reasoning": {"effort": "low"}});
        let parsed = ResponsesRequest::parse(&request).expect("valid");
        keys.push(parsed.fault_key(&history));
        let answer = parsed
            .reply(&history, &settings(), &format!("resp_{turn}"))
            .expect("a reply");
        let output = answer.response["output"].as_array().expect("output").clone();
        assert_eq!(output[0]["type"], "reasoning", "reasoning was asked for");
        let Some(call) = output.iter().find(|item| item["type"] == "function_call") else {
            let text = output[1]["content"][0]["text"].as_str().expect("text").to_owned();
            return Played { calls, text, keys };
        };
        let (id, name) = (
            call["call_id"].as_str().expect("call_id"),
            call["name"].as_str().expect("name"),
        );
        calls.push((
            id.to_owned(),
            name.to_owned(),
            call["arguments"].as_str().expect("args").to_owned(),
        ));
        let result = json!({"type": "function_call_output", "call_id": id, "output": tool_output(name)});
        if stateful {
            history.extend(answer.input);
            history.extend(output);
            input = vec![result];
        } else {
            input.extend(output);
            input.push(result);
        }
    }
    unreachable!("the loop returns")
}

#[test]
fn the_agent_loop_through_responses_plays_chats_turns_both_ways() {
    let chat = play_chat();
    assert_eq!(chat.calls.len(), 2);
    assert_eq!(chat.calls[0].0, "call_lookup_op-77");
    assert_eq!(chat.calls[1].1, "create_refund");
    assert!(chat.text.contains("went through"), "{}", chat.text);
    assert_eq!(
        chat.keys,
        ["op-77/turn-0", "op-77/turn-1", "op-77/turn-2"].map(|k| Some(k.to_owned()))
    );
    assert_eq!(play_responses(true), chat, "with previous_response_id");
    assert_eq!(play_responses(false), chat, "stateless");
}

fn request(input: Value) -> Value {
    json!({"model": "gpt-4.1", "input": input, "stream": true, "metadata": {"run": "7"}})
}

fn first_turn() -> ResponsesReply {
    responses_reply(&request(json!(ASK)), &[], &settings(), "resp_abc").expect("a reply")
}

#[test]
fn the_response_has_openais_shape() {
    let response = first_turn().response;
    assert_eq!(response["id"], "resp_abc");
    assert_eq!(response["object"], "response");
    assert_eq!(response["created_at"], crate::model::completion::CREATED);
    assert_eq!(response["status"], "completed");
    assert_eq!(response["model"], "gpt-4.1");
    assert_eq!(response["metadata"], json!({"run": "7"}));
    assert_eq!(response["store"], true);
    assert_eq!(response["background"], false);
    assert_eq!(response["previous_response_id"], Value::Null);
    assert_eq!(response["error"], Value::Null);
    assert_eq!(response["incomplete_details"], Value::Null);
    assert_eq!(response["output"].as_array().map(Vec::len), Some(1));
    let call = &response["output"][0];
    assert_eq!(call["id"], "fc_abc00");
    assert_eq!(call["status"], "completed");
    // 27 characters in, 7 tokens; the call as chat counts it.
    assert_eq!(response["usage"]["input_tokens"], 7);
    let chat = reply(
        &json!({"messages": [{"role": "user", "content": ASK}]}),
        &settings(),
    )
    .expect("chat");
    assert_eq!(
        response["usage"]["output_tokens"],
        chat.completion["usage"]["completion_tokens"]
    );
    assert_eq!(
        response["usage"]["total_tokens"],
        chat.completion["usage"]["total_tokens"]
    );
}

/// Rebuilds the response from its events as a client does, checking each event against what it builds.
fn reassemble(events: &[Value]) -> Value {
    let mut response = events[0]["response"].clone();
    let mut output: Vec<Value> = Vec::new();
    let mut text: Map<String, Value> = Map::new();
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["sequence_number"], index, "{event}");
        let key = event["item_id"].as_str().unwrap_or_default().to_owned();
        let append = |text: &mut Map<String, Value>, delta: &Value| {
            let so_far = text.entry(key.clone()).or_insert(json!(""));
            *so_far = json!(format!(
                "{}{}",
                so_far.as_str().unwrap_or(""),
                delta.as_str().expect("a delta")
            ));
        };
        match event["type"].as_str().expect("a type") {
            "response.output_item.added" => {
                assert_eq!(event["output_index"], output.len());
                output.push(event["item"].clone());
            }
            "response.output_text.delta"
            | "response.function_call_arguments.delta"
            | "response.reasoning_summary_text.delta" => append(&mut text, &event["delta"]),
            "response.output_text.done" | "response.reasoning_summary_text.done" => {
                assert_eq!(
                    text.get(&key).unwrap_or(&json!("")),
                    &event["text"],
                    "deltas add up to the text"
                )
            }
            "response.function_call_arguments.done" => {
                assert_eq!(text.get(&key).unwrap_or(&json!("")), &event["arguments"])
            }
            "response.output_item.done" => {
                let at = event["output_index"].as_u64().expect("index") as usize;
                let item = &event["item"];
                let streamed = text
                    .get(item["id"].as_str().expect("id"))
                    .cloned()
                    .unwrap_or(json!(""));
                let whole = match item["type"].as_str() {
                    Some("function_call") => &item["arguments"],
                    Some("message") => &item["content"][0]["text"],
                    _ => &item["summary"][0]["text"],
                };
                assert_eq!(&streamed, whole, "the item's deltas are its text");
                output[at] = item.clone();
            }
            "response.completed" | "response.incomplete" => {
                response["status"] = event["response"]["status"].clone();
                response["usage"] = event["response"]["usage"].clone();
                response["incomplete_details"] = event["response"]["incomplete_details"].clone();
            }
            _ => {}
        }
    }
    response["output"] = json!(output);
    response
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().expect("a type"))
        .collect()
}

#[test]
fn a_call_streams_as_openais_events_and_reassembles_into_the_answer() {
    let answer = first_turn();
    assert_eq!(
        types(&answer.events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert_eq!(answer.events[0]["response"]["status"], "in_progress");
    assert_eq!(answer.events[0]["response"]["output"], json!([]));
    assert_eq!(answer.events[2]["item"]["arguments"], "");
    assert_eq!(
        answer.events.last().map(|e| &e["response"]),
        Some(&answer.response)
    );
    assert_eq!(reassemble(&answer.events), answer.response);
}

#[test]
fn every_kind_of_answer_reassembles_from_its_stream() {
    let after_lookup = json!([
        {"role": "user", "content": ASK},
        {"type": "function_call", "call_id": "call_lookup_op-77", "name": "lookup_order", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_lookup_op-77", "output": "{}"},
        {"type": "function_call", "call_id": "call_refund_op-77", "name": "create_refund", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_refund_op-77", "output": "{}"},
    ]);
    for input in [json!(ASK), after_lookup, json!("Refund order 5"), json!([])] {
        for reasoning in [Value::Null, json!({"effort": "low", "summary": "auto"})] {
            for max in [Value::Null, json!(3), json!(0)] {
                let mut body = request(input.clone());
                body["reasoning"] = reasoning.clone();
                body["max_output_tokens"] = max.clone();
                let answer = responses_reply(&body, &[], &settings(), "resp_1").expect("a reply");
                assert_eq!(reassemble(&answer.events), answer.response, "{body}");
                let last = answer.events.last().expect("events");
                assert_eq!(last["response"], answer.response);
                assert_eq!(
                    last["type"],
                    format!("response.{}", answer.response["status"].as_str().expect("status"))
                );
            }
        }
    }
}

#[test]
fn a_final_answer_streams_its_text_in_content_events() {
    let items = json!([
        {"role": "user", "content": ASK},
        {"type": "function_call_output", "call_id": "x", "output": "{}"},
    ]);
    let mut body = request(items);
    body["tools"] = json!([{"type": "function", "name": "create_refund"}]);
    let answer = responses_reply(&body, &[], &settings(), "resp_1").expect("a reply");
    let kinds = types(&answer.events);
    assert_eq!(
        kinds[..4],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added"
        ]
    );
    assert!(
        kinds
            .iter()
            .filter(|k| **k == "response.output_text.delta")
            .count()
            >= 2
    );
    assert_eq!(
        kinds[kinds.len() - 4..],
        [
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert_eq!(answer.response["output"][0]["type"], "message");
    assert_eq!(answer.response["output"][0]["role"], "assistant");
}

#[test]
fn reasoning_streams_its_summary_first() {
    let mut body = request(json!(ASK));
    body["reasoning"] = json!({"effort": "medium"});
    let answer = responses_reply(&body, &[], &settings(), "resp_1").expect("a reply");
    let kinds = types(&answer.events);
    assert_eq!(kinds[2], "response.output_item.added");
    assert_eq!(answer.events[2]["item"]["type"], "reasoning");
    assert_eq!(kinds[3], "response.reasoning_summary_part.added");
    assert!(kinds.contains(&"response.reasoning_summary_text.done"));
    assert_eq!(answer.response["output"][0]["type"], "reasoning");
    assert_eq!(answer.response["output"][1]["type"], "function_call");
    assert_eq!(answer.response["reasoning"], json!({"effort": "medium"}));
    assert!(answer.response["usage"]["output_tokens_details"]["reasoning_tokens"].as_u64() > Some(0));
}

#[test]
fn max_output_tokens_under_the_answer_is_incomplete() {
    let mut body = request(json!(ASK));
    body["max_output_tokens"] = json!(4);
    let answer = responses_reply(&body, &[], &settings(), "resp_1").expect("a reply");
    assert_eq!(answer.response["status"], "incomplete");
    assert_eq!(
        answer.response["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    assert_eq!(answer.response["output"][0]["status"], "incomplete");
    let arguments = answer.response["output"][0]["arguments"]
        .as_str()
        .expect("arguments");
    assert!(
        serde_json::from_str::<Value>(arguments).is_err(),
        "a cut call is not JSON: {arguments}"
    );
    assert_eq!(
        answer.events.last().map(|e| &e["type"]),
        Some(&json!("response.incomplete"))
    );
    body["max_output_tokens"] = json!(100);
    let whole = responses_reply(&body, &[], &settings(), "resp_1").expect("a reply");
    assert_eq!(whole.response["status"], "completed");
}

#[test]
fn a_failure_stream_is_the_preamble_an_error_and_response_failed() {
    let body = request(json!(ASK));
    let parsed = ResponsesRequest::parse(&body).expect("valid");
    let events = parsed.failure_events("resp_9", &crate::error_body(429, true));
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "error",
            "response.failed"
        ]
    );
    let error = &events[2];
    assert_eq!(error["sequence_number"], 2);
    assert_eq!(error["code"], "insufficient_quota");
    assert_eq!(error["param"], Value::Null);
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("You exceeded your current quota"))
    );
    assert_eq!(error["error"], crate::error_body(429, true)["error"]);
    let failed = &events[3]["response"];
    assert_eq!(failed["id"], "resp_9");
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], "insufficient_quota");
    assert_eq!(failed["error"]["message"], error["message"]);
    // A server error has no code: its type stands in.
    let events = parsed.failure_events("resp_9", &crate::error_body(503, false));
    assert_eq!(events[2]["code"], "server_error");
    assert_eq!(events[3]["response"]["error"]["code"], "server_error");
}

#[test]
fn the_request_is_read_leniently_but_refused_where_the_script_cannot_read_it() {
    let refused =
        |body: Value| ResponsesRequest::parse(&body).expect_err("refused").body()["error"]["param"].clone();
    assert_eq!(refused(json!({"input": 5})), "input");
    assert_eq!(
        refused(json!({"previous_response_id": 5})),
        "previous_response_id"
    );
    assert_eq!(
        refused(json!({"previous_response_id": "resp_1", "conversation": "c"})),
        "conversation"
    );
    assert_eq!(refused(json!({"background": true, "store": false})), "background");
    assert_eq!(refused(json!({"max_output_tokens": "many"})), "max_output_tokens");
    assert_eq!(refused(json!({"tools": [{"type": "function"}]})), "tools[0].name");
    assert!(ResponsesRequest::parse(&json!("text")).is_err());
    // Unknown fields are ignored; `conversation` may be an object.
    let body = json!({"input": "hi", "frobnicate": 1, "conversation": {"id": "c1"}});
    let parsed = ResponsesRequest::parse(&body).expect("valid");
    assert_eq!(parsed.conversation, Some("c1"));
    assert!(parsed.store && !parsed.stream && !parsed.background);
}

#[test]
fn the_context_limit_counts_the_history_too() {
    let limited = ModelSettings {
        context_limit_chars: 30,
        ..ModelSettings::default()
    };
    let history = [json!({"role": "user", "content": ASK})];
    let body = json!({"input": "more text"});
    let error = responses_reply(&body, &history, &limited, "resp_1").expect_err("too long");
    assert_eq!(
        error,
        ResponsesError::ContextLengthExceeded { chars: 36, limit: 30 }
    );
    assert!(responses_reply(&body, &[], &limited, "resp_1").is_ok());
}
