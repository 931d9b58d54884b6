//! Reading a Messages request: the checks the script needs, in Anthropic's wording (`messages.0.role: Input
//! should be 'user' or 'assistant'`), and the chat conversation the request stands for.
//!
//! # The translation
//! - `system` (a string or text blocks) is a first system message;
//! - a user message is a user message — its string, or its text blocks as text parts — unless every block of it is
//!   a `tool_result`: then it is only the turn's continuation, as chat's `tool` messages are. Each `tool_result` is
//!   a `tool` message (`tool_call_id` its `tool_use_id`, content its string or the text of its blocks), placed
//!   before the user message its other blocks make;
//! - an assistant message is one assistant message: its text as content, each `tool_use` as a tool call (`id`,
//!   `name`, `arguments` its `input` as compact JSON). So N assistant messages are N turns, as in chat.
//!
//! Other block types (`image`, `document`, `thinking`, ...) are accepted and carry no text; other request fields
//! are ignored, never refused.

use serde_json::{Map, Value, json};

use super::MessagesError;
use crate::model::conversation::kind;

/// The request as the script reads it.
#[derive(Clone, Debug)]
pub(super) struct Read<'a> {
    /// The chat conversation it stands for.
    pub(super) chat: Vec<Value>,
    /// `tools[].name`; `None` without `tools`.
    pub(super) declared: Option<Vec<&'a str>>,
}

/// An invalid request naming `path`, in Anthropic's form `path: problem`.
fn invalid(path: &str, problem: &str) -> MessagesError {
    MessagesError::InvalidRequest(format!("{path}: {problem}"))
}

fn wrong_type(path: &str, expected: &str, got: &Value) -> MessagesError {
    invalid(path, &format!("Input should be {expected}, not {}", kind(got)))
}

/// Reads `body`'s `system`, `messages` and `tools`.
pub(super) fn read(body: &Map<String, Value>) -> Result<Read<'_>, MessagesError> {
    let mut chat = Vec::new();
    if let Some(system) = body.get("system").filter(|s| !s.is_null()) {
        chat.push(json!({"role": "system", "content": text_content("system", system)?}));
    }
    let messages = match body.get("messages") {
        None | Some(Value::Null) => return Err(invalid("messages", "Field required")),
        Some(Value::Array(messages)) => messages,
        Some(other) => return Err(wrong_type("messages", "a valid list", other)),
    };
    if messages.is_empty() {
        return Err(invalid("messages", "at least one message is required"));
    }
    for (index, message) in messages.iter().enumerate() {
        translate(&format!("messages.{index}"), message, &mut chat)?;
    }
    Ok(Read {
        chat,
        declared: declared(body.get("tools"))?,
    })
}

/// A `system` value or a block's `content`: a string, or text blocks (other blocks carry no text), as chat content
/// (a string, or text parts).
fn text_content(path: &str, value: &Value) -> Result<Value, MessagesError> {
    match value {
        Value::String(_) => Ok(value.clone()),
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (index, block) in blocks.iter().enumerate() {
                if block_type(&format!("{path}.{index}"), block)? == "text" {
                    parts.push(text_part(&format!("{path}.{index}"), block)?);
                }
            }
            Ok(Value::Array(parts))
        }
        other => Err(wrong_type(path, "a valid string or a valid list", other)),
    }
}

/// A block's `type`.
fn block_type<'a>(path: &str, block: &'a Value) -> Result<&'a str, MessagesError> {
    let Some(block) = block.as_object() else {
        return Err(wrong_type(path, "a valid dictionary", block));
    };
    match block.get("type") {
        Some(Value::String(kind)) => Ok(kind),
        None | Some(Value::Null) => Err(invalid(&format!("{path}.type"), "Field required")),
        Some(other) => Err(wrong_type(&format!("{path}.type"), "a valid string", other)),
    }
}

/// A text block as a chat text part.
fn text_part(path: &str, block: &Value) -> Result<Value, MessagesError> {
    let text = required_string(path, block, "text")?;
    Ok(json!({"type": "text", "text": text}))
}

fn required_string<'a>(path: &str, block: &'a Value, key: &str) -> Result<&'a str, MessagesError> {
    match block.get(key) {
        Some(Value::String(text)) => Ok(text),
        None | Some(Value::Null) => Err(invalid(&format!("{path}.{key}"), "Field required")),
        Some(other) => Err(wrong_type(&format!("{path}.{key}"), "a valid string", other)),
    }
}

/// Pushes the chat messages `message` (at `path`) stands for.
fn translate(path: &str, message: &Value, chat: &mut Vec<Value>) -> Result<(), MessagesError> {
    if !message.is_object() {
        return Err(wrong_type(path, "a valid dictionary", message));
    }
    let role = match message.get("role") {
        Some(Value::String(role)) if role == "user" || role == "assistant" => role.as_str(),
        None | Some(Value::Null) => return Err(invalid(&format!("{path}.role"), "Field required")),
        Some(_) => {
            return Err(invalid(
                &format!("{path}.role"),
                "Input should be 'user' or 'assistant'",
            ));
        }
    };
    let at = format!("{path}.content");
    let blocks = match message.get("content") {
        Some(Value::String(text)) => {
            chat.push(json!({"role": role, "content": text}));
            return Ok(());
        }
        Some(Value::Array(blocks)) => blocks,
        None | Some(Value::Null) => return Err(invalid(&at, "Field required")),
        Some(other) => return Err(wrong_type(&at, "a valid string or a valid list", other)),
    };
    if role == "assistant" {
        chat.push(assistant(&at, blocks)?);
        return Ok(());
    }
    let mut parts = Vec::new();
    let mut results = 0;
    for (index, block) in blocks.iter().enumerate() {
        let at = format!("{at}.{index}");
        match block_type(&at, block)? {
            "tool_result" => {
                results += 1;
                let id = required_string(&at, block, "tool_use_id")?;
                let content = match block.get("content") {
                    None | Some(Value::Null) => Value::String(String::new()),
                    Some(content) => text_content(&format!("{at}.content"), content)?,
                };
                chat.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            "text" => parts.push(text_part(&at, block)?),
            _ => {}
        }
    }
    // Only tool results: the turn goes on. Anything else (text, an image, nothing at all) is a user turn.
    if results == 0 || results < blocks.len() {
        chat.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}

/// An assistant message's blocks as one chat assistant message: its text parts, its `tool_use` blocks as calls.
fn assistant(path: &str, blocks: &[Value]) -> Result<Value, MessagesError> {
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let at = format!("{path}.{index}");
        match block_type(&at, block)? {
            "text" => parts.push(text_part(&at, block)?),
            "tool_use" => {
                let id = required_string(&at, block, "id")?;
                let name = required_string(&at, block, "name")?;
                let input = match block.get("input") {
                    Some(input @ Value::Object(_)) => input,
                    None | Some(Value::Null) => {
                        return Err(invalid(&format!("{at}.input"), "Field required"));
                    }
                    Some(other) => {
                        return Err(wrong_type(&format!("{at}.input"), "a valid dictionary", other));
                    }
                };
                calls.push(json!({
                    "id": id,
                    "type": "function",
                    "function": {"name": name, "arguments": input.to_string()},
                }));
            }
            _ => {}
        }
    }
    let mut message = json!({"role": "assistant", "content": parts});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    Ok(message)
}

/// The names of the declared tools; `None` without `tools`.
fn declared(tools: Option<&Value>) -> Result<Option<Vec<&str>>, MessagesError> {
    let tools = match tools {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(tools)) => tools,
        Some(other) => return Err(wrong_type("tools", "a valid list", other)),
    };
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| required_string(&format!("tools.{index}"), tool, "name"))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat_of(request: Value) -> Vec<Value> {
        read(request.as_object().expect("an object")).expect("valid").chat
    }

    fn refused(request: Value) -> String {
        match read(request.as_object().expect("an object")) {
            Err(MessagesError::InvalidRequest(message)) => message,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_conversation_is_the_chat_conversation_it_stands_for() {
        let chat = chat_of(json!({
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": "Refund order 5, op=a"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {"op": "a", "order_id": "5"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "{}"}]},
                ]},
            ],
        }));
        assert_eq!(
            chat,
            [
                json!({"role": "system", "content": [{"type": "text", "text": "Be brief."}]}),
                json!({"role": "user", "content": "Refund order 5, op=a"}),
                json!({"role": "assistant", "content": [{"type": "text", "text": "Looking."}], "tool_calls": [
                    {"id": "toolu_1", "type": "function",
                     "function": {"name": "lookup_order", "arguments": r#"{"op":"a","order_id":"5"}"#}}]}),
                json!({"role": "tool", "tool_call_id": "toolu_1", "content": [{"type": "text", "text": "{}"}]}),
            ]
        );
    }

    #[test]
    fn text_beside_tool_results_is_a_new_user_turn_after_them() {
        let chat = chat_of(json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "ok"},
            {"type": "text", "text": "Now pay order 6, op=b"},
        ]}]}));
        let roles: Vec<&str> = chat.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["tool", "user"]);
        // An image alone is a user turn too (with no text).
        let chat =
            chat_of(json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}));
        assert_eq!(chat, [json!({"role": "user", "content": []})]);
    }

    #[test]
    fn refusals_name_the_field_as_anthropic_does() {
        assert_eq!(refused(json!({})), "messages: Field required");
        assert_eq!(
            refused(json!({"messages": []})),
            "messages: at least one message is required"
        );
        assert_eq!(
            refused(json!({"messages": [{"role": "system", "content": "x"}]})),
            "messages.0.role: Input should be 'user' or 'assistant'"
        );
        assert_eq!(
            refused(json!({"messages": [{"role": "user"}]})),
            "messages.0.content: Field required"
        );
        assert_eq!(
            refused(json!({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})),
            "messages.0.content.0.tool_use_id: Field required"
        );
        assert_eq!(
            refused(json!({"messages": [{"role": "assistant", "content": [
                {"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}]})),
            "messages.0.content.0.input: Input should be a valid dictionary, not a string"
        );
        assert_eq!(
            refused(json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"description": "d"}]})),
            "tools.0.name: Field required"
        );
        assert_eq!(
            refused(json!({"system": 5, "messages": [{"role": "user", "content": "x"}]})),
            "system: Input should be a valid string or a valid list, not a number"
        );
    }

    #[test]
    fn declared_tools_are_their_names() {
        let body = json!({"messages": [{"role": "user", "content": "x"}],
                          "tools": [{"name": "lookup_order", "input_schema": {}}]});
        let read = read(body.as_object().expect("object")).expect("valid");
        assert_eq!(read.declared, Some(vec!["lookup_order"]));
    }
}
