use serde_json::json;

use super::*;

fn invalid(request: Value) -> String {
    match validate(&request) {
        Err(ModelError::InvalidRequest(message)) => message,
        other => panic!("expected an invalid request for {request}, got {other:?}"),
    }
}

#[test]
fn messages_must_be_a_non_empty_array() {
    assert!(invalid(json!([])).contains("JSON object"));
    assert!(invalid(json!({"model": "mock"})).contains("'messages'"));
    assert!(invalid(json!({"messages": null})).contains("Missing required parameter: 'messages'"));
    assert!(invalid(json!({"messages": []})).contains("empty array"));
    assert!(
        invalid(json!({"messages": "hi"}))
            .contains("'messages': expected an array of objects, but got a string")
    );
}

#[test]
fn each_message_needs_a_known_string_role_and_the_error_names_it() {
    let ok = json!({"role": "user", "content": "hi"});
    assert_eq!(
        invalid(json!({"messages": [ok, ok, "hi"]})),
        "Invalid type for 'messages[2]': expected an object, but got a string instead."
    );
    assert_eq!(
        invalid(json!({"messages": [ok, {"content": "hi"}]})),
        "Missing required parameter: 'messages[1].role'."
    );
    assert_eq!(
        invalid(json!({"messages": [ok, ok, {"role": 7}]})),
        "Invalid type for 'messages[2].role': expected a string, but got a number instead."
    );
    assert!(
        invalid(json!({"messages": [{"role": "robot"}]}))
            .starts_with("Invalid value for 'messages[0].role': 'robot'.")
    );
}

#[test]
fn every_openai_role_is_accepted_and_other_fields_are_ignored() {
    let messages: Vec<Value> = ROLES
        .iter()
        .map(|role| json!({"role": role, "content": 5}))
        .collect();
    let request = json!({"messages": messages, "temperature": "hot", "tools": null, "whatever": {}});
    assert_eq!(validate(&request).map(<[Value]>::len), Ok(ROLES.len()));
}

#[test]
fn tools_must_be_an_array_when_present() {
    let request = json!({"messages": [{"role": "user"}], "tools": {"type": "function"}});
    assert!(invalid(request).contains("'tools': expected an array of objects, but got an object"));
}

#[test]
fn context_counts_text_contents_text_parts_and_tool_call_arguments() {
    let messages = [
        json!({"role": "system", "content": "abcd"}),
        json!({"role": "user", "content": [
            {"type": "text", "text": "éé"},
            {"type": "image_url", "image_url": {"url": "https://example.invalid/a-long-url.png"}},
            {"type": "text", "text": "xyz"},
        ]}),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a-long-id", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "x", "arguments": "[1]"}},
        ]}),
        json!({"role": "tool", "tool_call_id": "call_a-long-id", "content": "ok"}),
    ];
    // 4 + (2 + 3) + (2 + 3) + 2, in characters, not bytes.
    assert_eq!(context_chars(&messages), 16);
    assert_eq!(message_text(&messages[1]), "éé\nxyz");
}

#[test]
fn declared_functions_are_read_from_tools() {
    let request = json!({"tools": [
        {"type": "function", "function": {"name": "lookup_order", "parameters": {}}},
        {"type": "function", "function": {"name": "create_refund"}},
    ]});
    assert_eq!(
        declared_functions(&request),
        Some(vec!["lookup_order", "create_refund"])
    );
    assert_eq!(declared_functions(&json!({"tools": []})), Some(vec![]));
    assert_eq!(declared_functions(&json!({})), None);
}

#[test]
fn tool_replies_are_matched_to_their_calls_and_the_newest_wins() {
    let turns = [
        json!({"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "create_refund", "arguments": "{}"}},
        ]}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "refund 1"}),
        json!({"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "order"}]}),
        json!({"role": "tool", "tool_call_id": "c2", "content": "refund 2"}),
        json!({"role": "tool", "tool_call_id": "elsewhere", "name": "process_payment", "content": "legacy"}),
    ];
    assert_eq!(tool_reply(&turns, "lookup_order").as_deref(), Some("order"));
    assert_eq!(tool_reply(&turns, "create_refund").as_deref(), Some("refund 2"));
    assert_eq!(tool_reply(&turns, "process_payment").as_deref(), Some("legacy"));
    // An assistant's text is no tool reply.
    assert_eq!(
        tool_reply(
            &[json!({"role": "assistant", "name": "lookup_order", "content": "x"})],
            "lookup_order"
        ),
        None
    );
}

#[test]
fn newest_user_turn_is_the_last_user_message() {
    let messages = [
        json!({"role": "user", "content": "a"}),
        json!({"role": "assistant", "content": "b"}),
        json!({"role": "user", "content": "c"}),
        json!({"role": "tool", "content": "d"}),
    ];
    assert_eq!(newest_user_turn(&messages), Some(2));
    assert_eq!(newest_user_turn(&messages[1..2]), None);
}
