//! The model through its public functions: the script turn by turn, a whole conversation fed back into `reply`,
//! the context limit and the refusals.

mod stream;

use serde_json::{Value, json};

use super::*;

pub(super) fn settings() -> ModelSettings {
    ModelSettings::default()
}

pub(super) fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

pub(super) fn request(messages: &[Value]) -> Value {
    json!({"model": "gpt-4.1", "messages": messages})
}

pub(super) fn message(reply: &Reply) -> &Value {
    &reply.completion["choices"][0]["message"]
}

fn finish_reason(reply: &Reply) -> &str {
    reply.completion["choices"][0]["finish_reason"]
        .as_str()
        .expect("a finish_reason")
}

/// The single tool call of a reply: its id, its function and its arguments parsed (they must be a JSON string).
fn call(reply: &Reply) -> (String, String, Value) {
    let calls = message(reply)["tool_calls"].as_array().expect("tool_calls");
    assert_eq!(calls.len(), 1);
    let arguments = calls[0]["function"]["arguments"]
        .as_str()
        .expect("arguments are a string");
    (
        calls[0]["id"].as_str().expect("an id").to_owned(),
        calls[0]["function"]["name"].as_str().expect("a name").to_owned(),
        serde_json::from_str(arguments).expect("arguments are JSON"),
    )
}

/// A tool reply to the call of `reply`.
fn tool_reply_to(reply: &Reply, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": call(reply).0, "content": content})
}

fn answer(messages: &[Value]) -> Reply {
    reply(&request(messages), &settings()).expect("a reply")
}

#[test]
fn turn_one_looks_the_order_up() {
    let first = answer(&[
        json!({"role": "system", "content": "You are a support agent."}),
        user("Refund order 1234, op=op-77"),
    ]);
    assert_eq!(finish_reason(&first), "tool_calls");
    assert_eq!(message(&first)["content"], Value::Null);
    assert_eq!(message(&first)["role"], "assistant");
    assert_eq!(message(&first)["refusal"], Value::Null);
    let (id, name, arguments) = call(&first);
    assert_eq!(
        (id.as_str(), name.as_str()),
        ("call_lookup_op-77", "lookup_order")
    );
    assert_eq!(arguments, json!({"order_id": "1234", "op": "op-77"}));
    let tool_call = &message(&first)["tool_calls"][0];
    assert_eq!(tool_call["type"], "function");
}

#[test]
fn a_full_refund_conversation_fed_back_into_reply() {
    let mut messages = vec![user("Refund order 1234, op=op-77")];
    let lookup = answer(&messages);
    messages.push(message(&lookup).clone());
    messages.push(tool_reply_to(
        &lookup,
        r#"{"order_id": "1234", "amount": 19.99, "status": "paid"}"#,
    ));

    let refund = answer(&messages);
    assert_eq!(finish_reason(&refund), "tool_calls");
    let (id, name, arguments) = call(&refund);
    assert_eq!(
        (id.as_str(), name.as_str()),
        ("call_refund_op-77", "create_refund")
    );
    assert_eq!(
        arguments,
        json!({"order_id": "1234", "amount": 19.99, "op": "op-77"})
    );
    messages.push(message(&refund).clone());
    messages.push(tool_reply_to(
        &refund,
        r#"{"refund_id": "re_1", "status": "succeeded"}"#,
    ));

    let done = answer(&messages);
    assert_eq!(finish_reason(&done), "stop");
    assert!(message(&done).get("tool_calls").is_none());
    let text = message(&done)["content"].as_str().expect("text");
    assert!(
        text.contains("op-77") && text.contains("went through") && text.contains("refund"),
        "{text}"
    );

    // Three different turns, three different completion ids.
    let ids: Vec<&Value> = [&lookup, &refund, &done]
        .iter()
        .map(|r| &r.completion["id"])
        .collect();
    assert!(
        ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
        "{ids:?}"
    );
}

#[test]
fn a_payment_conversation_calls_process_payment_and_reports_the_error() {
    let mut messages = vec![user("Pay order 99 (op: op-5)")];
    let lookup = answer(&messages);
    assert_eq!(call(&lookup).2, json!({"order_id": "99", "op": "op-5"}));
    messages.push(message(&lookup).clone());
    messages.push(tool_reply_to(&lookup, "order 99: open"));
    let payment = answer(&messages);
    let (id, name, arguments) = call(&payment);
    assert_eq!(
        (id.as_str(), name.as_str()),
        ("call_payment_op-5", "process_payment")
    );
    assert_eq!(
        arguments,
        json!({"order_id": "99", "amount": script::DEFAULT_AMOUNT, "op": "op-5"})
    );
    messages.push(message(&payment).clone());
    messages.push(tool_reply_to(
        &payment,
        r#"{"error": {"message": "card declined"}}"#,
    ));
    let done = answer(&messages);
    let text = message(&done)["content"].as_str().expect("text");
    assert!(
        text.contains("op-5") && text.contains("did not go through") && text.contains("card declined"),
        "{text}"
    );
}

#[test]
fn replays_are_identical() {
    let messages = [user("Refund order 1234, op=op-77")];
    assert_eq!(answer(&messages), answer(&messages));
    let other_model = reply(&json!({"model": "mock", "messages": messages}), &settings()).expect("a reply");
    assert_eq!(other_model.completion["id"], answer(&messages).completion["id"]);
    assert_eq!(other_model.completion["model"], "mock");
    assert_eq!(answer(&messages).completion["model"], "gpt-4.1");
}

#[test]
fn ids_follow_the_op() {
    let a = answer(&[user("Refund order 1, op=a")]);
    let b = answer(&[user("Refund order 1, op=b")]);
    assert_eq!(call(&a).0, "call_lookup_a");
    assert_eq!(call(&b).0, "call_lookup_b");
    assert_ne!(a.completion["id"], b.completion["id"]);
}

#[test]
fn the_completion_has_openai_shape() {
    let first = answer(&[user("Refund order 1234, op=op-77")]);
    let completion = &first.completion;
    assert!(
        completion["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("chatcmpl-"))
    );
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["created"], completion::CREATED);
    assert_eq!(completion["system_fingerprint"], completion::SYSTEM_FINGERPRINT);
    assert_eq!(completion["choices"][0]["index"], 0);
    assert_eq!(completion["choices"][0]["logprobs"], Value::Null);
    let usage = &completion["usage"];
    // "Refund order 1234, op=op-77" is 27 characters: 7 tokens.
    assert_eq!(usage["prompt_tokens"], 7);
    let (prompt, generated) = (
        usage["prompt_tokens"].as_u64(),
        usage["completion_tokens"].as_u64(),
    );
    assert!(generated.is_some_and(|t| t > 0));
    assert_eq!(
        usage["total_tokens"].as_u64(),
        prompt.zip(generated).map(|(p, g)| p + g)
    );
}

#[test]
fn a_missing_model_is_echoed_as_mock() {
    let answer = reply(&json!({"messages": [user("hi")]}), &settings()).expect("a reply");
    assert_eq!(answer.completion["model"], "mock");
}

#[test]
fn undeclared_tools_get_a_text_answer() {
    let tools = json!([{"type": "function", "function": {"name": "create_refund", "parameters": {}}}]);
    let request = json!({"model": "mock", "messages": [user("Refund order 1, op=x")], "tools": tools});
    let answer = reply(&request, &settings()).expect("a reply");
    assert_eq!(finish_reason(&answer), "stop");
    assert!(
        message(&answer)["content"]
            .as_str()
            .is_some_and(|t| t.contains("lookup_order"))
    );
}

#[test]
fn operation_id_reads_the_newest_user_turn() {
    let messages = [
        user("Refund order 1, op=old"),
        json!({"role": "assistant", "content": "ok"}),
        user("Pay order 2, op: new"),
    ];
    assert_eq!(operation_id(&request(&messages)).as_deref(), Some("new"));
    assert_eq!(operation_id(&request(&[user("no op here")])), None);
    assert_eq!(operation_id(&json!({"messages": "nope"})), None);
    assert_eq!(operation_id(&json!(null)), None);
    let parts =
        json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "Pay order 3 op=p-3"}]}]});
    assert_eq!(operation_id(&parts).as_deref(), Some("p-3"));
}

#[test]
fn context_over_the_limit_is_refused_with_openais_exact_body() {
    let limited = ModelSettings {
        context_limit_chars: 40,
        ..ModelSettings::default()
    };
    let at_limit = request(&[user(&"x".repeat(40))]);
    assert!(reply(&at_limit, &limited).is_ok());
    let over = request(&[
        user(&"x".repeat(30)),
        json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "lookup_order", "arguments": "x".repeat(11)}}]}),
    ]);
    let error = reply(&over, &limited).expect_err("over the limit");
    assert_eq!(error, ModelError::ContextLengthExceeded { chars: 41, limit: 40 });
    assert_eq!(error.status(), 400);
    assert_eq!(
        error.body(),
        json!({"error": {
            "message": "This model's maximum context length is 10 tokens. However, your messages resulted in 11 tokens. \
                        Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }})
    );
}

#[test]
fn invalid_requests_are_400_invalid_request_error_naming_the_field() {
    let messages = [
        user("a"),
        json!({"role": "assistant"}),
        json!({"content": "no role"}),
    ];
    let error = reply(&request(&messages), &settings()).expect_err("invalid");
    assert_eq!(error.status(), 400);
    let body = error.body();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("'messages[2].role'")),
        "{body}"
    );
    assert!(matches!(error, ModelError::InvalidRequest(_)));
    // Validation comes before the context check: a huge invalid request is invalid, not too long.
    let tiny = ModelSettings {
        context_limit_chars: 1,
        ..ModelSettings::default()
    };
    let huge_invalid = json!({"messages": [user("a long message"), 5]});
    assert!(matches!(
        reply(&huge_invalid, &tiny),
        Err(ModelError::InvalidRequest(_))
    ));
}

#[test]
fn error_body_and_models_list_are_public() {
    assert_eq!(error_body(429, true)["error"]["code"], "insufficient_quota");
    assert_eq!(error_body(429, false)["error"]["code"], "rate_limit_exceeded");
    assert_eq!(error_body(503, false)["error"]["type"], "server_error");
    assert_eq!(error_body(529, false)["error"]["type"], "overloaded_error");
    assert_eq!(models_list()["data"][0]["id"], "mock");
}
