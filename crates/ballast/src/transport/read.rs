//! Reading an answer's body, the one way every transport does: whole under a size limit, or — a streamed
//! request's 2xx — up to its commit point.

use bytes::{Buf as _, Bytes, BytesMut};
use http::Response;
use http_body::Body as HttpBody;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};

use crate::body::{Commit, CommitRule, HOLD_EVENTS, Named, StreamRead};
use crate::sse::SseDecoder;
use crate::{Body, BoxError, Error};

/// Reads `response`'s body as its request asked: a 2xx to a streamed request (`stream` is its commit rule) up to
/// the event that commits it, every other answer whole. At most `limit` bytes either way (for a stream: what is
/// read before its commit point, then each event). A body that fails midway is `body_error`'s error.
pub(crate) async fn read_answer<B>(
    response: Response<B>,
    limit: usize,
    stream: Option<StreamRead>,
    body_error: impl Fn(BoxError) -> Error,
) -> Result<Response<Body>, Error>
where
    B: HttpBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let (mut parts, body) = response.into_parts();
    if !(100..=599).contains(&parts.status.as_u16()) {
        // hyper reads any three digits; HTTP's statuses end at 599 (RFC 9110 §15). An answer outside them says
        // nothing a caller could act on — and passed on, a client would meet a status no HTTP library knows —
        // so it is a failed attempt after sending, like a cut connection (retried as that may be).
        return Err(Error::transport(
            true,
            format!(
                "the upstream answered with status {}, which is not an HTTP status (100-599)",
                parts.status.as_u16()
            ),
        ));
    }
    let body = match stream {
        Some(read) if parts.status.is_success() && (!read.events_only || is_event_stream(&parts.headers)) => {
            match read_to_commit(body, limit, read.commits, body_error).await? {
                Committed::Stream { body, named } => {
                    if let Some(named) = named {
                        parts.extensions.insert(Named(named));
                    }
                    body
                }
                Committed::Error { status, body } => {
                    parts.status = status;
                    parts.headers.insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    parts.headers.remove(http::header::CONTENT_LENGTH);
                    Body::whole(body)
                }
            }
        }
        _ => Body::whole(read_whole(body, limit, body_error).await?),
    };
    Ok(Response::from_parts(parts, body))
}

/// Whether an answer says it is a stream of server-sent events.
fn is_event_stream(headers: &http::HeaderMap) -> bool {
    (headers.get(http::header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// How a stream read up to its commit point turned out.
enum Committed {
    /// It committed: the bytes read so far and the rest, and the state its preamble named.
    Stream { body: Body, named: Option<String> },
    /// Its provider sent an error before any content: the attempt's answer is that error.
    Error { status: http::StatusCode, body: Bytes },
}

/// Reads all of `body`, refusing one longer than `limit` bytes — at once when its announced length says so.
async fn read_whole<B>(body: B, limit: usize, body_error: impl Fn(BoxError) -> Error) -> Result<Bytes, Error>
where
    B: HttpBody,
    B::Error: Into<BoxError>,
{
    if body.size_hint().lower() > u64::try_from(limit).unwrap_or(u64::MAX) {
        return Err(Error::BodyTooLarge { limit });
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(Error::BodyTooLarge { limit }),
        Err(error) => Err(body_error(error)),
    }
}

/// Reads server-sent events from `body` until one commits the stream (DESIGN.md, "Streaming"): the answer is then
/// a stream of the bytes read so far and the rest. Events of the preamble are held back ([`Commit::Hold`],
/// [`Commit::Named`]: the first name is the answer's [`Named`] extension; at most
/// [`HOLD_EVENTS`](HOLD_EVENTS) of them), and comments (keep-alives) never commit. Until the commit
/// nothing has reached the caller, so a stream that ends, fails or sends an event the rule refuses is a failed
/// attempt like a reset (sent: the upstream may have done the work), and an error event is the attempt's error
/// answer — retried or moved to a fallback by the layers above.
async fn read_to_commit<B>(
    body: B,
    limit: usize,
    commits: CommitRule,
    body_error: impl Fn(BoxError) -> Error,
) -> Result<Committed, Error>
where
    B: HttpBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let mut body: UnsyncBoxBody<Bytes, BoxError> = body
        .map_frame(|frame| frame.map_data(|mut data| data.copy_to_bytes(data.remaining())))
        .map_err(Into::into)
        .boxed_unsync();
    let mut read = BytesMut::new();
    let mut decoder = SseDecoder::new(limit);
    let mut held = 0;
    let mut named = None;
    loop {
        while let Some(event) = decoder.next_event().map_err(|_| Error::BodyTooLarge { limit })? {
            let commit = match commits(&event) {
                Commit::Named(name) => {
                    named.get_or_insert(name);
                    Commit::Hold
                }
                commit => commit,
            };
            match commit {
                Commit::Hold if held < HOLD_EVENTS => held += 1,
                Commit::Now | Commit::Hold | Commit::Named(_) => {
                    let body = Body::stream(read.freeze(), body, limit);
                    return Ok(Committed::Stream { body, named });
                }
                Commit::Error { status, body } => return Ok(Committed::Error { status, body }),
                Commit::Fail(reason) => return Err(Error::transport(true, reason)),
            }
        }
        let Some(frame) = body.frame().await else {
            return Err(Error::transport(
                true,
                "the stream ended before its commit point (no content event)",
            ));
        };
        let Ok(data) = frame.map_err(&body_error)?.into_data() else {
            continue;
        };
        if read.len() + data.len() > limit {
            return Err(Error::BodyTooLarge { limit });
        }
        decoder.push(&data);
        read.extend_from_slice(&data);
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::io;

    use http_body_util::{Full, StreamBody};

    use super::*;

    fn failed(error: BoxError) -> Error {
        Error::transport(true, error)
    }

    /// Commits at the first event, but fails on `[DONE]`, holds `hold` (and `name <id>`, naming `<id>`) and
    /// answers `quota` as a 429.
    fn rule(event: &str) -> Commit {
        match event {
            "[DONE]" => Commit::Fail("no chunk".into()),
            "hold" => Commit::Hold,
            name if name.starts_with("name ") => Commit::Named(name[5..].to_owned()),
            "quota" => Commit::Error {
                status: http::StatusCode::TOO_MANY_REQUESTS,
                body: Bytes::from_static(br#"{"error":{"code":"insufficient_quota"}}"#),
            },
            _ => Commit::Now,
        }
    }

    /// `rule` for any answer, as a model stream's.
    fn any(rule: CommitRule) -> StreamRead {
        StreamRead {
            commits: rule,
            events_only: false,
        }
    }

    fn answer(status: u16, body: &'static [u8]) -> Response<Full<Bytes>> {
        Response::builder()
            .status(status)
            .body(Full::new(Bytes::from_static(body)))
            .unwrap()
    }

    /// Regression: an upstream's status 999 was relayed to the caller.
    #[tokio::test]
    async fn a_status_outside_http_is_a_failed_attempt_after_sending() {
        for status in [600, 999] {
            let mut response = answer(200, b"{}");
            *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
            let error = read_answer(response, 1024, None, failed).await.unwrap_err();
            assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");
            assert!(error.to_string().contains(&format!("status {status}")), "{error}");
        }
        let mut response = answer(200, b"{}");
        *response.status_mut() = http::StatusCode::from_u16(599).unwrap();
        assert_eq!(
            read_answer(response, 1024, None, failed).await.unwrap().status(),
            599
        );
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        let read = read_answer(answer(200, b"hello"), 5, None, failed).await.unwrap();
        assert_eq!(read.body().as_bytes().unwrap(), "hello");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused() {
        let error = read_answer(answer(200, b"hello!"), 5, None, failed)
            .await
            .unwrap_err();
        assert!(matches!(error, Error::BodyTooLarge { limit: 5 }), "{error}");
        let chunks = futures::stream::iter([
            Ok::<_, Infallible>(http_body::Frame::data(Bytes::from_static(b"abc"))),
            Ok(http_body::Frame::data(Bytes::from_static(b"def"))),
        ]);
        let streamed = Response::new(StreamBody::new(chunks));
        let error = read_answer(streamed, 5, None, failed).await.unwrap_err();
        assert!(matches!(error, Error::BodyTooLarge { limit: 5 }), "{error}");
    }

    #[tokio::test]
    async fn a_body_that_fails_midway_is_the_transports_error() {
        let chunks = futures::stream::iter([
            Ok(http_body::Frame::data(Bytes::from_static(b"abc"))),
            Err(io::Error::new(io::ErrorKind::ConnectionReset, "reset")),
        ]);
        let failing = Response::new(StreamBody::new(chunks));
        let error = read_answer(failing, 1024, None, failed).await.unwrap_err();
        assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");
    }

    #[tokio::test]
    async fn a_streamed_2xx_is_read_up_to_the_event_that_commits_it() {
        let body = b": keep-alive\n\ndata: first\n\ndata: [DONE]\n\n";
        let read = read_answer(answer(200, body), 1024, Some(any(rule)), failed)
            .await
            .unwrap();
        assert!(read.body().is_stream());
        let stream = read.into_body().into_stream().expect("a stream");
        assert_eq!(stream.head, &body[..]);
        // An error answer to a streamed request is read whole.
        let error = read_answer(answer(503, b"busy"), 1024, Some(any(rule)), failed)
            .await
            .unwrap();
        assert_eq!(error.body().as_bytes().unwrap(), "busy");
    }

    #[tokio::test]
    async fn a_stream_that_fails_or_ends_before_its_commit_point_is_a_failed_attempt() {
        for body in [
            &b": keep-alive\n\ndata: [DONE]\n\n"[..],
            b": keep-alive\n\n",
            b"data: unfinished",
            b"",
        ] {
            let error = read_answer(answer(200, body), 1024, Some(any(rule)), failed)
                .await
                .unwrap_err();
            assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");
        }
        let keep_alives = b": keep-alive\n\n: keep-alive\n\n: keep-alive\n\n";
        let error = read_answer(answer(200, keep_alives), 16, Some(any(rule)), failed)
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::BodyTooLarge { limit: 16 }),
            "what is read before the commit is bounded: {error}"
        );
    }

    #[tokio::test]
    async fn a_preamble_is_held_back_with_the_status_and_commits_with_the_first_content() {
        let body = b"data: hold\n\n: keep-alive\n\ndata: hold\n\ndata: content\n\ndata: more\n\n";
        let read = read_answer(answer(200, body), 1024, Some(any(rule)), failed)
            .await
            .unwrap();
        let stream = read.into_body().into_stream().expect("a stream");
        assert_eq!(
            stream.head,
            &b"data: hold\n\n: keep-alive\n\ndata: hold\n\ndata: content\n\ndata: more\n\n"[..],
            "every byte read is handed on, the held events first"
        );
        // A preamble alone is no answer: the stream that ends after it failed before its commit point.
        let error = read_answer(answer(200, b"data: hold\n\n"), 1024, Some(any(rule)), failed)
            .await
            .unwrap_err();
        assert!(matches!(error, Error::Transport { sent: true, .. }), "{error}");
    }

    #[tokio::test]
    async fn the_first_name_a_preamble_gives_is_kept_on_the_answer() {
        let body = b"data: name first\n\ndata: hold\n\ndata: name second\n\ndata: content\n\n";
        let read = read_answer(answer(200, body), 1024, Some(any(rule)), failed)
            .await
            .unwrap();
        assert_eq!(read.extensions().get::<Named>(), Some(&Named("first".into())));
        let stream = read.into_body().into_stream().expect("a stream");
        assert_eq!(
            stream.head,
            &body[..],
            "a named event is held back and handed on like any other"
        );
        let unnamed = read_answer(
            answer(200, b"data: hold\n\ndata: content\n\n"),
            1024,
            Some(any(rule)),
            failed,
        )
        .await
        .unwrap();
        assert_eq!(unnamed.extensions().get::<Named>(), None);
    }

    #[tokio::test]
    async fn the_hold_is_bounded() {
        let mut body = b"data: hold\n\n".repeat(HOLD_EVENTS + 1);
        body.extend_from_slice(b"data: hold\n\n");
        let body: &'static [u8] = Box::leak(body.into_boxed_slice());
        let read = read_answer(answer(200, body), 4096, Some(any(rule)), failed)
            .await
            .unwrap();
        assert!(
            read.body().is_stream(),
            "committed after {} held events",
            HOLD_EVENTS
        );
    }

    #[tokio::test]
    async fn an_error_event_before_the_commit_point_is_the_attempts_error_answer() {
        let body = b"data: hold\n\ndata: quota\n\n";
        let read = read_answer(answer(200, body), 1024, Some(any(rule)), failed)
            .await
            .unwrap();
        assert_eq!(read.status(), 429);
        assert_eq!(read.headers()["content-type"], "application/json");
        assert_eq!(
            read.body().as_bytes().unwrap(),
            &br#"{"error":{"code":"insufficient_quota"}}"#[..]
        );
    }
}
