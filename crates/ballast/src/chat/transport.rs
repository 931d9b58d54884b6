//! [`ChatTransport`]: where a model attempt leaves the stack — whole answers, or a stream up to its first event.
//!
//! Why not [`HttpTransport`](crate::HttpTransport): every layer of the stack speaks `Response<Bytes>`, so a
//! transport reads the whole answer within the attempt's timeout. A streamed answer cannot be read whole — the
//! caller wants its chunks as they come — but until its first event it is still an attempt like any other: it
//! may hang, reset or answer 503, and the retry layer, the breaker and the fallback must see that. So for a
//! request marked with a [`StreamHandoff`], a 2xx answer is read **up to its first event** (the commit point:
//! DESIGN.md, "Streaming") and handed up the stack with the bytes read so far as its body; the rest of the body
//! goes into the handoff, for the [`ChatStream`](super::ChatStream) to read. The attempt's timeout therefore
//! bounds the time to the first chunk, as `per_try_timeout` promises. Error answers, and every answer of a
//! request that is not streamed, are read whole under the size limit.
//!
//! A first event that is an error object (`data: {"error": ...}`, sent by some providers inside a 200 stream) is
//! no first chunk: the attempt fails as a transport error after sending, retried like a reset. A stream that
//! ends before any event, whose first event is `[DONE]` (no chunk at all), or whose first event is not a chunk
//! (not JSON, no `choices`: a proxy's page, a truncated event), is the same.
//!
//! Failures are sorted as the other transports sort them (see [`HttpTransport`](crate::HttpTransport)): a
//! connection never made is `{ sent: false }`, anything after is `{ sent: true }` or a timeout.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body::Body;
use http_body_util::BodyExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use tower::{Service, ServiceExt as _};

use super::ChatChunk;
use super::sse::{DONE, SseDecoder};
use crate::transport::sort_error;
use crate::{BoxError, Error, clock};

/// A response body of any upstream, boxed.
pub(crate) type RawBody = UnsyncBoxBody<Bytes, BoxError>;

type SendFn = dyn Fn(Request<Bytes>) -> BoxFuture<'static, Result<Response<RawBody>, Error>> + Send + Sync;

/// Sends model attempts and reads their answers: whole, or for a stream up to the first event (module docs).
///
/// ```
/// use ballast::ChatTransport;
///
/// // Over the network (https included: reqwest with rustls), answers up to 8 MiB.
/// let http = ChatTransport::http(reqwest::Client::new(), 8 << 20);
/// // In process, over any tower service: the chaos upstream in tests.
/// let chaos = ChatTransport::service(ballast_chaos::router(ballast_chaos::Profile::default()), 8 << 20);
/// # let _ = (http, chaos);
/// ```
#[derive(Clone)]
pub struct ChatTransport {
    send: Arc<SendFn>,
    body_limit: usize,
}

impl fmt::Debug for ChatTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTransport")
            .field("body_limit", &self.body_limit)
            .finish_non_exhaustive()
    }
}

impl ChatTransport {
    /// Sends with `client` (the URL is the request's absolute URI) and reads answers of at most `body_limit`
    /// bytes (a stream's limit is on what is read before its first event, then on each event).
    pub fn http(client: reqwest::Client, body_limit: usize) -> Self {
        let send = move |request: Request<Bytes>| -> BoxFuture<'static, Result<Response<RawBody>, Error>> {
            let client = client.clone();
            Box::pin(async move {
                let start = clock::now();
                let request = reqwest::Request::try_from(request).map_err(|e| Error::transport(false, e))?;
                let response = client.execute(request).await.map_err(|e| sort_error(e, start))?;
                let response = Response::<reqwest::Body>::from(response);
                Ok(response.map(|body| {
                    body.map_err(move |e| match sort_error(e, start) {
                        Error::Transport { source, .. } => source,
                        other => BoxError::from(other),
                    })
                    .boxed_unsync()
                }))
            })
        };
        ChatTransport {
            send: Arc::new(send),
            body_limit,
        }
    }

    /// Hands each attempt to `service` (an axum `Router`: the chaos upstream) with a
    /// [`Full<Bytes>`](http_body_util::Full) body; answers of at most `body_limit` bytes. The service failing to
    /// become ready is `{ sent: false }`, failing the call `{ sent: true }`.
    pub fn service<S, R>(service: S, body_limit: usize) -> Self
    where
        S: Service<Request<http_body_util::Full<Bytes>>, Response = Response<R>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        R: Body<Data = Bytes> + Send + 'static,
        R::Error: Into<BoxError>,
    {
        let send = move |request: Request<Bytes>| -> BoxFuture<'static, Result<Response<RawBody>, Error>> {
            let service = service.clone();
            Box::pin(async move {
                let request = request.map(http_body_util::Full::new);
                let mut service = service;
                let ready = service.ready().await.map_err(|e| Error::transport(false, e))?;
                let response = ready.call(request).await.map_err(|e| Error::transport(true, e))?;
                Ok(response.map(|body| body.map_err(Into::into).boxed_unsync()))
            })
        };
        ChatTransport {
            send: Arc::new(send),
            body_limit,
        }
    }
}

/// Request extension: the request is streamed. The transport reads a 2xx answer up to its first event and
/// leaves the rest of the body here.
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamHandoff(Arc<Mutex<Option<Remainder>>>);

/// The unread part of a streamed answer.
pub(crate) struct Remainder {
    pub(crate) body: RawBody,
    /// The most bytes one event of it may hold: the transport's body limit.
    pub(crate) event_limit: usize,
}

impl fmt::Debug for Remainder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remainder").finish_non_exhaustive()
    }
}

impl StreamHandoff {
    /// The rest of the body of the last attempt that reached its first event.
    pub(crate) fn take(&self) -> Option<Remainder> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn put(&self, remainder: Remainder) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(remainder);
    }
}

impl Service<Request<Bytes>> for ChatTransport {
    type Response = Response<Bytes>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Bytes>, Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let send = Arc::clone(&self.send);
        let limit = self.body_limit;
        let handoff = request.extensions().get::<StreamHandoff>().cloned();
        Box::pin(async move {
            let response = send(request).await?;
            let (parts, body) = response.into_parts();
            let body = match handoff {
                Some(handoff) if parts.status.is_success() => read_first_event(body, limit, &handoff).await?,
                _ => read_whole(body, limit).await?,
            };
            Ok(Response::from_parts(parts, body))
        })
    }
}

/// Reads all of `body`, refusing one longer than `limit` bytes — at once when its announced length says so.
async fn read_whole(mut body: RawBody, limit: usize) -> Result<Bytes, Error> {
    if body.size_hint().lower() > u64::try_from(limit).unwrap_or(u64::MAX) {
        return Err(Error::BodyTooLarge { limit });
    }
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(body_failed)?.into_data() else {
            continue;
        };
        if read.len() + data.len() > limit {
            return Err(Error::BodyTooLarge { limit });
        }
        read.extend_from_slice(&data);
    }
    Ok(read.freeze())
}

/// Reads `body` until its first whole event; puts the rest in `handoff`; returns the bytes read.
async fn read_first_event(mut body: RawBody, limit: usize, handoff: &StreamHandoff) -> Result<Bytes, Error> {
    let mut read = BytesMut::new();
    let mut decoder = SseDecoder::new(limit);
    loop {
        let Some(frame) = body.frame().await else {
            return Err(Error::transport(true, "the stream ended before its first event"));
        };
        let frame = frame.map_err(body_failed)?;
        let Ok(data) = frame.into_data() else { continue };
        decoder.push(&data);
        read.extend_from_slice(&data);
        if read.len() > limit {
            return Err(Error::BodyTooLarge { limit });
        }
        let first = decoder.next_event().map_err(|_| Error::BodyTooLarge { limit })?;
        if let Some(first) = first {
            if first.trim() == DONE {
                // No chunk at all: committing would give the caller an empty answer that ends as if it went well.
                return Err(Error::transport(
                    true,
                    "the stream ended ([DONE]) before its first chunk",
                ));
            }
            if is_error_event(&first) {
                return Err(Error::transport(
                    true,
                    format!("the stream's first event is an error: {first}"),
                ));
            }
            if let Err(error) = serde_json::from_str::<ChatChunk>(&first) {
                // Not a chunk: nothing the caller could be handed yet, so no commit — retried like a reset.
                return Err(Error::transport(
                    true,
                    format!("the stream's first event is not a chunk ({error}): {first}"),
                ));
            }
            handoff.put(Remainder {
                body,
                event_limit: limit,
            });
            return Ok(read.freeze());
        }
    }
}

/// Whether an event's data is an error object rather than a chunk.
pub(crate) fn is_error_event(data: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(data)
        .is_ok_and(|v| v.get("error").is_some_and(|e| !e.is_null()))
}

/// A body that failed midway: sent, and the upstream may have done the work.
fn body_failed(error: BoxError) -> Error {
    match error.downcast::<Error>() {
        Ok(error) => *error,
        Err(other) => Error::transport(true, other),
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::Full;

    use super::*;

    fn body(bytes: &'static [u8]) -> RawBody {
        Full::new(Bytes::from_static(bytes))
            .map_err(|never| match never {})
            .boxed_unsync()
    }

    #[tokio::test]
    async fn the_first_chunk_commits_and_leaves_the_rest_for_the_stream() {
        let handoff = StreamHandoff::default();
        let read = read_first_event(
            body(b"data: {\"choices\":[]}\n\ndata: [DONE]\n\n"),
            1 << 10,
            &handoff,
        )
        .await
        .expect("a first chunk");
        assert!(read.starts_with(b"data: {\"choices\":[]}\n\n"));
        assert!(handoff.take().is_some());
    }

    /// A stream that says `[DONE]` before any chunk has no answer in it: committing it would hand the caller an
    /// empty answer that ends as if it went well. It fails before the commit point, so it is retried.
    #[tokio::test]
    async fn a_stream_done_before_its_first_chunk_is_a_failed_attempt_not_a_commit() {
        let handoff = StreamHandoff::default();
        let error = read_first_event(body(b": keep-alive\n\ndata: [DONE]\n\n"), 1 << 10, &handoff)
            .await
            .expect_err("no chunk, no commit");
        assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");
        assert!(handoff.take().is_none());
    }

    /// Regression: a first event that is not a chunk (a proxy's text, JSON without `choices`) was committed, so
    /// the stream failed at once as `Malformed` with no retry and no fallback — although nothing had reached the
    /// caller yet. It is a failed attempt before the commit point, retried like a reset.
    #[tokio::test]
    async fn a_first_event_that_is_not_a_chunk_is_a_failed_attempt_not_a_commit() {
        for first in [
            &b"data: upstream busy, try later\n\ndata: [DONE]\n\n"[..],
            &b"data: {\"object\": \"chat.completion.chunk\"}\n\ndata: [DONE]\n\n"[..],
        ] {
            let handoff = StreamHandoff::default();
            let error = read_first_event(body(first), 1 << 10, &handoff)
                .await
                .expect_err("no chunk, no commit");
            assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");
            assert!(handoff.take().is_none());
        }
    }
}
