//! [`ChatStream`]: a streamed answer after its commit point — chunks as they come, and a failure as an error
//! item, never as a clean end.
//!
//! Why so strict: an OpenAI stream ends with `data: [DONE]`. A stream that stops without it — the connection cut,
//! the upstream gone quiet — looks, to a caller that only reads chunks, like a short answer that went well; an
//! agent would act on half a tool call. So the stream ends cleanly only after `[DONE]`; anything else ends with
//! one [`StreamError`] item (DESIGN.md, "Streaming"):
//! - the body fails or ends before `[DONE]` ([`StreamErrorKind::Cut`]);
//! - no chunk for longer than the route's `stream_idle_timeout` ([`StreamErrorKind::Idle`]; keep-alive comments
//!   do not count as chunks: a model that only keeps the connection alive is stalled);
//! - the call's deadline passes ([`StreamErrorKind::Deadline`]);
//! - the upstream sends an error event (`data: {"error": ...}`) ([`StreamErrorKind::Upstream`]), or a chunk that
//!   is not a chunk ([`StreamErrorKind::Malformed`]);
//! - an event outgrows the transport's body limit without ending ([`StreamErrorKind::EventTooLarge`]): the
//!   stream is not buffered without bound;
//! - the call's cancellation token fires ([`StreamErrorKind::Cancelled`]).
//!
//! The deployment's circuit breaker counts the attempt when the stream **ends**, not at its first chunk: a
//! deployment whose streams always die after the first chunk is failing, and must open its breaker so that the
//! next calls go to the fallback. The breaker layer puts the attempt's permit in the committed answer's body;
//! the stream records it, always with the time to first byte as the latency (compared with `slow_call`, as
//! ballast-core's `Permit::record` suggests for streams):
//! - a **success** at `[DONE]`;
//! - a **failure** when the upstream ends it: [`Cut`](StreamErrorKind::Cut), [`Idle`](StreamErrorKind::Idle),
//!   [`Upstream`](StreamErrorKind::Upstream), [`Malformed`](StreamErrorKind::Malformed),
//!   [`EventTooLarge`](StreamErrorKind::EventTooLarge);
//! - **nothing** when the caller's side ends it: [`Cancelled`](StreamErrorKind::Cancelled), the call's own
//!   [`Deadline`](StreamErrorKind::Deadline), or the stream dropped before its end. The permit is dropped
//!   unrecorded, which frees a half-open probe slot; until then a probe stream holds its slot.
//!
//! After recording, the breaker's state is written into the deployment's report (`breaker`).
//!
//! Tokens: a chunk's `usage` (sent when the request asks `stream_options.include_usage`) is recorded in the
//! report as the answer's when the stream ends with `[DONE]`, as a failed attempt's when it fails after.
//!
//! For the gateway, [`ChatStream::into_sse`] writes the caller's side: each chunk as `data: <json>`, then
//! `data: [DONE]` — or, after a failure, `data: {"error": {...}}` and no `[DONE]`.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use ballast_core::{CallResult, Deadline, ErrorCode, Instant};
use bytes::Bytes;
use futures::Stream;
use futures::StreamExt as _;
use http::HeaderMap;
use http_body_util::BodyExt as _;
use serde_json::Value;

use http_body_util::combinators::UnsyncBoxBody;

use super::client::ModelClient;
use super::commit::is_error_event;
use super::route::{Committed, Tried};
use super::usage::record_tokens;
use super::{ChatChunk, Truncation, Usage};
use crate::breaker::StreamPermit;
use crate::sse::{self, DONE, SseDecoder};
use crate::{BoxError, CallContext, Cancel, OutcomeReport, Report, clock};

/// What went wrong after the commit point.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamErrorKind {
    /// The upstream's stream failed or ended before `[DONE]`.
    Cut,
    /// No chunk came for this long (`stream_idle_timeout`).
    Idle(Duration),
    /// The call's deadline passed.
    Deadline,
    /// The upstream sent an error event; its `error` object.
    Upstream(Value),
    /// The upstream sent an event that is not a chunk.
    Malformed(String),
    /// The call's cancellation token fired ([`ChatCall::cancel_token`](super::ChatCall::cancel_token)).
    Cancelled,
    /// The upstream sent an event (or a line) longer than the transport's body limit without ending it.
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

/// The failure that ends a stream after its commit point, with the report as it stood.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{route}: the stream failed after its first chunk: {}", describe(kind))]
pub struct StreamError {
    /// The route.
    pub route: String,
    /// What went wrong.
    pub kind: StreamErrorKind,
    /// What happened, the failure included.
    pub report: OutcomeReport,
}

impl StreamError {
    /// The stable error code: `deadline_exceeded` for the deadline, `upstream_error` otherwise.
    pub fn code(&self) -> ErrorCode {
        match self.kind {
            StreamErrorKind::Deadline => ErrorCode::DeadlineExceeded,
            _ => ErrorCode::UpstreamError,
        }
    }
}

fn describe(kind: &StreamErrorKind) -> String {
    match kind {
        StreamErrorKind::Cut => "the upstream's stream ended before [DONE]; the answer is incomplete".into(),
        StreamErrorKind::Idle(after) => format!(
            "no chunk for {} ms (stream_idle_timeout); the answer is incomplete",
            after.as_millis()
        ),
        StreamErrorKind::Deadline => "the deadline passed; the answer is incomplete".into(),
        StreamErrorKind::Cancelled => "the call was cancelled; the answer is incomplete".into(),
        StreamErrorKind::Upstream(error) => format!("the upstream sent an error: {error}"),
        StreamErrorKind::Malformed(reason) => {
            format!("the upstream sent an event that is not a chunk: {reason}")
        }
        StreamErrorKind::EventTooLarge { limit } => format!(
            "the upstream sent an event of over {limit} bytes (the transport's body limit) and the stream was \
             stopped; the answer is incomplete"
        ),
    }
}

/// A streamed completion after its commit point: a [`Stream`] of chunks whose last item, when it fails, is an
/// error — a [`StreamError`] whose [`StreamErrorKind`] says which: a cut, a stall past `stream_idle_timeout`,
/// the deadline, cancellation, an upstream error event, a malformed or oversized event. It ends cleanly only
/// after the upstream's `[DONE]`. The deployment's circuit breaker counts the attempt when the stream ends: a
/// success at `[DONE]`, a failure when the upstream ends it otherwise (cut, stall, error event, malformed or
/// oversized event), nothing when the caller's side does (cancellation, the call's deadline, dropping the
/// stream) — so a half-open probe stream holds its probe slot until then.
pub struct ChatStream {
    items: Pin<Box<dyn Stream<Item = Result<ChatChunk, StreamError>> + Send>>,
    tried: std::sync::Arc<Tried>,
    deployment: String,
    status: u16,
    headers: HeaderMap,
}

impl fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatStream")
            .field("deployment", &self.deployment)
            .finish_non_exhaustive()
    }
}

/// What reading the rest of the stream needs.
struct Reader {
    route: String,
    decoder: SseDecoder,
    body: Option<UnsyncBoxBody<Bytes, BoxError>>,
    idle: Duration,
    deadline: Deadline,
    last_chunk: Instant,
    cancel: Cancel,
    report: Report,
    tried: std::sync::Arc<Tried>,
    usage: Option<Usage>,
    /// The attempt's breaker permit, recorded when the stream ends (`None` without a breaker layer).
    permit: Option<StreamPermit>,
    /// The call's admission slot, freed when the stream ends (with the reader).
    _slot: Option<crate::admission::Slot>,
}

impl ChatStream {
    /// The stream of `committed`: the bytes read up to the commit point, then the rest of its body.
    pub(super) fn start(
        client: &ModelClient,
        committed: Committed,
        tried: Tried,
        ctx: &CallContext,
    ) -> ChatStream {
        let Committed { index, response } = committed;
        let (parts, body) = response.into_parts();
        let (decoder, body, permit, slot) = match body.into_stream() {
            Ok(stream) => {
                let mut decoder = SseDecoder::new(stream.event_limit);
                decoder.push(&stream.head);
                (decoder, Some(stream.rest), stream.permit, stream.slot)
            }
            // A whole answer (a transport that read it all): every byte is here, bounded by the transport.
            Err(whole) => {
                let mut decoder = SseDecoder::new(whole.len());
                decoder.push(&whole);
                (decoder, None, None, None)
            }
        };
        let report = tried.reports[index].clone();
        let tried = std::sync::Arc::new(tried);
        let reader = Reader {
            route: client.name().to_owned(),
            decoder,
            body,
            idle: client.inner.route.stream_idle_timeout,
            deadline: ctx.effective_deadline(),
            last_chunk: clock::now(),
            cancel: ctx.cancel.clone(),
            report,
            tried: std::sync::Arc::clone(&tried),
            usage: None,
            permit,
            _slot: slot,
        };
        let items = futures::stream::unfold(Some(reader), |reader| async move {
            let mut reader = reader?;
            match reader.next_item().await {
                Some(Ok(chunk)) => Some((Ok(chunk), Some(reader))),
                Some(Err(error)) => Some((Err(error), None)),
                None => None,
            }
        });
        ChatStream {
            items: Box::pin(items),
            tried,
            deployment: client.inner.deployments[index].name.clone(),
            status: parts.status.as_u16(),
            headers: parts.headers,
        }
    }

    /// The deployment that answered (`route[index] model`).
    pub fn deployment(&self) -> &str {
        &self.deployment
    }

    /// The upstream's status (2xx).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The upstream's headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// What truncation dropped before the commit, if the route truncated the conversation.
    pub fn truncated(&self) -> Option<Truncation> {
        self.tried.truncated
    }

    /// The report as it stands now (tokens are in it once the stream ended).
    pub fn report(&self) -> OutcomeReport {
        self.tried.report()
    }

    /// The caller's side of the stream as server-sent events: each chunk as `data: <json>\n\n`, then
    /// `data: [DONE]\n\n` — or, after a failure, OpenAI's error envelope as the last event and no `[DONE]`.
    pub fn into_sse(self) -> impl Stream<Item = Bytes> + Send {
        futures::stream::unfold((self.items, false), |(mut items, ended)| async move {
            if ended {
                return None;
            }
            match items.next().await {
                Some(Ok(chunk)) => {
                    let json = serde_json::to_value(&chunk).unwrap_or(Value::Null);
                    Some((sse::data_event(&json), (items, false)))
                }
                Some(Err(error)) => {
                    let event = sse::error_event(&error.to_string(), "upstream_error", error.code().as_str());
                    Some((event, (items, true)))
                }
                None => Some((sse::done_event(), (items, true))),
            }
        })
    }
}

impl Stream for ChatStream {
    type Item = Result<ChatChunk, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.items.as_mut().poll_next(cx)
    }
}

impl Reader {
    /// The next chunk, the end (`None`, only after `[DONE]`), or the failure.
    async fn next_item(&mut self) -> Option<Result<ChatChunk, StreamError>> {
        loop {
            match self.decoder.next_event() {
                Ok(Some(event)) => return self.on_event(&event),
                Ok(None) => {}
                Err(too_large) => {
                    let kind = StreamErrorKind::EventTooLarge {
                        limit: too_large.limit,
                    };
                    return Some(Err(self.fail(kind)));
                }
            }
            let Some(body) = self.body.as_mut() else {
                return Some(Err(self.fail(StreamErrorKind::Cut)));
            };
            let idle_until = self.last_chunk + self.idle;
            // The stream ends at the deadline less its reserve: the caller hears of it before the deadline.
            let ends = self.deadline.instant() - self.deadline.reserve();
            let until = idle_until.min(ends);
            let frame = tokio::select! {
                biased;
                () = self.cancel.cancelled() => None,
                frame = tokio::time::timeout_at(clock::to_tokio(until), body.frame()) => Some(frame),
            };
            let Some(frame) = frame else {
                return Some(Err(self.fail(StreamErrorKind::Cancelled)));
            };
            match frame {
                Err(_silent) if until == ends && until < idle_until => {
                    return Some(Err(self.fail(StreamErrorKind::Deadline)));
                }
                Err(_silent) => return Some(Err(self.fail(StreamErrorKind::Idle(self.idle)))),
                Ok(None) | Ok(Some(Err(_))) => return Some(Err(self.fail(StreamErrorKind::Cut))),
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.decoder.push(&data);
                    }
                }
            }
        }
    }

    fn on_event(&mut self, event: &str) -> Option<Result<ChatChunk, StreamError>> {
        if event.trim() == DONE {
            record_tokens(&self.report, self.usage.take().as_ref(), true);
            self.record_breaker(Some(CallResult::Success));
            self.body = None;
            return None;
        }
        if is_error_event(event) {
            let error = serde_json::from_str::<Value>(event)
                .ok()
                .and_then(|v| v.get("error").cloned())
                .unwrap_or(Value::Null);
            return Some(Err(self.fail(StreamErrorKind::Upstream(error))));
        }
        match serde_json::from_str::<ChatChunk>(event) {
            Ok(chunk) => {
                if let Some(usage) = &chunk.usage {
                    self.usage = Some(usage.clone());
                }
                self.last_chunk = clock::now();
                Some(Ok(chunk))
            }
            Err(error) => Some(Err(self.fail(StreamErrorKind::Malformed(error.to_string())))),
        }
    }

    /// Ends the stream with `kind`: the tokens reported so far are a failed attempt's, the report says why.
    fn fail(&mut self, kind: StreamErrorKind) -> StreamError {
        self.body = None;
        record_tokens(&self.report, self.usage.take().as_ref(), false);
        self.record_breaker(breaker_result(&kind));
        let code = match kind {
            StreamErrorKind::Deadline => ErrorCode::DeadlineExceeded,
            _ => ErrorCode::UpstreamError,
        };
        self.report.update(|r| r.code = Some(code));
        StreamError {
            route: self.route.clone(),
            kind,
            report: self.tried.report(),
        }
    }

    /// Records the stream's outcome on its breaker permit, or (`None`) drops the permit unrecorded; writes the
    /// breaker's state into the report.
    fn record_breaker(&mut self, result: Option<CallResult>) {
        let Some(permit) = self.permit.take() else { return };
        let Some(result) = result else { return };
        let state = permit.record(result, clock::now());
        self.report.update(|r| r.breaker = Some(state));
    }
}

/// What a stream's failure tells its deployment's breaker (module docs); `None`: nothing, the caller's side
/// ended it.
fn breaker_result(kind: &StreamErrorKind) -> Option<CallResult> {
    match kind {
        StreamErrorKind::Cancelled | StreamErrorKind::Deadline => None,
        StreamErrorKind::Cut
        | StreamErrorKind::Idle(_)
        | StreamErrorKind::Upstream(_)
        | StreamErrorKind::Malformed(_)
        | StreamErrorKind::EventTooLarge { .. } => Some(CallResult::Failure),
    }
}

#[cfg(test)]
mod tests;
