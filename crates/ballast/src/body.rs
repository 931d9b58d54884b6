//! [`Body`]: an answer as the stack hands it up — whole bytes, or a stream committed at its first event with what
//! belongs to it.
//!
//! Why a body of our own: each layer must see an answer as it is. The retry decision reads an error answer's
//! JSON; the breaker must know whether a 2xx is a stream, whose health shows only at its end; the chat client must
//! get the stream itself. So a transport reads every answer, under its body limit, into one of two shapes:
//! - **whole** — the bytes: every error answer, and every answer to a request that does not stream;
//! - **a stream** — a streamed request's 2xx: the bytes read up to its commit point (DESIGN.md, "Streaming"), the
//!   rest of the body unread, the most bytes one event of it may hold, and — once the breaker layer has seen the
//!   answer — the attempt's breaker permit, which whoever reads the stream to its end records
//!   ([`ChatStream`](crate::model::ChatStream)).
//!
//! The stream and its permit travel up the stack inside the answer, as values: no layer looks beside the answer
//! for them.
//!
//! `Body` is an [`http_body::Body`], so an answer can go on to hyper or axum as it is: a whole body as one frame, a
//! stream as its head and then the rest. Read that way, a stream's permit is dropped unrecorded with the body (it
//! counts nothing: only a reader of its events can tell a stream that finished from one that was cut).

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;

use ballast_core::{BreakerState, CallResult, Instant};

use crate::BoxError;

/// An answer's body: whole bytes, or a stream committed at its first event (module docs).
pub struct Body(Kind);

enum Kind {
    /// The whole answer; `None` once it was polled out as a frame.
    Whole(Option<Bytes>),
    /// A stream after its commit point. Boxed: rare, and it keeps every answer's body small.
    Stream(Box<Stream>),
}

/// A streamed answer after its commit point.
pub(crate) struct Stream {
    /// What was read up to and including the event that committed it: whole events.
    pub(crate) head: Bytes,
    /// The rest of the body, unread.
    pub(crate) rest: UnsyncBoxBody<Bytes, BoxError>,
    /// The most bytes one event of the rest may hold (the transport's body limit).
    pub(crate) event_limit: usize,
    /// The attempt's breaker permit, once the breaker layer has seen the answer.
    pub(crate) permit: Option<Box<dyn StreamEnd>>,
    /// The call's admission slot: a stream occupies its upstream until it ends (dropped with the stream).
    pub(crate) slot: Option<Box<dyn Send>>,
}

/// What whoever reads a stream to its end records there: the attempt's breaker permit (the breaker's
/// `StreamPermit`). A trait here so that the body, below every layer, names none of them.
pub(crate) trait StreamEnd: Send + fmt::Debug {
    /// Records the stream's outcome at `now` (its end); returns the breaker's state after it.
    fn record(self: Box<Self>, result: CallResult, now: Instant) -> BreakerState;
}

/// What an event of a streamed answer read before its commit point means (DESIGN.md, "Streaming").
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Commit {
    /// It carries content (or ends the answer): the stream commits here.
    Now,
    /// It carries nothing for the caller yet (the preamble: the Responses API's `response.created`, a chat chunk
    /// with only the role): held back with the status line, and the next event is read. The hold is bounded
    /// ([`HOLD_EVENTS`]): past it the stream commits.
    Hold,
    /// It carries nothing for the caller yet, as [`Commit::Hold`], and names the answer's state (the Responses
    /// API's `response.created` names the response's id): held back the same way, and the first name read kept
    /// on the answer as its [`Named`] extension, so that whoever routes the state need not read the stream again.
    Named(String),
    /// The provider's error, sent as an event before the commit point (`event: error`, `response.failed`, a chat
    /// `data: {"error": ...}`): the attempt's answer is that error as if the provider had answered it with
    /// `status` and `body` (OpenAI's `{"error": {...}}`), so the retry decision, the breaker and the route's
    /// fallback rule read it as they read any error answer — an insufficient quota moves on to the next
    /// deployment, a server error is retried.
    Error {
        /// The status the error's code stands for.
        status: ::http::StatusCode,
        /// The error, in its API's envelope (OpenAI's `{"error": ...}`, Anthropic's `{"type": "error", "error": ...}`).
        body: bytes::Bytes,
    },
    /// It cannot begin an answer (a `[DONE]` before any content, not the API's event): the attempt failed before
    /// its commit point, and why.
    Fail(String),
}

/// The most events held back before a stream commits anyway: a preamble is one or two events, and what is held
/// is memory and the caller's time to first byte.
pub(crate) const HOLD_EVENTS: usize = 8;

/// The state a streamed answer's preamble names ([`Commit::Named`]): a response extension of the committed answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Named(pub(crate) String);

/// The commit point of an API's streams: what each event read before it means.
pub(crate) type CommitRule = fn(&str) -> Commit;

/// How a call's 2xx answer is read as a stream: its commit rule, and whether only an answer that is a stream of
/// events (`text/event-stream`) is — an MCP server answers a call with JSON or with events, as it likes, and JSON
/// is then read whole. A model stream is read as events whatever its content type says.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamRead {
    pub(crate) commits: CommitRule,
    pub(crate) events_only: bool,
}

impl Body {
    /// An empty whole body.
    pub fn empty() -> Self {
        Body(Kind::Whole(Some(Bytes::new())))
    }

    /// A whole body of `bytes`.
    pub fn whole(bytes: impl Into<Bytes>) -> Self {
        Body(Kind::Whole(Some(bytes.into())))
    }

    /// A stream after its commit point: `head` read, `rest` not yet.
    pub(crate) fn stream(head: Bytes, rest: UnsyncBoxBody<Bytes, BoxError>, event_limit: usize) -> Self {
        Body(Kind::Stream(Box::new(Stream {
            head,
            rest,
            event_limit,
            permit: None,
            slot: None,
        })))
    }

    /// The whole answer's bytes; `None` for a stream (read it with [`ChatStream`](crate::model::ChatStream), or as an
    /// [`http_body::Body`]) and for a whole body already polled out as a frame.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match &self.0 {
            Kind::Whole(bytes) => bytes.as_ref(),
            Kind::Stream(_) => None,
        }
    }

    /// Whether this is a stream after its commit point.
    pub fn is_stream(&self) -> bool {
        matches!(self.0, Kind::Stream(_))
    }

    /// Gives a stream its attempt's breaker permit, to be recorded when the stream ends. A whole body gives the
    /// permit back.
    pub(crate) fn keep_permit<P: StreamEnd + 'static>(&mut self, permit: P) -> Option<P> {
        match &mut self.0 {
            Kind::Stream(stream) => {
                drop(stream.permit.replace(Box::new(permit)));
                None
            }
            Kind::Whole(_) => Some(permit),
        }
    }

    /// Gives a stream its call's admission slot, freed when the stream ends. A whole body gives the slot back.
    pub(crate) fn keep_slot<S: Send + 'static>(&mut self, slot: S) -> Option<S> {
        match &mut self.0 {
            Kind::Stream(stream) => {
                drop(stream.slot.replace(Box::new(slot)));
                None
            }
            Kind::Whole(_) => Some(slot),
        }
    }

    /// The stream, or the whole bytes it is not.
    pub(crate) fn into_stream(self) -> Result<Stream, Bytes> {
        match self.0 {
            Kind::Stream(stream) => Ok(*stream),
            Kind::Whole(bytes) => Err(bytes.unwrap_or_default()),
        }
    }
}

impl Default for Body {
    fn default() -> Self {
        Body::empty()
    }
}

impl From<Bytes> for Body {
    fn from(bytes: Bytes) -> Self {
        Body::whole(bytes)
    }
}

impl From<&'static str> for Body {
    fn from(text: &'static str) -> Self {
        Body::whole(Bytes::from_static(text.as_bytes()))
    }
}

impl From<&'static [u8]> for Body {
    fn from(bytes: &'static [u8]) -> Self {
        Body::whole(Bytes::from_static(bytes))
    }
}

impl From<String> for Body {
    fn from(text: String) -> Self {
        Body::whole(text)
    }
}

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Self {
        Body::whole(bytes)
    }
}

/// A whole body equals the bytes it holds; a stream equals nothing.
impl PartialEq<[u8]> for Body {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes().is_some_and(|bytes| bytes[..] == *other)
    }
}

/// A whole body equals the text it holds; a stream equals nothing.
impl PartialEq<str> for Body {
    fn eq(&self, other: &str) -> bool {
        *self == *other.as_bytes()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Kind::Whole(bytes) => f.debug_tuple("Body::Whole").field(bytes).finish(),
            Kind::Stream(stream) => f
                .debug_struct("Body::Stream")
                .field("head", &stream.head)
                .field("event_limit", &stream.event_limit)
                .field("permit", &stream.permit)
                .finish_non_exhaustive(),
        }
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.0 {
            Kind::Whole(bytes) => {
                Poll::Ready(bytes.take().filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(b))))
            }
            Kind::Stream(stream) => {
                if !stream.head.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(std::mem::take(&mut stream.head)))));
                }
                Pin::new(&mut stream.rest).poll_frame(cx)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Kind::Whole(bytes) => bytes.as_ref().is_none_or(Bytes::is_empty),
            Kind::Stream(stream) => stream.head.is_empty() && stream.rest.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Kind::Whole(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Stream(stream) => {
                let rest = stream.rest.size_hint();
                let head = stream.head.len() as u64;
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower().saturating_add(head));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(head));
                }
                hint
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use http_body::Body as _;
    use http_body_util::BodyExt as _;

    use super::*;

    #[tokio::test]
    async fn a_whole_body_is_one_frame() {
        let body = Body::from("done");
        assert_eq!(body.as_bytes().map(|b| &b[..]), Some(&b"done"[..]));
        assert_eq!(&body, "done");
        assert!(!body.is_stream());
        assert_eq!(body.size_hint().exact(), Some(4));
        assert_eq!(body.collect().await.unwrap().to_bytes(), "done");
        assert!(Body::empty().is_end_stream());
    }

    #[tokio::test]
    async fn a_stream_reads_as_its_head_then_its_rest() {
        let rest = http_body_util::Full::new(Bytes::from_static(b"data: [DONE]\n\n"))
            .map_err(|never| match never {})
            .boxed_unsync();
        let body = Body::stream(Bytes::from_static(b"data: {}\n\n"), rest, 1024);
        assert!(body.is_stream());
        assert_eq!(body.as_bytes(), None);
        assert_ne!(&body, "data: {}\n\n", "a stream equals no bytes");
        assert_eq!(
            body.collect().await.unwrap().to_bytes(),
            "data: {}\n\ndata: [DONE]\n\n"
        );
    }
}
