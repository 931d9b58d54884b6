//! Chat Completions (`POST /chat/completions`) as a protocol of the model pipeline ([`Chat`]): where its stream
//! commits (DESIGN.md, "Streaming": `commit`) and what each event after that means (`read_chat_event`); the
//! bodies are `types.rs`'.
//!
//! The transport reads a streamed 2xx event by event until the API's rule says one commits; until then the
//! stream is an attempt like any other, retried or moved to the next deployment when it fails.
//!
//! Chat completions: the first chunk that carries something for the caller commits — content, a tool call, a
//! refusal, reasoning, a `finish_reason`, anything Ballast does not know. The preamble is held back with the
//! status line: a chunk whose choices carry only the assistant's `role` (with empty `content`), or whose
//! `choices` is empty. A stream whose first event is `[DONE]` (no chunk at all) or is not a chunk (not JSON, no
//! `choices`: a proxy's page, a truncated event) failed before its commit point, retried like a reset.
//!
//! An error sent as an event before the commit point (`data: {"error": ...}` inside a 200 chat stream; the
//! Responses API's `event: error` and `response.failed`) is the attempt's error answer, with the status its code
//! stands for ([`status_of_error_event`]): the retry decision, the breaker and the route's fallback rule then read
//! it as any error answer — an insufficient quota moves to the next deployment and skips this one, a server error
//! is retried — and the caller never sees the failed deployment.

use ballast_config::Api;
use serde_json::Value;

use super::api::{Protocol, Read, Streamed, error_answer, set_stream};
use super::{
    CannotTruncate, ChatChunk, ChatRequest, ChatResponse, Truncation, TruncationGoal, truncate, usage,
};
use crate::body::{Commit, CommitRule};
use crate::sse::DONE;

/// Chat Completions: `POST /chat/completions`.
pub(crate) struct Chat;

impl Protocol for Chat {
    const API: Api = Api::Chat;
    const PATH: &'static str = "/chat/completions";
    type Request = ChatRequest;
    type Answer = ChatResponse;

    fn set_model(request: &mut ChatRequest, model: &str) {
        model.clone_into(&mut request.model);
    }

    fn truncate(request: &mut ChatRequest, goal: TruncationGoal) -> Result<Truncation, CannotTruncate> {
        truncate(&mut request.messages, goal)
    }
}

impl Streamed for Chat {
    type Event = ChatChunk;
    const COMMIT: CommitRule = commit;
    const READ: fn(&str) -> Read<ChatChunk> = read_chat_event;

    fn set_stream(request: &mut ChatRequest, stream: bool) {
        set_stream(&mut request.stream, &mut request.extra, stream);
    }
}

/// A chat stream's event after its commit point: a chunk (its `usage` counted), `[DONE]` (the clean end), an
/// error object, or something that is not a chunk.
fn read_chat_event(data: &str) -> Read<ChatChunk> {
    if data.trim() == DONE {
        return Read::End;
    }
    match read_chat(data) {
        ChatEvent::Chunk(chunk) => {
            let tokens = (chunk.usage.as_ref()).and_then(|u| serde_json::to_value(u).ok());
            let tokens = tokens.as_ref().and_then(usage::token_usage_of);
            Read::Item(chunk, tokens)
        }
        ChatEvent::Error(error) => Read::Upstream(error),
        ChatEvent::Neither { chunk, .. } => Read::Malformed(chunk.to_string()),
    }
}

/// What event `data` of a chat stream means before the commit point (module docs).
pub(super) fn commit(data: &str) -> Commit {
    if data.trim() == DONE {
        // No chunk at all: committing would give the caller an empty answer that ends as if it went well.
        return Commit::Fail("the stream ended ([DONE]) before its first chunk".into());
    }
    match read_chat(data) {
        ChatEvent::Chunk(chunk) if is_preamble(&chunk) => Commit::Hold,
        ChatEvent::Chunk(_) => Commit::Now,
        ChatEvent::Error(error) => error_answer(&error),
        ChatEvent::Neither {
            json: Some(error), ..
        } => Commit::Fail(format!("the stream's first event is not JSON ({error}): {data}")),
        // Not a chunk: nothing the caller could be handed yet, so no commit — retried like a reset.
        ChatEvent::Neither { chunk, json: None } => Commit::Fail(format!(
            "the stream's first event is not a chunk ({chunk}): {data}"
        )),
    }
}

/// A chat stream event's data, read once: a chunk, the error object sent instead of one (an `error` that is not
/// `null` wins over a chunk's fields), or neither.
pub(super) enum ChatEvent {
    Chunk(ChatChunk),
    Error(Value),
    /// Why it is not a chunk, and why it is not JSON when it is not.
    Neither {
        chunk: serde_json::Error,
        json: Option<serde_json::Error>,
    },
}

/// Reads `data` as a chunk, the common case, in one parse; only what is not a chunk is parsed again, as any JSON,
/// to find an error object in it.
pub(super) fn read_chat(data: &str) -> ChatEvent {
    let error_in = |error: Option<&Value>| error.filter(|e| !e.is_null()).cloned();
    let chunk_error = match serde_json::from_str::<ChatChunk>(data) {
        Ok(chunk) => {
            return match error_in(chunk.extra.get("error")) {
                Some(error) => ChatEvent::Error(error),
                None => ChatEvent::Chunk(chunk),
            };
        }
        Err(error) => error,
    };
    match serde_json::from_str::<Value>(data) {
        Ok(value) => match error_in(value.get("error")) {
            Some(error) => ChatEvent::Error(error),
            None => ChatEvent::Neither {
                chunk: chunk_error,
                json: None,
            },
        },
        Err(json) => ChatEvent::Neither {
            chunk: chunk_error,
            json: Some(json),
        },
    }
}

/// Whether a chat chunk carries nothing for the caller: no choices (and no usage), or choices whose delta holds
/// only the `role` and an empty `content` (OpenAI's first chunk), with no `finish_reason`.
fn is_preamble(chunk: &ChatChunk) -> bool {
    if chunk.usage.is_some() {
        return false;
    }
    chunk.choices.iter().all(|choice| {
        let finished = choice.finish_reason.is_some();
        let delta_is_bare = match choice.extra.get("delta") {
            None | Some(Value::Null) => true,
            Some(Value::Object(delta)) => delta.iter().all(|(key, value)| match key.as_str() {
                "role" => true,
                "content" | "refusal" => value.is_null() || value.as_str() == Some(""),
                "tool_calls" => value.is_null() || value.as_array().is_some_and(Vec::is_empty),
                _ => value.is_null(),
            }),
            Some(_) => false,
        };
        !finished && delta_is_bare
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_chunk_with_content_commits() {
        for chunk in [
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"thinking"}}]}"#,
            r#"{"choices":[],"usage":{"total_tokens":3}}"#,
        ] {
            assert_eq!(commit(chunk), Commit::Now, "{chunk}");
        }
    }

    /// DESIGN.md, "Streaming": an empty first chunk with only the role carries nothing, so an error the provider
    /// sends after it still falls back.
    #[test]
    fn a_chunk_with_only_the_role_or_no_choices_is_held_back() {
        for chunk in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null}}]}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":[],"usage":null}"#,
        ] {
            assert_eq!(commit(chunk), Commit::Hold, "{chunk}");
        }
    }

    /// A stream that says `[DONE]` before any chunk has no answer in it: committing it would hand the caller an
    /// empty answer that ends as if it went well. It fails before the commit point, so it is retried.
    #[test]
    fn a_stream_done_before_its_first_chunk_is_a_failed_attempt_not_a_commit() {
        assert!(matches!(commit("[DONE]"), Commit::Fail(_)));
    }

    /// Regression: a first event that is not a chunk (a proxy's text, JSON without `choices`) was committed, so
    /// the stream failed at once as `Malformed` with no retry and no fallback — although nothing had reached the
    /// caller yet. It is a failed attempt before the commit point, retried like a reset.
    #[test]
    fn a_first_event_that_is_not_a_chunk_is_a_failed_attempt_not_a_commit() {
        for first in [
            "upstream busy, try later",
            r#"{"object": "chat.completion.chunk"}"#,
        ] {
            assert!(matches!(commit(first), Commit::Fail(_)), "{first}");
        }
    }

    /// An event read once as a chunk still tells an error object apart: a non-null `error` wins over any chunk
    /// fields beside it, a `null` one is a chunk's own field (passed through), and what is neither says why.
    #[test]
    fn an_event_is_a_chunk_an_error_or_neither() {
        let error = r#"{"error":{"code":"insufficient_quota"},"choices":[]}"#;
        assert!(matches!(read_chat(error), ChatEvent::Error(e) if e["code"] == "insufficient_quota"));
        assert!(matches!(commit(error), Commit::Error { .. }));
        let bare_error = r#"{"error":{"code":"server_error"}}"#;
        assert!(matches!(read_chat(bare_error), ChatEvent::Error(e) if e["code"] == "server_error"));
        let ChatEvent::Chunk(chunk) = read_chat(r#"{"choices":[],"error":null}"#) else {
            panic!("a chunk with a null error is a chunk");
        };
        assert_eq!(chunk.extra["error"], Value::Null);
        assert!(matches!(
            read_chat("busy"),
            ChatEvent::Neither { json: Some(_), .. }
        ));
        assert!(matches!(
            read_chat(r#"{"object":"chat.completion.chunk"}"#),
            ChatEvent::Neither { json: None, .. }
        ));
    }

    #[test]
    fn an_error_event_before_the_commit_point_is_an_error_answer_with_the_status_of_its_code() {
        let cases = [
            (
                r#"{"error":{"code":"insufficient_quota","message":"quota"}}"#,
                429,
            ),
            (r#"{"error":{"code":"rate_limit_exceeded"}}"#, 429),
            (r#"{"error":{"code":"context_length_exceeded"}}"#, 400),
            // Overload, as Anthropic says it (529): not a failure the breaker counts.
            (r#"{"error":{"type":"overloaded_error"}}"#, 529),
            (r#"{"error":{"message":"something broke"}}"#, 502),
            (
                r#"{"error":{"type":"invalid_request_error","code":"invalid_prompt","message":"flagged"}}"#,
                400,
            ),
        ];
        for (event, status) in cases {
            let Commit::Error { status: got, body } = commit(event) else {
                panic!("{event}: not an error answer")
            };
            assert_eq!(got.as_u16(), status, "{event}");
            let body: Value = serde_json::from_slice(&body).unwrap();
            let sent: Value = serde_json::from_str(event).unwrap();
            assert_eq!(body, sent, "the error in OpenAI's envelope");
        }
    }
}
