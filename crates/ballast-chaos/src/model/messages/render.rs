//! The script's answer as Anthropic renders it: one content block in a `message` object, and the same answer as
//! the events of a stream.
//!
//! The stream's order is Anthropic's: `message_start` (the message with no content, `stop_reason` null and one
//! output token), a `ping`, then the block — `content_block_start` (empty text, or the `tool_use` with `input:
//! {}`), its `content_block_delta`s (`text_delta` a few words each, or `input_json_delta` the input's JSON a dozen
//! characters each, split as chat splits its chunks), `content_block_stop` — then `message_delta` (the
//! `stop_reason` and the output tokens) and `message_stop`. The deltas of the block concatenated are its text, or
//! its input's JSON; every answer has at least seven events, so a cut or a stall has room.

use serde_json::{Value, json};

use super::MessagesReply;
use crate::model::completion::{answer_chars, fragments, pieces, tokens, turn_hash};
use crate::model::script::{Answer, Turn};

/// What one message shares between its JSON and its stream.
pub(super) struct Meta<'a> {
    /// The request's model, echoed.
    pub(super) model: &'a str,
    /// Tokens of the conversation.
    pub(super) input_tokens: usize,
    /// The request's `max_tokens`.
    pub(super) max_tokens: u64,
}

/// The one content block of an answer, as produced (possibly cut by `max_tokens`).
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: &'static str,
        /// The input's JSON text (cut short: not JSON).
        json: String,
    },
}

impl Block {
    /// The block as the message's `content` holds it. A tool input cut short is not an object: `{}`.
    fn whole(&self) -> Value {
        match self {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::ToolUse { id, name, json } => {
                let input = serde_json::from_str::<Value>(json)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        }
    }

    /// The block as `content_block_start` carries it: nothing generated yet.
    fn started(&self) -> Value {
        match self {
            Block::Text(_) => json!({"type": "text", "text": ""}),
            Block::ToolUse { id, name, .. } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": {}})
            }
        }
    }

    /// The block's deltas.
    fn deltas(&self) -> Vec<Value> {
        match self {
            Block::Text(text) => pieces(text)
                .into_iter()
                .map(|text| json!({"type": "text_delta", "text": text}))
                .collect(),
            Block::ToolUse { json, .. } => fragments(json)
                .into_iter()
                .map(|partial| json!({"type": "input_json_delta", "partial_json": partial}))
                .collect(),
        }
    }
}

/// The tool-use id of a chat call id: `call_lookup_op-77` is `toolu_lookup_op-77` (stable per op and step).
fn tool_use_id(call_id: &str) -> String {
    format!("toolu_{}", call_id.strip_prefix("call_").unwrap_or(call_id))
}

/// `text`'s first `chars` characters.
fn first(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// The block of `answer`, its output tokens and its stop reason. Tokens are chat's completion tokens; over
/// `max_tokens`, the answer is cut at `max_tokens` x 4 characters (a call's name counted first, as in Responses)
/// and the stop reason is `max_tokens`.
fn produce(answer: &Answer, max_tokens: u64) -> (Block, usize, &'static str) {
    let wanted = answer_chars(answer);
    let over = tokens(wanted) as u64 > max_tokens;
    let budget = if over {
        usize::try_from(max_tokens.saturating_mul(4)).unwrap_or(usize::MAX)
    } else {
        usize::MAX
    };
    let (block, produced) = match answer {
        Answer::Text(text) => {
            let text = first(text, budget);
            let produced = text.chars().count();
            (Block::Text(text), produced)
        }
        Answer::Call { id, name, arguments } => {
            let json = first(arguments, budget.saturating_sub(name.chars().count()));
            let produced = (name.chars().count() + json.chars().count()).min(budget);
            let block = Block::ToolUse {
                id: tool_use_id(id),
                name,
                json,
            };
            (block, produced)
        }
    };
    let stop_reason = match answer {
        _ if over => "max_tokens",
        Answer::Text(_) => "end_turn",
        Answer::Call { .. } => "tool_use",
    };
    (block, tokens(produced), stop_reason)
}

/// The message and the stream of `turn`.
pub(super) fn render(turn: &Turn, meta: &Meta<'_>) -> MessagesReply {
    let (block, output_tokens, stop_reason) = produce(&turn.answer, meta.max_tokens);
    let message = |content: Value, stop_reason: Value, output_tokens: usize| {
        json!({
            "id": format!("msg_{}", turn_hash(&turn.key)),
            "type": "message",
            "role": "assistant",
            "model": meta.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {"input_tokens": meta.input_tokens, "output_tokens": output_tokens},
        })
    };
    let mut events = vec![
        json!({"type": "message_start", "message": message(json!([]), Value::Null, 1)}),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 0, "content_block": block.started()}),
    ];
    events.extend(
        block
            .deltas()
            .into_iter()
            .map(|delta| json!({"type": "content_block_delta", "index": 0, "delta": delta})),
    );
    events.extend([
        json!({"type": "content_block_stop", "index": 0}),
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens},
        }),
        json!({"type": "message_stop"}),
    ]);
    MessagesReply {
        message: message(json!([block.whole()]), json!(stop_reason), output_tokens),
        events,
    }
}

/// Whether `event` carries content: a `content_block_delta`. A stream error (`stream.error_after_chunks`) counts
/// these.
pub(super) fn is_content(event: &Value) -> bool {
    event.get("type").and_then(Value::as_str) == Some("content_block_delta")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Answer {
        Answer::Call {
            id: "call_lookup_a".into(),
            name: "lookup_order",
            arguments: r#"{"op":"a","order_id":"1"}"#.into(),
        }
    }

    #[test]
    fn a_call_fits_or_is_cut_name_first() {
        let (block, output, stop) = produce(&call(), 100);
        assert_eq!(
            block.whole(),
            json!({"type": "tool_use", "id": "toolu_lookup_a", "name": "lookup_order",
                   "input": {"op": "a", "order_id": "1"}})
        );
        // lookup_order (12) + 25 characters of arguments: 37 characters, 10 tokens, as chat counts them.
        assert_eq!((output, stop), (10, "tool_use"));
        let (cut, output, stop) = produce(&call(), 4);
        assert_eq!((output, stop), (4, "max_tokens"));
        let Block::ToolUse { json, .. } = &cut else {
            panic!("a tool use")
        };
        assert_eq!(json, r#"{"op"#);
        assert_eq!(cut.whole()["input"], json!({}), "a cut input is not an object");
    }

    #[test]
    fn a_text_is_cut_at_four_characters_a_token() {
        let text = Answer::Text("one two three four five six seven eight".into()); // 39 characters, 10 tokens
        assert_eq!(produce(&text, 10).2, "end_turn");
        let (block, output, stop) = produce(&text, 3);
        assert_eq!(block.whole()["text"], "one two thre");
        assert_eq!((output, stop), (3, "max_tokens"));
    }
}
