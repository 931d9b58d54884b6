//! Reading a chat-completions request: minimal validation, the text of messages, the size of the conversation,
//! the declared tools and the tool replies since the newest user turn.
//!
//! Validation is deliberately minimal (the mock stands in for an upstream, not for OpenAI's validator): only what
//! the script needs to be well defined is checked, and fields it does not use are ignored.

use std::collections::HashMap;

use serde_json::Value;

use super::ModelError;

/// The roles OpenAI accepts, in the order its error message lists them.
const ROLES: [&str; 6] = ["system", "assistant", "user", "function", "tool", "developer"];

/// The messages of a valid request: `messages` is a non-empty array of objects with a known string `role`, and
/// `tools`, when present, is an array.
pub(super) fn validate(request: &Value) -> Result<&[Value], ModelError> {
    let invalid = |message: String| Err(ModelError::InvalidRequest(message));
    let Some(body) = request.as_object() else {
        return invalid(format!(
            "The request body must be a JSON object, but got {} instead.",
            kind(request)
        ));
    };
    let messages = match body.get("messages") {
        None | Some(Value::Null) => return invalid("Missing required parameter: 'messages'.".to_owned()),
        Some(Value::Array(messages)) if messages.is_empty() => {
            return invalid(
                "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array \
                 instead."
                    .to_owned(),
            );
        }
        Some(Value::Array(messages)) => messages,
        Some(other) => {
            return invalid(format!(
                "Invalid type for 'messages': expected an array of objects, but got {} instead.",
                kind(other)
            ));
        }
    };
    for (index, message) in messages.iter().enumerate() {
        validate_message(index, message)?;
    }
    match body.get("tools") {
        None | Some(Value::Null | Value::Array(_)) => Ok(messages),
        Some(other) => invalid(format!(
            "Invalid type for 'tools': expected an array of objects, but got {} instead.",
            kind(other)
        )),
    }
}

fn validate_message(index: usize, message: &Value) -> Result<(), ModelError> {
    let field = format!("messages[{index}]");
    let Some(message) = message.as_object() else {
        return Err(ModelError::InvalidRequest(format!(
            "Invalid type for '{field}': expected an object, but got {} instead.",
            kind(message)
        )));
    };
    let message = match message.get("role") {
        None | Some(Value::Null) => format!("Missing required parameter: '{field}.role'."),
        Some(Value::String(role)) if ROLES.contains(&role.as_str()) => return Ok(()),
        Some(Value::String(role)) => format!(
            "Invalid value for '{field}.role': '{role}'. Supported values are: 'system', 'assistant', 'user', \
             'function', 'tool', and 'developer'."
        ),
        Some(other) => format!(
            "Invalid type for '{field}.role': expected a string, but got {} instead.",
            kind(other)
        ),
    };
    Err(ModelError::InvalidRequest(message))
}

/// How OpenAI's messages name a JSON type ("expected a string, but got a number instead").
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The text pieces of a message's `content`: the string itself, or the `text` of each text part of an array
/// (image, audio and file parts carry no text).
fn text_parts(message: &Value) -> Vec<&str> {
    match message.get("content") {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// The text of a message's content, its parts joined by newlines.
pub(super) fn message_text(message: &Value) -> String {
    text_parts(message).join("\n")
}

/// The `function.arguments` strings of an assistant message's `tool_calls`.
fn tool_call_arguments(message: &Value) -> impl Iterator<Item = &str> {
    tool_calls(message).filter_map(|call| call.pointer("/function/arguments").and_then(Value::as_str))
}

fn tool_calls(message: &Value) -> impl Iterator<Item = &Value> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The size of a conversation in characters (Unicode scalar values): every message's text content plus every
/// tool call's arguments. This is what `context_limit_chars` limits and what prompt tokens are counted from.
pub(super) fn context_chars(messages: &[Value]) -> usize {
    messages
        .iter()
        .map(|message| {
            let text: usize = text_parts(message).iter().map(|t| t.chars().count()).sum();
            let arguments: usize = tool_call_arguments(message).map(|a| a.chars().count()).sum();
            text + arguments
        })
        .sum()
}

/// The index of the newest message with role `user`.
pub(super) fn newest_user_turn(messages: &[Value]) -> Option<usize> {
    messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("user"))
}

/// How many assistant messages `messages` holds: the turns the model has taken so far.
pub(super) fn assistant_turns(messages: &[Value]) -> usize {
    messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .count()
}

/// The names of the functions the request declares in `tools`; `None` when it declares no `tools` at all.
pub(super) fn declared_functions(request: &Value) -> Option<Vec<&str>> {
    let tools = request.get("tools")?.as_array()?;
    Some(
        tools
            .iter()
            .filter_map(|tool| tool.pointer("/function/name").and_then(Value::as_str))
            .collect(),
    )
}

/// The text of the newest tool reply in `turns` to a call of `function`. A reply is matched to its call through
/// `tool_call_id` and the assistant's `tool_calls` in `turns`; a reply whose call is not there is matched by its
/// own `name` field (the legacy shape).
pub(super) fn tool_reply(turns: &[Value], function: &str) -> Option<String> {
    let called: HashMap<&str, &str> = turns
        .iter()
        .flat_map(tool_calls)
        .filter_map(|call| {
            Some((
                call.get("id")?.as_str()?,
                call.pointer("/function/name")?.as_str()?,
            ))
        })
        .collect();
    turns
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .find(|reply| {
            let by_call = reply
                .get("tool_call_id")
                .and_then(Value::as_str)
                .and_then(|id| called.get(id));
            let name = by_call
                .copied()
                .or_else(|| reply.get("name").and_then(Value::as_str));
            name == Some(function)
        })
        .map(message_text)
}

#[cfg(test)]
mod tests;
