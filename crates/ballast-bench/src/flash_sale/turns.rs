//! A conversation as each model API carries it from turn to turn: Chat Completions resends the history; the
//! Responses API continues the last response (`previous_response_id`) with the new `function_call_output` items
//! only, as README's quick start does; Anthropic's Messages API resends the history too, in its own blocks — each
//! assistant turn the answer's `content` as it came (its `tool_use` blocks), the tools' outputs one user message of
//! `tool_result` blocks, as Anthropic's tool-use guide has an agent do.

use bytes::Bytes;
use serde_json::{Value, json};

use super::scenario::Conversation;
use super::with_ballast::ROUTE as MODEL;

/// The tools the agents declare to the model.
pub(super) const TOOLS: [&str; 3] = ["lookup_order", "create_refund", "process_payment"];
/// The Messages API's `max_tokens` (required by it): room for any answer of the scripted model.
const MAX_TOKENS: u32 = 1024;

/// The API one agent's model calls use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wire {
    /// Chat Completions.
    Chat,
    /// OpenAI's Responses API.
    Responses,
    /// Anthropic's Messages API.
    Messages,
}

/// A tool call the model asked for.
pub(super) struct ToolCall {
    /// Chat's `id`, the Responses item's `call_id`, or the `tool_use` block's `id`.
    pub(super) id: String,
    pub(super) name: String,
    /// The arguments, a JSON text as the model wrote them (a `tool_use` block's `input` object, written out).
    pub(super) arguments: String,
}

/// The conversation as its API carries it from turn to turn.
pub(super) enum Turns {
    /// Chat Completions: the whole history, resent each turn.
    Chat { messages: Vec<Value> },
    /// The Responses API: the last response's id and the new input items.
    Responses { previous: Option<String>, input: Value },
    /// The Messages API: the whole history, resent each turn.
    Messages { messages: Vec<Value> },
}

impl Turns {
    pub(super) fn new(wire: Wire, conversation: &Conversation) -> Turns {
        let user = conversation.user_turn();
        match wire {
            Wire::Chat => Turns::Chat {
                messages: vec![json!({"role": "user", "content": user})],
            },
            Wire::Responses => Turns::Responses {
                previous: None,
                input: Value::String(user),
            },
            Wire::Messages => Turns::Messages {
                messages: vec![json!({"role": "user", "content": user})],
            },
        }
    }

    /// The API it speaks.
    pub(super) fn wire(&self) -> Wire {
        match self {
            Turns::Chat { .. } => Wire::Chat,
            Turns::Responses { .. } => Wire::Responses,
            Turns::Messages { .. } => Wire::Messages,
        }
    }

    pub(super) fn path(&self) -> &'static str {
        match self {
            Turns::Chat { .. } => "/chat/completions",
            Turns::Responses { .. } => "/responses",
            Turns::Messages { .. } => "/messages",
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
            Turns::Messages { messages } => {
                let tools: Vec<Value> = TOOLS
                    .iter()
                    .map(|name| json!({"name": name, "input_schema": {"type": "object"}}))
                    .collect();
                json!({"model": MODEL, "max_tokens": MAX_TOKENS, "messages": messages, "tools": tools})
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
            Turns::Messages { messages } => {
                let content = answer["content"].as_array().ok_or("no_content")?.clone();
                let calls = content
                    .iter()
                    .filter(|block| block["type"] == "tool_use")
                    .filter_map(|block| {
                        Some(ToolCall {
                            id: text(&block["id"])?,
                            name: text(&block["name"])?,
                            arguments: block["input"]
                                .as_object()
                                .map(|input| Value::Object(input.clone()).to_string())?,
                        })
                    })
                    .collect();
                messages.push(json!({"role": "assistant", "content": content}));
                Ok(calls)
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
            Turns::Messages { messages } => {
                let results: Vec<Value> = outputs
                    .into_iter()
                    .map(|(id, output)| json!({"type": "tool_result", "tool_use_id": id, "content": output}))
                    .collect();
                messages.push(json!({"role": "user", "content": results}));
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
        let mut turns = Turns::new(Wire::Responses, &conversation);
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
        let mut turns = Turns::new(Wire::Chat, &conversation);
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

    #[test]
    fn a_messages_conversation_resends_its_history_with_the_answers_blocks_and_tool_results() {
        let conversation = Conversation::new(1, 0, Duration::from_secs(30));
        let mut turns = Turns::new(Wire::Messages, &conversation);
        assert_eq!(turns.path(), "/messages");
        let first: Value = serde_json::from_slice(&turns.request()).unwrap();
        assert_eq!(
            first["messages"],
            json!([{"role": "user", "content": "Refund order 1000, op=fs-1-0"}])
        );
        assert_eq!(first["max_tokens"], MAX_TOKENS, "the Messages API requires it");
        assert_eq!(
            first["tools"][0],
            json!({"name": "lookup_order", "input_schema": {"type": "object"}})
        );
        let content = json!([
            {"type": "text", "text": "Looking it up."},
            {"type": "tool_use", "id": "toolu_lookup_fs-1-0", "name": "lookup_order",
             "input": {"op": "fs-1-0", "order_id": "1000"}}
        ]);
        let answer = json!({"id": "msg_1", "type": "message", "role": "assistant", "content": content,
                            "stop_reason": "tool_use"});
        let calls = turns.read(answer.to_string().as_bytes()).unwrap();
        assert_eq!(calls.len(), 1, "the text block is no call");
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("toolu_lookup_fs-1-0", "lookup_order")
        );
        // The input object is the call's arguments, as the JSON text a tool call sends.
        let arguments: Value = serde_json::from_str(&calls[0].arguments).unwrap();
        assert_eq!(arguments, json!({"op": "fs-1-0", "order_id": "1000"}));
        turns.answer(vec![(calls[0].id.clone(), "{\"ok\":true}".into())]);
        let second: Value = serde_json::from_slice(&turns.request()).unwrap();
        assert_eq!(
            second["messages"],
            json!([
                {"role": "user", "content": "Refund order 1000, op=fs-1-0"},
                {"role": "assistant", "content": content},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_lookup_fs-1-0", "content": "{\"ok\":true}"}
                ]}
            ])
        );
        let last =
            json!({"id": "msg_2", "type": "message", "content": [{"type": "text", "text": "Refunded."}]});
        assert!(
            turns.read(last.to_string().as_bytes()).unwrap().is_empty(),
            "it answered"
        );
        assert_eq!(turns.read(b"{\"type\": \"message\"}").err(), Some("no_content"));
    }

    #[test]
    fn a_tool_use_whose_input_is_not_an_object_is_no_call() {
        let conversation = Conversation::new(1, 0, Duration::from_secs(30));
        let mut turns = Turns::new(Wire::Messages, &conversation);
        let answer = json!({"content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": "{}"}]});
        assert!(turns.read(answer.to_string().as_bytes()).unwrap().is_empty());
    }
}
