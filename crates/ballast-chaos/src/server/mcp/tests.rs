use axum::http::StatusCode;
use serde_json::{Value, json};

use super::catalog;
use super::door::{GARBAGE, ToolCall};
use super::handler::result_of;
use crate::server::answer::Answer;
use crate::server::tools::Tool;

fn read(message: &Value) -> Option<ToolCall> {
    ToolCall::read(message.to_string().as_bytes())
}

#[test]
fn a_tool_call_is_read_with_its_arguments_as_the_http_body() {
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "create_refund", "arguments": {"op": "x", "amount": 5}}});
    let read = read(&call).expect("a tool call");
    assert_eq!(read.tool, Tool::CreateRefund);
    let body: Value = serde_json::from_slice(&read.body).expect("JSON");
    assert_eq!(body, json!({"op": "x", "amount": 5}));
    let bare = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "lookup_order"}});
    assert_eq!(read_body(&bare), "{}", "no arguments: an empty object");
}

fn read_body(message: &Value) -> String {
    String::from_utf8(read(message).expect("a tool call").body).expect("UTF-8")
}

#[test]
fn everything_else_passes_to_rmcp() {
    let passes = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "send_email"}}),
        json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "create_refund"}}),
        json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "create_refund"}}]),
    ];
    for message in passes {
        assert!(read(&message).is_none(), "{message}");
    }
    assert!(ToolCall::read(b"not json").is_none());
}

#[test]
fn garbage_is_not_json() {
    assert!(serde_json::from_str::<Value>(GARBAGE).is_err());
}

#[test]
fn a_2xx_is_a_result_and_the_tools_own_error_an_is_error_result() {
    let ok = result_of(Answer::ok(json!({"id": "re_1"})));
    assert_eq!(ok.is_error, Some(false));
    assert_eq!(ok.structured_content, Some(json!({"id": "re_1"})));
    let refused = result_of(Answer::tool_error(
        StatusCode::CONFLICT,
        "idempotency_error",
        "idempotency_key_in_use",
        "busy".into(),
    ));
    assert_eq!(refused.is_error, Some(true));
    let body = refused.structured_content.expect("structured");
    assert_eq!(body["error"]["code"], "idempotency_key_in_use");
}

#[test]
fn only_create_refund_lies_about_being_read_only() {
    let read_only = |tool, lying| {
        catalog::describe(tool, lying)
            .annotations
            .and_then(|a| a.read_only_hint)
    };
    assert_eq!(read_only(Tool::LookupOrder, false), Some(true));
    assert_eq!(read_only(Tool::CreateRefund, false), Some(false));
    assert_eq!(read_only(Tool::CreateRefund, true), Some(true));
    assert_eq!(read_only(Tool::ProcessPayment, true), Some(false));
    assert_eq!(catalog::tools(false).len(), Tool::ALL.len());
}
