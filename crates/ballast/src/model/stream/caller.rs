//! The caller's side of a stream as server-sent events, each API's own way (what the gateway sends):
//! - chat: each chunk as `data: <json>` (its data as the upstream sent it), then `data: [DONE]` — or, after a failure, OpenAI's error envelope
//!   (`data: {"error": {...}}`) as the last event and no `[DONE]`;
//! - Responses: each event as `event: <type>` and `data: <json>`, as the upstream sent it — or, after a failure,
//!   an `event: error` numbered after the last event, whose data carries the error's fields (`code`, `message`,
//!   `param`) and an `error` object with them (the Python SDK raises on the object, the Node SDK on the event),
//!   and nothing after it;
//! - Messages: each event as `event: <type>` and `data: <json>`, as the upstream sent it (`ping` included) — or,
//!   after a failure, Anthropic's own `event: error` (`{"type": "error", "error": {"type", "message"}}`: the
//!   upstream's error type when it sent one, `overloaded_error` say; `timeout_error` for the deadline;
//!   `api_error` otherwise, with Ballast's stable code beside it in `code`) and nothing after it — never
//!   `message_stop`, so both Anthropic SDKs raise.
//!
//! All pass the upstream's keep-alives on as `: keep-alive` comments: a caller whose read timeout bounds the
//! gaps (the Python SDK's) hears that the stream is alive while the model thinks.

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use serde_json::{Value, json};

use super::{ModelStream, Piece};
use crate::model::ChatChunk;
use crate::model::messages::MessagesEvent;
use crate::model::responses::ResponseEvent;
use crate::sse;

impl ModelStream<ChatChunk> {
    /// The same stream without the chunk that carries only the token usage (no choices), which the caller did not
    /// ask for: it was asked for to count the tokens, and it is counted before it is dropped.
    pub(in crate::model) fn without_usage_chunk(mut self) -> Self {
        self.items = Box::pin(self.items.filter(|item| {
            let usage_only =
                matches!(item, Ok(Piece::Event(chunk, _)) if chunk.choices.is_empty() && chunk.usage.is_some());
            std::future::ready(!usage_only)
        }));
        self
    }

    /// The caller's side of the stream as server-sent events (module docs).
    pub fn into_sse(self) -> impl Stream<Item = Bytes> + Send {
        futures::stream::unfold((self.items, false), |(mut items, ended)| async move {
            if ended {
                return None;
            }
            match items.next().await {
                Some(Ok(Piece::Event(_, data))) => Some((sse::data_as_sent(&data), (items, false))),
                Some(Ok(Piece::KeepAlive)) => Some((sse::keep_alive(), (items, false))),
                Some(Err(error)) => {
                    let event = sse::error_event(&error.to_string(), "upstream_error", error.code().as_str());
                    Some((event, (items, true)))
                }
                None => Some((sse::done_event(), (items, true))),
            }
        })
    }
}

impl ModelStream<ResponseEvent> {
    /// The caller's side of the stream as server-sent events (module docs).
    pub fn into_sse(self) -> impl Stream<Item = Bytes> + Send {
        futures::stream::unfold((self.items, false, None), |(mut items, ended, last)| async move {
            if ended {
                return None;
            }
            match items.next().await {
                Some(Ok(Piece::Event(event, data))) => {
                    let sequence = event.sequence_number().or(last);
                    let kind = event.0.get("type").and_then(Value::as_str).unwrap_or("message");
                    Some((sse::named_as_sent(kind, &data), (items, false, sequence)))
                }
                Some(Ok(Piece::KeepAlive)) => Some((sse::keep_alive(), (items, false, last))),
                Some(Err(error)) => {
                    let code = error.code().as_str();
                    let message = error.to_string();
                    let data = json!({
                        "type": "error",
                        "code": code,
                        "message": message,
                        "param": null,
                        "sequence_number": last.map_or(0, |n: u64| n + 1),
                        "error": {"type": "upstream_error", "code": code, "message": message, "param": null},
                    });
                    Some((sse::named_event("error", &data), (items, true, last)))
                }
                None => None,
            }
        })
    }
}

impl ModelStream<MessagesEvent> {
    /// The caller's side of the stream as server-sent events (module docs).
    pub fn into_sse(self) -> impl Stream<Item = Bytes> + Send {
        futures::stream::unfold((self.items, false), |(mut items, ended)| async move {
            if ended {
                return None;
            }
            match items.next().await {
                Some(Ok(Piece::Event(event, data))) => {
                    Some((sse::named_as_sent(event.kind(), &data), (items, false)))
                }
                Some(Ok(Piece::KeepAlive)) => Some((sse::keep_alive(), (items, false))),
                Some(Err(error)) => {
                    let code = error.code();
                    let kind = match &error.kind {
                        super::StreamErrorKind::Upstream(upstream) => upstream
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("api_error")
                            .to_owned(),
                        super::StreamErrorKind::Deadline => "timeout_error".to_owned(),
                        _ => "api_error".to_owned(),
                    };
                    let data = json!({
                        "type": "error",
                        "error": {"type": kind, "message": error.to_string(), "code": code.as_str()},
                    });
                    Some((sse::named_event("error", &data), (items, true)))
                }
                None => None,
            }
        })
    }
}
