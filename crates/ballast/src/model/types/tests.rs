use serde_json::{Value, json};

use super::*;

/// Reads `body` as `T` and writes it back: the JSON must be equal, key for key.
fn round_trip<T: serde::de::DeserializeOwned + Serialize>(body: &Value) -> T {
    let typed: T = serde_json::from_value(body.clone()).expect("reads");
    assert_eq!(&serde_json::to_value(&typed).expect("writes"), body);
    // And from text, as the client reads an upstream's bytes.
    let from_text: T = serde_json::from_str(&body.to_string()).expect("reads text");
    assert_eq!(&serde_json::to_value(&from_text).expect("writes"), body);
    typed
}

fn agent_request() -> Value {
    json!({
        "model": "gpt-4.1",
        "reasoning_effort": "high",
        "metadata": {"run": "r-1", "nested": {"a": [1, 2.5, null, true]}},
        "temperature": 0.2,
        "max_completion_tokens": 512,
        "stream": true,
        "stream_options": {"include_usage": true},
        "tools": [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}],
        "tool_choice": "auto",
        "messages": [
            {"role": "developer", "content": "Be brief.", "x-provider-cache": {"ttl": "5m"}},
            {"role": "system", "content": [{"type": "text", "text": "Rules", "cache_control": {"type": "ephemeral"}}]},
            {"role": "user", "name": "ana", "content": [{"type": "text", "text": "Where is 1234?"},
                                                         {"type": "image_url", "image_url": {"url": "data:,"}}]},
            {"role": "assistant", "content": null, "refusal": null, "function_call": null, "audio": null,
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "lookup_order", "arguments": "{\"order_id\":\"1234\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"status\":\"shipped\"}"},
            {"role": "assistant", "content": "Shipped.", "tool_calls": null},
            {"role": "function", "name": "legacy", "content": "ok"},
            {"role": "user", "content": "Thanks"}
        ]
    })
}

#[test]
fn a_request_with_unknown_fields_round_trips_unchanged() {
    let request: ChatRequest = round_trip(&agent_request());
    assert_eq!(request.model, "gpt-4.1");
    assert_eq!(request.stream, Some(true));
    assert_eq!(request.extra["reasoning_effort"], "high");
    assert_eq!(request.extra["metadata"]["run"], "r-1");
    let roles: Vec<&str> = request
        .messages
        .iter()
        .map(|message| message.role.as_str())
        .collect();
    assert_eq!(
        roles,
        [
            "developer",
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "function",
            "user"
        ]
    );
    assert_eq!(request.messages[6].role, Role::Other("function".to_owned()));
    assert_eq!(request.messages[0].extra["x-provider-cache"]["ttl"], "5m");
    let call = &request.messages[3];
    assert!(call.has_tool_calls());
    assert_eq!(call.tool_calls.as_ref().unwrap()[0].id.as_deref(), Some("call_1"));
    assert_eq!(call.content, None, "a null content reads as None");
    assert_eq!(request.messages[4].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(request.messages[5].tool_calls, None);
    assert!(!request.messages[5].has_tool_calls());
}

#[test]
fn changing_a_typed_field_keeps_every_other_key() {
    let mut request: ChatRequest = serde_json::from_value(agent_request()).unwrap();
    request.model = "mock".to_owned();
    request.messages.remove(0);
    let mut expected = agent_request();
    expected["model"] = json!("mock");
    expected["messages"].as_array_mut().unwrap().remove(0);
    assert_eq!(serde_json::to_value(&request).unwrap(), expected);
}

#[test]
fn a_typed_value_set_over_a_kept_null_is_written_once() {
    let body = json!({"role": "assistant", "content": null, "tool_calls": null});
    let mut message: Message = serde_json::from_value(body).unwrap();
    message.content = Some(json!("hello"));
    message.tool_calls = Some(vec![ToolCallRef {
        id: Some("call_9".to_owned()),
        extra: Map::new(),
    }]);
    let text = serde_json::to_string(&message).unwrap();
    assert_eq!(text.matches("\"content\"").count(), 1, "{text}");
    assert_eq!(text.matches("\"tool_calls\"").count(), 1, "{text}");
    let written: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        written,
        json!({"role": "assistant", "content": "hello", "tool_calls": [{"id": "call_9"}]})
    );
}

#[test]
fn writing_adds_no_field_that_was_absent() {
    let message = Message::text(Role::User, "hi");
    assert_eq!(
        serde_json::to_value(&message).unwrap(),
        json!({"role": "user", "content": "hi"})
    );
    let request = ChatRequest {
        model: "m".to_owned(),
        messages: vec![message],
        tools: None,
        stream: None,
        extra: Map::new(),
    };
    assert_eq!(
        serde_json::to_value(&request).unwrap(),
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    );
    round_trip::<ChatRequest>(&json!({"model": "m", "messages": []}));
    round_trip::<Usage>(&json!({}));
}

#[test]
fn a_response_with_unknown_fields_round_trips_unchanged() {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000u64, "model": "gpt-4.1-2025",
        "system_fingerprint": "fp_1", "service_tier": "default", "x_provider": {"region": "eu"},
        "choices": [{
            "index": 0, "logprobs": null, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "refusal": null, "annotations": [],
                        "tool_calls": [{"id": "call_1", "type": "function",
                                        "function": {"name": "f", "arguments": "{}"}}]}
        }],
        "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29,
                  "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
    });
    let response: ChatResponse = round_trip(&body);
    let usage = response.usage.as_ref().unwrap();
    assert_eq!(
        (usage.prompt_tokens, usage.completion_tokens, usage.total()),
        (Some(19), Some(10), 29)
    );
    assert_eq!(response.choices[0].finish_reason.as_deref(), Some("tool_calls"));
    assert!(response.choices[0].message.as_ref().unwrap().has_tool_calls());
    assert_eq!(response.extra["x_provider"]["region"], "eu");
}

#[test]
fn stream_chunks_round_trip_with_null_and_final_usage() {
    let delta = json!({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "usage": null,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "He"}, "finish_reason": null,
                     "logprobs": null}]
    });
    let chunk: ChatChunk = round_trip(&delta);
    assert_eq!(chunk.usage, None);
    assert_eq!(chunk.choices[0].finish_reason, None);
    assert_eq!(chunk.choices[0].extra["delta"]["content"], "He");

    let last = json!({"id": "c1", "object": "chat.completion.chunk", "choices": [],
                      "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}});
    let chunk: ChatChunk = round_trip(&last);
    assert_eq!(chunk.usage.unwrap().total(), 12);
}

#[test]
fn usage_total_falls_back_to_the_sum_of_what_is_reported() {
    let usage: Usage = round_trip(&json!({"prompt_tokens": 5, "completion_tokens": 7}));
    assert_eq!(usage.total(), 12);
    let usage: Usage = round_trip(&json!({"prompt_tokens": 5}));
    assert_eq!(usage.total(), 5);
}

#[test]
fn roles_read_and_write_as_their_names() {
    for name in [
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "function",
        "ipython",
        "Assistant",
    ] {
        let role: Role = serde_json::from_value(json!(name)).unwrap();
        assert_eq!(serde_json::to_value(&role).unwrap(), json!(name));
        assert_eq!(role.to_string(), name);
    }
    assert_eq!(
        Role::from("Assistant"),
        Role::Other("Assistant".to_owned()),
        "roles are case-sensitive"
    );
    assert!(Role::System.is_instruction() && Role::Developer.is_instruction());
    assert!(!Role::User.is_instruction() && !Role::Tool.is_instruction());
}

#[test]
fn a_typed_field_of_the_wrong_type_or_a_missing_required_one_is_an_error() {
    let wrong = [
        json!({"model": 4, "messages": []}),
        json!({"model": "m", "messages": {}}),
        json!({"model": "m", "messages": [], "stream": "yes"}),
        json!({"messages": []}),
        json!({"model": null, "messages": []}),
        json!({"model": "m", "messages": [{"content": "no role"}]}),
        json!({"model": "m", "messages": [{"role": "tool", "tool_call_id": 7}]}),
        json!([]),
    ];
    for body in wrong {
        let error = serde_json::from_value::<ChatRequest>(body.clone()).expect_err(&body.to_string());
        assert!(error.is_data(), "{body}: {error}");
    }
    let error = serde_json::from_value::<Usage>(json!({"prompt_tokens": -1})).unwrap_err();
    assert!(
        error.to_string().contains("prompt_tokens"),
        "the error names the field: {error}"
    );
}

/// A tool call's function and arguments, one method away: a JSON text (OpenAI) or an object (some providers);
/// a call without arguments, or with arguments that are not the JSON asked for, is an error naming the call.
#[test]
fn tool_call_arguments_are_parsed_or_refused_with_the_call_id() {
    let call = |function: Value| -> ToolCallRef {
        serde_json::from_value(json!({"id": "call_9", "type": "function", "function": function})).unwrap()
    };
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Lookup {
        order_id: String,
    }
    let text = call(json!({"name": "lookup_order", "arguments": "{\"order_id\": \"1\"}"}));
    assert_eq!(text.function_name(), Some("lookup_order"));
    assert_eq!(
        text.arguments::<Lookup>().unwrap(),
        Lookup { order_id: "1".into() }
    );
    let object = call(json!({"name": "lookup_order", "arguments": {"order_id": "2"}}));
    assert_eq!(
        object.arguments::<Lookup>().unwrap(),
        Lookup { order_id: "2".into() }
    );
    let missing = call(json!({"name": "lookup_order"}));
    assert_eq!(
        missing.arguments::<Value>().unwrap_err().to_string(),
        "tool call call_9: it has no function.arguments"
    );
    let broken = call(json!({"name": "lookup_order", "arguments": "{\"order_id\": "}));
    let error = broken.arguments::<Lookup>().unwrap_err().to_string();
    assert!(
        error.starts_with("tool call call_9: function.arguments: "),
        "{error}"
    );
    let wrong = call(json!({"arguments": "{\"order\": 3}"}));
    assert_eq!(wrong.function_name(), None);
    assert!(wrong.arguments::<Lookup>().is_err());
}

#[test]
fn a_request_and_a_tool_reply_have_constructors() {
    let request = ChatRequest::new("agent", vec![Message::text(Role::User, "Hi")])
        .with_tools(json!([{"type": "function"}]))
        .streamed(false);
    assert_eq!(
        serde_json::to_value(&request).unwrap(),
        json!({"model": "agent", "messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function"}], "stream": false})
    );
    let reply = Message::tool_reply(Some("call_9".into()), "{\"ok\":true}");
    assert_eq!(
        serde_json::to_value(&reply).unwrap(),
        json!({"role": "tool", "content": "{\"ok\":true}", "tool_call_id": "call_9"})
    );
}
