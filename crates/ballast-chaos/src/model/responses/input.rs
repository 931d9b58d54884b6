//! A Responses request's input: its items, checked as far as the script needs, and the chat conversation they
//! stand for.
//!
//! Validation is minimal, as chat's is: an item must be an object; a message needs a known `role` and a string or
//! array `content`; a `function_call` needs string `call_id`, `name` and `arguments`; a `function_call_output`
//! needs a string `call_id` and an `output`. Items of any other type (`reasoning`, `item_reference`, built-in tool
//! calls) are kept and ignored by the script.

use serde_json::{Value, json};

use super::ResponsesError;
use crate::model::conversation::kind;

/// The roles of a Responses input message.
const ROLES: [&str; 4] = ["user", "assistant", "system", "developer"];

/// The request's `input` as items: a string is one user message, an array is checked item by item; none at all
/// (a request that only continues `previous_response_id` or a `conversation`) is no items.
pub(super) fn items(input: Option<&Value>) -> Result<Vec<Value>, ResponsesError> {
    match input {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![json!({"role": "user", "content": text})]),
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                check_item(index, item)?;
            }
            Ok(items.clone())
        }
        Some(other) => Err(ResponsesError::invalid(
            format!(
                "Invalid type for 'input': expected a string or an array of input items, but got {} instead.",
                kind(other)
            ),
            "input",
        )),
    }
}

/// What an item is, for the script.
enum Item<'a> {
    Message {
        role: &'a str,
    },
    FunctionCall,
    FunctionCallOutput,
    /// Reasoning, references, built-in tools: nothing the script reads.
    Other,
}

/// An item's kind: its `type`, or a message when it has none (the "easy" `{"role", "content"}` form).
fn item_kind(item: &Value) -> Item<'_> {
    let role = || item.get("role").and_then(Value::as_str).unwrap_or("");
    match item.get("type").and_then(Value::as_str) {
        None | Some("message") => Item::Message { role: role() },
        Some("function_call") => Item::FunctionCall,
        Some("function_call_output") => Item::FunctionCallOutput,
        Some(_) => Item::Other,
    }
}

fn check_item(index: usize, item: &Value) -> Result<(), ResponsesError> {
    let at = |key: &str| format!("input[{index}].{key}");
    if !item.is_object() {
        return Err(ResponsesError::invalid(
            format!(
                "Invalid type for 'input[{index}]': expected an object, but got {} instead.",
                kind(item)
            ),
            &format!("input[{index}]"),
        ));
    }
    let required: &[&str] = match item_kind(item) {
        Item::Message { .. } => return check_message(index, item),
        Item::FunctionCall => &["call_id", "name", "arguments"],
        Item::FunctionCallOutput => &["call_id"],
        Item::Other => &[],
    };
    for key in required {
        match item.get(*key) {
            Some(Value::String(_)) => {}
            None | Some(Value::Null) => {
                return Err(ResponsesError::invalid(
                    format!("Missing required parameter: '{}'.", at(key)),
                    &at(key),
                ));
            }
            Some(other) => {
                return Err(ResponsesError::invalid(
                    format!(
                        "Invalid type for '{}': expected a string, but got {} instead.",
                        at(key),
                        kind(other)
                    ),
                    &at(key),
                ));
            }
        }
    }
    if matches!(item_kind(item), Item::FunctionCallOutput) && item.get("output").is_none_or(Value::is_null) {
        return Err(ResponsesError::invalid(
            format!("Missing required parameter: '{}'.", at("output")),
            &at("output"),
        ));
    }
    Ok(())
}

fn check_message(index: usize, item: &Value) -> Result<(), ResponsesError> {
    let field = format!("input[{index}].role");
    let message = match item.get("role") {
        None | Some(Value::Null) => format!("Missing required parameter: '{field}'."),
        Some(Value::String(role)) if ROLES.contains(&role.as_str()) => {
            return match item.get("content") {
                Some(Value::String(_) | Value::Array(_)) => Ok(()),
                None | Some(Value::Null) => Err(ResponsesError::invalid(
                    format!("Missing required parameter: 'input[{index}].content'."),
                    &format!("input[{index}].content"),
                )),
                Some(other) => Err(ResponsesError::invalid(
                    format!(
                        "Invalid type for 'input[{index}].content': expected a string or an array of content \
                         parts, but got {} instead.",
                        kind(other)
                    ),
                    &format!("input[{index}].content"),
                )),
            };
        }
        Some(Value::String(role)) => format!(
            "Invalid value for '{field}': '{role}'. Supported values are: 'user', 'assistant', 'system', and \
             'developer'."
        ),
        Some(other) => format!(
            "Invalid type for '{field}': expected a string, but got {} instead.",
            kind(other)
        ),
    };
    Err(ResponsesError::invalid(message, &field))
}

/// The text of a `content` or an `output`: the string itself, or the `text` of each part that has one
/// (`input_text`, `output_text`), joined by newlines — as chat joins its text parts.
fn text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}

/// The chat conversation `instructions` and `items` stand for, for the script and the context size:
/// - the instructions are a first `system` message;
/// - a message item is a chat message with its text;
/// - a `function_call` is a tool call of an assistant message: it joins the assistant message just before it
///   (the text the model said before calling, or the calls of the same turn), or starts one — so one turn of
///   the model is one assistant message, as in chat, and the turns are counted alike;
/// - a `function_call_output` is a `tool` message answering `call_id`;
/// - every other item (reasoning above all) is left out, and does not separate a turn's items.
pub(super) fn chat_messages(instructions: Option<&str>, items: &[Value]) -> Vec<Value> {
    let mut messages: Vec<Value> = Vec::with_capacity(items.len() + 1);
    if let Some(instructions) = instructions {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    // The assistant message the next function call joins, if the last item the script reads was the model's.
    let mut open: Option<usize> = None;
    for item in items {
        match item_kind(item) {
            Item::Message { role } => {
                messages.push(json!({"role": role, "content": text(item.get("content"))}));
                open = (role == "assistant").then_some(messages.len() - 1);
            }
            Item::FunctionCall => {
                let call = json!({
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                });
                match open.and_then(|at| messages.get_mut(at)) {
                    Some(message) => match message.get_mut("tool_calls").and_then(Value::as_array_mut) {
                        Some(calls) => calls.push(call),
                        None => message["tool_calls"] = json!([call]),
                    },
                    None => {
                        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]}));
                        open = Some(messages.len() - 1);
                    }
                }
            }
            Item::FunctionCallOutput => {
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": text(item.get("output")),
                }));
                open = None;
            }
            Item::Other => {}
        }
    }
    messages
}

/// The names of the function tools `tools` declares (Responses' flat form, `{"type": "function", "name"}`);
/// `None` when the request declares no `tools` at all. Tools of other types (built-in tools) declare no function.
pub(super) fn declared_functions(tools: Option<&Value>) -> Result<Option<Vec<&str>>, ResponsesError> {
    let tools = match tools {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(tools)) => tools,
        Some(other) => {
            return Err(ResponsesError::invalid(
                format!(
                    "Invalid type for 'tools': expected an array of objects, but got {} instead.",
                    kind(other)
                ),
                "tools",
            ));
        }
    };
    let mut names = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            continue;
        }
        match tool.get("name").and_then(Value::as_str) {
            Some(name) => names.push(name),
            // Chat's nested `{"function": {"name"}}` is not a Responses tool: OpenAI refuses it so, and so do we.
            None => {
                let param = format!("tools[{index}].name");
                return Err(ResponsesError::invalid(
                    format!("Missing required parameter: '{param}'."),
                    &param,
                ));
            }
        }
    }
    Ok(Some(names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_input_is_one_user_message() {
        let items = items(Some(&json!("Refund order 1, op=a"))).expect("items");
        assert_eq!(
            items,
            [json!({"role": "user", "content": "Refund order 1, op=a"})]
        );
        assert!(super::items(None).expect("none").is_empty());
    }

    #[test]
    fn items_are_checked_naming_the_field() {
        let param = |input: Value| match items(Some(&input)) {
            Err(ResponsesError::InvalidRequest { param, .. }) => param,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert_eq!(param(json!(5)).as_deref(), Some("input"));
        assert_eq!(param(json!(["text"])).as_deref(), Some("input[0]"));
        assert_eq!(
            param(json!([{"role": "user", "content": "a"}, {"type": "function_call", "name": "f", "arguments": "{}"}]))
                .as_deref(),
            Some("input[1].call_id")
        );
        assert_eq!(
            param(json!([{"type": "function_call_output", "call_id": "c"}])).as_deref(),
            Some("input[0].output")
        );
        assert_eq!(
            param(json!([{"role": "tool", "content": "x"}])).as_deref(),
            Some("input[0].role")
        );
        assert_eq!(param(json!([{"content": "x"}])).as_deref(), Some("input[0].role"));
        assert_eq!(
            param(json!([{"role": "user"}])).as_deref(),
            Some("input[0].content")
        );
        // Unknown types are kept, not refused.
        assert!(
            items(Some(
                &json!([{"type": "reasoning", "summary": []}, {"type": "web_search_call"}])
            ))
            .is_ok()
        );
    }

    #[test]
    fn a_turns_calls_join_one_assistant_message_and_reasoning_is_left_out() {
        let items = [
            json!({"role": "user", "content": [{"type": "input_text", "text": "Refund order 1,"}, {"type": "input_text", "text": "op=a"}]}),
            json!({"type": "reasoning", "id": "rs_1", "summary": []}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]}),
            json!({"type": "function_call", "call_id": "c1", "name": "lookup_order", "arguments": "{}"}),
            json!({"type": "function_call", "call_id": "c2", "name": "lookup_order", "arguments": "{\"x\":1}"}),
            json!({"type": "function_call_output", "call_id": "c1", "output": "{\"amount\": 3}"}),
            json!({"type": "reasoning", "id": "rs_2", "summary": []}),
            json!({"type": "function_call", "call_id": "c3", "name": "create_refund", "arguments": "{}"}),
        ];
        let messages = chat_messages(Some("Be brief."), &items);
        assert_eq!(
            messages,
            [
                json!({"role": "system", "content": "Be brief."}),
                json!({"role": "user", "content": "Refund order 1,\nop=a"}),
                json!({"role": "assistant", "content": "Looking.", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}},
                    {"id": "c2", "type": "function", "function": {"name": "lookup_order", "arguments": "{\"x\":1}"}},
                ]}),
                json!({"role": "tool", "tool_call_id": "c1", "content": "{\"amount\": 3}"}),
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c3", "type": "function", "function": {"name": "create_refund", "arguments": "{}"}},
                ]}),
            ]
        );
    }

    #[test]
    fn two_assistant_messages_are_two_turns_as_in_chat() {
        let items = [
            json!({"role": "assistant", "content": "a"}),
            json!({"role": "assistant", "content": "b"}),
        ];
        assert_eq!(chat_messages(None, &items).len(), 2);
    }

    #[test]
    fn function_tools_are_flat() {
        let tools = json!([
            {"type": "function", "name": "lookup_order", "parameters": {}},
            {"type": "web_search"},
            {"type": "function", "name": "create_refund"},
        ]);
        assert_eq!(
            declared_functions(Some(&tools)).expect("valid"),
            Some(vec!["lookup_order", "create_refund"])
        );
        assert_eq!(declared_functions(None).expect("valid"), None);
        let nested = json!([{"type": "function", "function": {"name": "lookup_order"}}]);
        assert!(matches!(
            declared_functions(Some(&nested)),
            Err(ResponsesError::InvalidRequest { param: Some(p), .. }) if p == "tools[0].name"
        ));
        assert!(declared_functions(Some(&json!({}))).is_err());
    }
}
