//! One answer in OpenAI's two wire shapes: a `chat.completion` object, and the `chat.completion.chunk` objects
//! of a stream, split the way OpenAI splits them.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::script::Answer;

/// The `created` of every answer: a fixed instant (2023-11-14T22:13:20Z), because the model reads no clock and
/// a replayed conversation must give byte-identical answers.
pub(super) const CREATED: u64 = 1_700_000_000;

/// The `system_fingerprint` of every answer.
pub(super) const SYSTEM_FINGERPRINT: &str = "fp_ballast_chaos";

/// Words per content chunk.
const WORDS_PER_CHUNK: usize = 3;

/// Characters per argument fragment.
const CHARS_PER_FRAGMENT: usize = 12;

/// Tokens for `chars` characters: four characters a token, rounded up.
pub(super) fn tokens(chars: usize) -> usize {
    chars.div_ceil(4)
}

/// 24 hex digits of the SHA-256 of a turn's key: the stable part of an answer's id, so that a replayed turn is
/// the same turn.
pub(super) fn turn_hash(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().take(12).map(|byte| format!("{byte:02x}")).collect()
}

/// The characters completion tokens are counted from: an answer's text, or its function's name and arguments.
pub(super) fn answer_chars(answer: &Answer) -> usize {
    match answer {
        Answer::Text(text) => text.chars().count(),
        Answer::Call { name, arguments, .. } => name.chars().count() + arguments.chars().count(),
    }
}

/// What every object of one answer shares.
#[derive(Clone, Debug)]
pub(super) struct Meta {
    /// `chatcmpl-` and a hash of the turn's key.
    pub(super) id: String,
    /// The request's model, echoed.
    pub(super) model: String,
    /// Tokens of the conversation.
    pub(super) prompt_tokens: usize,
}

impl Meta {
    /// The meta of the turn with `key`.
    pub(super) fn new(key: &str, model: &str, prompt_tokens: usize) -> Self {
        Meta {
            id: format!("chatcmpl-{}", turn_hash(key)),
            model: model.to_owned(),
            prompt_tokens,
        }
    }

    fn envelope(&self, object: &str) -> Map<String, Value> {
        let mut envelope = Map::new();
        envelope.insert("id".into(), json!(self.id));
        envelope.insert("object".into(), json!(object));
        envelope.insert("created".into(), json!(CREATED));
        envelope.insert("model".into(), json!(self.model));
        envelope.insert("system_fingerprint".into(), json!(SYSTEM_FINGERPRINT));
        envelope
    }

    /// `usage` of `answer`.
    fn usage(&self, answer: &Answer) -> Value {
        let completion_tokens = tokens(answer_chars(answer));
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        })
    }
}

fn finish_reason(answer: &Answer) -> &'static str {
    match answer {
        Answer::Text(_) => "stop",
        Answer::Call { .. } => "tool_calls",
    }
}

/// The `chat.completion` object of `answer`.
pub(super) fn completion(answer: &Answer, meta: &Meta) -> Value {
    let message = match answer {
        Answer::Text(text) => json!({"role": "assistant", "content": text, "refusal": null}),
        Answer::Call { id, name, arguments } => json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}],
            "refusal": null,
        }),
    };
    let mut object = meta.envelope("chat.completion");
    object.insert(
        "choices".into(),
        json!([{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(answer)}]),
    );
    object.insert("usage".into(), meta.usage(answer));
    Value::Object(object)
}

/// The `chat.completion.chunk` objects of `answer`, without the final `[DONE]`: a first chunk with the role (and,
/// for a call, the call's id, type and name with empty arguments), the content or the arguments in several
/// pieces, a chunk with the `finish_reason` and an empty delta, and — with `include_usage` — a last chunk with
/// empty `choices` and the `usage` (every other chunk then carries `"usage": null`, as OpenAI's do). Every answer
/// gives at least four chunks, so that stream faults have room.
pub(super) fn chunks(answer: &Answer, meta: &Meta, include_usage: bool) -> Vec<Value> {
    let deltas: Vec<Value> = match answer {
        Answer::Text(text) => std::iter::once(json!({"role": "assistant", "content": "", "refusal": null}))
            .chain(pieces(text).into_iter().map(|piece| json!({"content": piece})))
            .collect(),
        Answer::Call { id, name, arguments } => std::iter::once(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}],
            "refusal": null,
        }))
        .chain(
            fragments(arguments)
                .into_iter()
                .map(|fragment| json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]})),
        )
        .collect(),
    };
    let chunk = |delta: Value, finish_reason: Value| {
        let mut object = meta.envelope("chat.completion.chunk");
        object.insert(
            "choices".into(),
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]),
        );
        if include_usage {
            object.insert("usage".into(), Value::Null);
        }
        Value::Object(object)
    };
    let mut chunks: Vec<Value> = deltas
        .into_iter()
        .map(|delta| chunk(delta, Value::Null))
        .collect();
    chunks.push(chunk(json!({}), json!(finish_reason(answer))));
    if include_usage {
        let mut object = meta.envelope("chat.completion.chunk");
        object.insert("choices".into(), json!([]));
        object.insert("usage".into(), meta.usage(answer));
        chunks.push(Value::Object(object));
    }
    chunks
}

/// Whether a chunk carries content: text, or a piece of a call's arguments (the role chunk, the finish chunk and
/// the usage chunk carry none).
pub(super) fn is_content(chunk: &Value) -> bool {
    let Some(delta) = chunk.pointer("/choices/0/delta") else {
        return false;
    };
    let non_empty = |value: Option<&Value>| value.and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    non_empty(delta.get("content")) || non_empty(delta.pointer("/tool_calls/0/function/arguments"))
}

/// `text` in pieces of a few words, each piece keeping the spaces after its words; at least two pieces when the
/// text has two characters or more.
pub(super) fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    let pieces: Vec<String> = words
        .chunks(WORDS_PER_CHUNK)
        .map(|chunk| chunk.concat())
        .collect();
    if pieces.len() >= 2 {
        return pieces;
    }
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(chars.len().div_ceil(2).max(1))
        .map(|half| half.iter().collect())
        .collect()
}

/// `arguments` in fragments of a few characters (on character boundaries).
pub(super) fn fragments(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    let size = CHARS_PER_FRAGMENT.min(chars.len().div_ceil(2)).max(1);
    chars
        .chunks(size)
        .map(|fragment| fragment.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_keep_every_character_and_are_at_least_two() {
        for text in [
            "Done: the refund of order 1234 went through (op op-77).",
            "ab",
            "Hello!",
            "a b",
        ] {
            let pieces = pieces(text);
            assert!(pieces.len() >= 2, "{text:?} -> {pieces:?}");
            assert_eq!(pieces.concat(), text);
        }
        assert_eq!(pieces("one two three four"), ["one two three ", "four"]);
    }

    #[test]
    fn fragments_keep_every_character_and_respect_char_boundaries() {
        for arguments in [r#"{"amount":42.5,"op":"op-77","order_id":"1234"}"#, "{}", "é€😀x"] {
            let fragments = fragments(arguments);
            assert!(fragments.len() >= 2, "{arguments:?} -> {fragments:?}");
            assert_eq!(fragments.concat(), arguments);
        }
    }

    #[test]
    fn tokens_round_up() {
        assert_eq!([0, 1, 4, 5, 8].map(tokens), [0, 1, 1, 2, 2]);
    }

    #[test]
    fn ids_are_stable_per_key_and_differ_between_keys() {
        let a = Meta::new("op-1\u{0}lookup", "mock", 1).id;
        assert_eq!(a, Meta::new("op-1\u{0}lookup", "gpt-4.1", 9).id);
        assert_ne!(a, Meta::new("op-1\u{0}refund", "mock", 1).id);
        assert!(
            a.starts_with("chatcmpl-") && a.len() == "chatcmpl-".len() + 24,
            "{a}"
        );
    }
}
