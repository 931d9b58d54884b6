//! [`ModelStream`]: a streamed answer after its commit point — events as they come, and a failure as an error
//! item, never as a clean end. One stream core for every streamed API: [`ChatStream`] (Chat Completions
//! chunks) and [`ResponseStream`] (Responses events) differ only in what an event means (`model/api.rs`).
//!
//! Why so strict: a chat stream ends with `data: [DONE]`, a Responses stream with `response.completed` (or
//! `response.incomplete`). A stream that stops without its end — the connection cut, the upstream gone quiet —
//! looks, to a caller that only reads events, like a short answer that went well; an agent would act on half a
//! tool call. So the stream ends cleanly only after its API's end; anything else ends with one [`StreamError`]
//! item (DESIGN.md, "Streaming"):
//! - the body fails or ends before the end event ([`StreamErrorKind::Cut`]);
//! - nothing heard for longer than the route's `stream_idle_timeout` ([`StreamErrorKind::Idle`]; keep-alive
//!   comments are heard: a provider that keeps the connection alive while it thinks is not stalled, and the
//!   call's deadline still bounds it);
//! - the call's deadline passes ([`StreamErrorKind::Deadline`]);
//! - the upstream sends an error event (`data: {"error": ...}`, `event: error`, `response.failed`)
//!   ([`StreamErrorKind::Upstream`]), or an event that is not its API's ([`StreamErrorKind::Malformed`]);
//! - an event outgrows the transport's body limit without ending ([`StreamErrorKind::EventTooLarge`]): the
//!   stream is not buffered without bound;
//! - the call's cancellation token fires ([`StreamErrorKind::Cancelled`]).
//!
//! The deployment's circuit breaker counts the attempt when the stream **ends**, not at its first event: a
//! deployment whose streams always die after the first chunk is failing, and must open its breaker so that the
//! next calls go to the fallback. The breaker layer puts the attempt's permit in the committed answer's body;
//! the stream records it, always with the time to first byte as the latency (compared with `slow_call`, as
//! ballast-core's `Permit::record` suggests for streams):
//! - a **success** at the API's end;
//! - a **failure** when the upstream ends it: [`Cut`](StreamErrorKind::Cut), [`Idle`](StreamErrorKind::Idle),
//!   [`Upstream`](StreamErrorKind::Upstream), [`Malformed`](StreamErrorKind::Malformed),
//!   [`EventTooLarge`](StreamErrorKind::EventTooLarge) — but an upstream error event that says overload
//!   (Anthropic's `overloaded_error`) is overload, not counted, as its 529 would be;
//! - **nothing** when the caller's side ends it: [`Cancelled`](StreamErrorKind::Cancelled), the call's own
//!   [`Deadline`](StreamErrorKind::Deadline), or the stream dropped before its end. The permit is dropped
//!   unrecorded, which frees a half-open probe slot; until then a probe stream holds its slot.
//!
//! After recording, the breaker's state is written into the deployment's report (`breaker`).
//!
//! Tokens: the stream's `usage` (a chat chunk's, sent when the request asks `stream_options.include_usage`; the
//! Responses API's terminal event's) is recorded in the report as the answer's when the stream ends well, as a
//! failed attempt's when it fails after.
//!
//! For the gateway, `into_sse` writes the caller's side: for chat each chunk as `data: <json>`, then
//! `data: [DONE]` — or, after a failure, `data: {"error": {...}}` and no `[DONE]`; for Responses each event as
//! `event: <type>` and `data: <json>` — or, after a failure, an `event: error` whose data carries an `error`
//! object as well as the event's own fields (so both official SDKs raise), and nothing after it.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ballast_core::{CallResult, Deadline, ErrorCode, Instant};
use bytes::Bytes;
use futures::Stream;
use http::HeaderMap;
use http_body_util::BodyExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use serde_json::Value;

use super::api::Read;
use super::messages::MessagesEvent;
use super::responses::ResponseEvent;
use super::route::{Committed, Tried};
use super::usage::record_tokens;
use super::{ChatChunk, Truncation};
use crate::body::StreamEnd;
use crate::sse::SseDecoder;
use crate::{BoxError, CallContext, Cancel, OutcomeReport, Report, TokenUsage, clock};

/// What went wrong after the commit point.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamErrorKind {
    /// The upstream's stream failed or ended before its API's end event.
    Cut,
    /// Nothing came for this long (`stream_idle_timeout`).
    Idle(Duration),
    /// The call's deadline passed.
    Deadline,
    /// The upstream sent an error event; its `error` object.
    Upstream(Value),
    /// The upstream sent an event that is not its API's.
    Malformed(String),
    /// The call's cancellation token fired ([`ModelCall::cancel_token`](super::ModelCall::cancel_token)).
    Cancelled,
    /// The upstream sent an event (or a line) longer than the transport's body limit without ending it.
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

/// The failure that ends a stream after its commit point, with the report as it stood.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{route}: the stream failed after its first event: {}", describe(kind))]
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
        self.kind.code()
    }
}

impl StreamErrorKind {
    /// The stable error code of a stream that failed so.
    fn code(&self) -> ErrorCode {
        match self {
            StreamErrorKind::Deadline => ErrorCode::DeadlineExceeded,
            _ => ErrorCode::UpstreamError,
        }
    }
}

fn describe(kind: &StreamErrorKind) -> String {
    match kind {
        StreamErrorKind::Cut => {
            "the upstream's stream ended before its end event; the answer is incomplete".into()
        }
        StreamErrorKind::Idle(after) => format!(
            "nothing for {} ms (stream_idle_timeout); the answer is incomplete",
            after.as_millis()
        ),
        StreamErrorKind::Deadline => "the deadline passed; the answer is incomplete".into(),
        StreamErrorKind::Cancelled => "the call was cancelled; the answer is incomplete".into(),
        StreamErrorKind::Upstream(error) => format!("the upstream sent an error: {error}"),
        StreamErrorKind::Malformed(reason) => {
            format!("the upstream sent an event that is not its API's: {reason}")
        }
        StreamErrorKind::EventTooLarge { limit } => format!(
            "the upstream sent an event of over {limit} bytes (the transport's body limit) and the stream was \
             stopped; the answer is incomplete"
        ),
    }
}

/// A streamed answer after its commit point: a [`Stream`] of events whose last item, when it fails, is an
/// error — a [`StreamError`] whose [`StreamErrorKind`] says which: a cut, a stall past `stream_idle_timeout`,
/// the deadline, cancellation, an upstream error event, a malformed or oversized event. It ends cleanly only
/// after its API's end (`[DONE]`, `response.completed`, `response.incomplete`). The deployment's circuit
/// breaker counts the attempt when the stream ends: a success at its end, a failure when the upstream ends it
/// otherwise (cut, stall, error event, malformed or oversized event), nothing when the caller's side does
/// (cancellation, the call's deadline, dropping the stream) — so a half-open probe stream holds its probe slot
/// until then.
pub struct ModelStream<E> {
    items: Pin<Box<dyn Stream<Item = Result<Piece<E>, StreamError>> + Send>>,
    tried: Arc<Tried>,
    deployment: String,
    status: u16,
    headers: HeaderMap,
}

/// A streamed chat completion: its chunks.
pub type ChatStream = ModelStream<ChatChunk>;

/// A streamed response: its events (`response.created` first, then output items and deltas, then
/// `response.completed` or `response.incomplete`).
pub type ResponseStream = ModelStream<ResponseEvent>;

/// A streamed message of the Messages API: its events (`message_start` first, then content blocks, then
/// `message_delta` and `message_stop`).
pub type MessagesStream = ModelStream<MessagesEvent>;

impl<E> fmt::Debug for ModelStream<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelStream")
            .field("deployment", &self.deployment)
            .finish_non_exhaustive()
    }
}

/// What the reader hands on: an event with its data as the upstream sent it (the caller's side passes that on,
/// not the event written out again), or word that the upstream sent a keep-alive (a model thinking), which the
/// caller's side passes on so that its own read timeout does not fire while the upstream is alive.
#[derive(Debug)]
pub(super) enum Piece<E> {
    Event(E, String),
    KeepAlive,
}

/// What reading the rest of the stream needs.
pub(super) struct Reader<E> {
    route: String,
    decoder: SseDecoder,
    body: Option<UnsyncBoxBody<Bytes, BoxError>>,
    read: fn(&str) -> Read<E>,
    idle: Duration,
    deadline: Deadline,
    /// When the upstream last sent anything (an event, part of one, a keep-alive comment).
    last_heard: Instant,
    cancel: Cancel,
    report: Report,
    tried: Arc<Tried>,
    usage: Option<TokenUsage>,
    /// The end event was handed on: nothing follows.
    ended: bool,
    /// How the stream failed, once it did: every later read says so again.
    failed: Option<StreamErrorKind>,
    /// The attempt's breaker permit, recorded when the stream ends (`None` without a breaker layer).
    permit: Option<Box<dyn StreamEnd>>,
    /// The call's admission slot, freed when the stream ends (with the reader).
    _slot: Option<Box<dyn Send>>,
}

/// Where a committed stream comes from and how to read it.
pub(super) struct Source<E> {
    pub(super) route: String,
    pub(super) deployment: String,
    pub(super) idle: Duration,
    pub(super) read: fn(&str) -> Read<E>,
}

impl<E: Send + 'static> ModelStream<E> {
    /// The stream of `committed`: the bytes read up to the commit point, then the rest of its body.
    pub(super) fn start(source: Source<E>, committed: Committed, tried: Tried, ctx: &CallContext) -> Self {
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
        let report = tried.report_of(index).clone();
        let tried = Arc::new(tried);
        let reader = Reader {
            route: source.route,
            decoder,
            body,
            read: source.read,
            idle: source.idle,
            deadline: ctx.effective_deadline(),
            last_heard: clock::now(),
            cancel: ctx.cancel.clone(),
            report,
            tried: Arc::clone(&tried),
            usage: None,
            ended: false,
            failed: None,
            permit,
            _slot: slot,
        };
        ModelStream {
            items: reader.into_items(),
            tried,
            deployment: source.deployment,
            status: parts.status.as_u16(),
            headers: parts.headers,
        }
    }
}

impl<E> ModelStream<E> {
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

    /// A reader of the report that outlives the stream: what a caller that hands the stream on (as a response
    /// body, say) calls when the stream has ended, for the report with its tokens and how it ended.
    pub fn report_reader(&self) -> impl Fn() -> OutcomeReport + Send + Sync + 'static {
        let tried = Arc::clone(&self.tried);
        move || tried.report()
    }
}

impl<E> Stream for ModelStream<E> {
    type Item = Result<E, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match self.items.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(Piece::KeepAlive))) => {}
                Poll::Ready(Some(Ok(Piece::Event(event, _)))) => return Poll::Ready(Some(Ok(event))),
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<E: Send + 'static> Reader<E> {
    /// What the reader hands on, as a stream that ends after its first failure.
    fn into_items(self) -> Pin<Box<dyn Stream<Item = Result<Piece<E>, StreamError>> + Send>> {
        Box::pin(futures::stream::unfold(Some(self), |reader| async move {
            let mut reader = reader?;
            match reader.next_item().await {
                Some(Ok(piece)) => Some((Ok(piece), Some(reader))),
                Some(Err(error)) => Some((Err(error), None)),
                None => None,
            }
        }))
    }
}

impl<E> Reader<E> {
    /// The next event or keep-alive, the end (`None`, only after the API's end), or the failure.
    async fn next_item(&mut self) -> Option<Result<Piece<E>, StreamError>> {
        loop {
            if let Some(kind) = &self.failed {
                return Some(Err(StreamError {
                    route: self.route.clone(),
                    kind: kind.clone(),
                    report: self.tried.report(),
                }));
            }
            if self.ended {
                return None;
            }
            match self.decoder.next_event() {
                Ok(Some(event)) => match self.on_event(event) {
                    Some(item) => return item,
                    None => continue,
                },
                Ok(None) if self.decoder.take_comments() > 0 => return Some(Ok(Piece::KeepAlive)),
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
            let idle_until = self.last_heard + self.idle;
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
                        self.last_heard = clock::now();
                        self.decoder.push(&data);
                    }
                }
            }
        }
    }

    /// What the stream hands on for `event`: `Some(item)` (an event, the end as `None` inside, a failure), or
    /// `None` to read on.
    fn on_event(&mut self, event: String) -> Option<Option<Result<Piece<E>, StreamError>>> {
        match (self.read)(&event) {
            Read::Item(item, usage) => {
                self.usage = latest(self.usage, usage);
                Some(Some(Ok(Piece::Event(item, event))))
            }
            Read::Last(item, usage) => {
                self.usage = latest(self.usage, usage);
                self.end_well();
                Some(Some(Ok(Piece::Event(item, event))))
            }
            Read::End => {
                self.end_well();
                Some(None)
            }
            Read::Upstream(error) => Some(Some(Err(self.fail(StreamErrorKind::Upstream(error))))),
            Read::Malformed(reason) => Some(Some(Err(self.fail(StreamErrorKind::Malformed(reason))))),
            Read::Cut => Some(Some(Err(self.fail(StreamErrorKind::Cut)))),
        }
    }

    /// The stream reached its API's end: its tokens are the answer's, the breaker hears a success.
    fn end_well(&mut self) {
        record_tokens(&self.report, self.usage.take(), true);
        self.record_breaker(Some(CallResult::Success));
        self.body = None;
        self.ended = true;
    }

    /// Ends the stream with `kind`: the tokens reported so far are a failed attempt's, the report says why.
    fn fail(&mut self, kind: StreamErrorKind) -> StreamError {
        self.body = None;
        self.failed = Some(kind.clone());
        record_tokens(&self.report, self.usage.take(), false);
        self.record_breaker(breaker_result(&kind));
        let code = kind.code();
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

/// The usage a stream has reported so far, with an event's: each count as the latest (the largest, since a
/// stream's counts only grow) — Anthropic reports the input in `message_start` and the output, cumulative, in
/// `message_delta`; the other APIs report once.
fn latest(before: Option<TokenUsage>, now: Option<TokenUsage>) -> Option<TokenUsage> {
    let (Some(before), Some(now)) = (before, now) else {
        return now.or(before);
    };
    let prompt_tokens = before.prompt_tokens.max(now.prompt_tokens);
    let completion_tokens = before.completion_tokens.max(now.completion_tokens);
    Some(TokenUsage {
        prompt_tokens,
        completion_tokens,
        total_tokens: (before.total_tokens.max(now.total_tokens)).max(prompt_tokens + completion_tokens),
    })
}

/// What a stream's failure tells its deployment's breaker (module docs); `None`: nothing, the caller's side
/// ended it. An upstream's error event that says overload (Anthropic's `overloaded_error`) is overload, as its
/// 529 would be: not counted.
fn breaker_result(kind: &StreamErrorKind) -> Option<CallResult> {
    match kind {
        StreamErrorKind::Cancelled | StreamErrorKind::Deadline => None,
        StreamErrorKind::Upstream(error) if is_overload(error) => Some(CallResult::Overloaded),
        StreamErrorKind::Cut
        | StreamErrorKind::Idle(_)
        | StreamErrorKind::Upstream(_)
        | StreamErrorKind::Malformed(_)
        | StreamErrorKind::EventTooLarge { .. } => Some(CallResult::Failure),
    }
}

/// Whether an upstream's error object says overload (its `type` or `code` is `overloaded_error`).
fn is_overload(error: &Value) -> bool {
    ["type", "code"]
        .iter()
        .any(|key| error.get(*key).and_then(Value::as_str) == Some("overloaded_error"))
}

mod caller;
#[cfg(test)]
mod tests;
