//! A conversation as each model API carries it from turn to turn: Chat Completions resends the history; the
//! Responses API continues the last response (`previous_response_id`) with the new `function_call_output` items
//! only, as README's quick start does.

use bytes::Bytes;
use serde_json::{Value, json};

use super::scenario::Conversation;
use super::with_ballast::ROUTE as MODEL;

/// The tools the agents declare to the model.
const TOOLS: [&str; 3] = ["lookup_order", "create_refund", "process_payment"];

/// A tool call the model asked for.
pub(super) struct ToolCall {
    /// Chat's `id`, or the Responses item's `call_id`.
    pub(super) id: String,
    pub(super) name: String,
    /// The arguments, a JSON text as the model wrote them.
    pub(super) arguments: String,
}

/// The conversation as its API carries it from turn to turn.
pub(super) enum Turns {
    /// Chat Completions: the whole history, resent each turn.
    Chat { messages: Vec<Value> },
    /// The Responses API: the last response's id and the new input items.
    Responses { previous: Option<String>, input: Value },
}

impl Turns {
    pub(super) fn new(responses: bool, conversation: &Conversation) -> Turns {
        let user = conversation.user_turn();
        if responses {
            Turns::Responses {
                previous: None,
                input: Value::String(user),
            }
        } else {
            Turns::Chat {
                messages: vec![json!({"role": "user", "content": user})],
            }
        }
    }

    pub(super) fn path(&self) -> &'static str {
        match self {
            Turns::Chat { .. } => "/chat/completions",
            Turns::Responses { .. } => "/responses",
        }
    }

    /// This turn's request body.
    pub(super) fn request(&self) -> Bytes {
        let body = match self {
            Turns::Chat { messages } => {
                let tools: Vec<Value> = TOOLS
                    .iter()
                    .map(|name| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}))
                    .collect();
                json!({"model": MODEL, "messages": messages, "tools": tools})
            }
            Turns::Responses { previous, input } => {
                let tools: Vec<Value> = TOOLS
                    .iter()
                    .map(|name| json!({"type": "function", "name": name, "parameters": {"type": "object"}}))
                    .collect();
                let mut body = json!({"model": MODEL, "input": input, "tools": tools});
                if let Some(previous) = previous {
                    body["previous_response_id"] = json!(previous);
                }
                body
            }
        };
        Bytes::from(body.to_string())
    }

    /// The model's answer read: the tool calls it asks for (none: it answered). A failure's code when the answer
    /// is not the API's.
    pub(super) fn read(&mut self, answer: &[u8]) -> Result<Vec<ToolCall>, &'static str> {
        let answer: Value = serde_json::from_slice(answer).map_err(|_| "bad_answer")?;
        let text = |value: &Value| value.as_str().map(str::to_owned);
        match self {
            Turns::Chat { messages } => {
                let message = answer["choices"][0]["message"].clone();
                if !message.is_object() {
                    return Err("no_message");
                }
                let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
                messages.push(message);
                Ok(calls
                    .iter()
                    .filter_map(|call| {
                        Some(ToolCall {
                            id: text(&call["id"])?,
                            name: text(&call["function"]["name"])?,
                            arguments: text(&call["function"]["arguments"])?,
                        })
                    })
                    .collect())
            }
            Turns::Responses { previous, .. } => {
                *previous = Some(text(&answer["id"]).ok_or("no_response_id")?);
                let output = answer["output"].as_array().ok_or("no_output")?;
                Ok(output
                    .iter()
                    .filter(|item| item["type"] == "function_call")
                    .filter_map(|item| {
                        Some(ToolCall {
                            id: text(&item["call_id"])?,
                            name: text(&item["name"])?,
                            arguments: text(&item["arguments"])?,
                        })
                    })
                    .collect())
            }
        }
    }

    /// The tools' outputs, by call id, for the next turn.
    pub(super) fn answer(&mut self, outputs: Vec<(String, String)>) {
        match self {
            Turns::Chat { messages } => messages.extend(
                outputs
                    .into_iter()
                    .map(|(id, output)| json!({"role": "tool", "tool_call_id": id, "content": output})),
            ),
            Turns::Responses { input, .. } => {
                *input = outputs
                    .into_iter()
                    .map(|(id, output)| json!({"type": "function_call_output", "call_id": id, "output": output}))
                    .collect();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_responses_conversation_continues_its_last_response_with_the_outputs_only() {
        let conversation = Conversation::new(1, 0, Duration::from_secs(30));
        let mut turns = Turns::new(true, &conversation);
        let first: Value = serde_json::from_slice(&turns.request()).unwrap();
        assert_eq!(first["input"], "Refund order 1000, op=fs-1-0");
        assert!(first.get("previous_response_id").is_none());
        let answer = json!({"id": "resp_1", "output": [
            {"type": "function_call", "call_id": "call_lookup_fs-1-0", "name": "lookup_order", "arguments": "{}"}
        ]});
        let calls = turns.read(answer.to_string().as_bytes()).unwrap();
        assert_eq!(calls[0].name, "lookup_order");
        turns.answer(vec![(calls[0].id.clone(), "{\"ok\":true}".into())]);
        let second: Value = serde_json::from_slice(&turns.request()).unwrap();
        assert_eq!(second["previous_response_id"], "resp_1");
        assert_eq!(second["input"][0]["type"], "function_call_output");
        assert_eq!(second["input"][0]["call_id"], "call_lookup_fs-1-0");
    }

    #[test]
    fn a_chat_conversation_resends_its_history() {
        let conversation = Conversation::new(1, 1, Duration::from_secs(30));
        let mut turns = Turns::new(false, &conversation);
        let answer = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}
        ]}}]});
        let calls = turns.read(answer.to_string().as_bytes()).unwrap();
        turns.answer(vec![(calls[0].id.clone(), "{}".into())]);
        let second: Value = serde_json::from_slice(&turns.request()).unwrap();
        let roles: Vec<&str> = second["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["role"].as_str())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool"]);
        assert_eq!(turns.read(b"not json").err(), Some("bad_answer"));
    }
}
