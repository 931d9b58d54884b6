//! [`HyperTransport`]: plain-HTTP attempts with hyper-util's pooled client, every other scheme through an
//! [`HttpTransport`].
//!
//! Why a second network transport: on the gateway's path reqwest was the largest single cost of a tool call —
//! measured with callgrind, 47,000 of the 184,000 user-space instructions a call took, 13,000 of them parsing
//! the upstream's URL twice more inside reqwest (its redirect layer and its response each call `Url::parse`,
//! IDNA included) on every request, which no caching on our side can reach. reqwest's HTTP/1 path is
//! hyper-util's legacy client with layers on top; for an `http://` upstream this transport uses that client
//! directly (no new dependency: reqwest already builds it), and keeps reqwest, with its TLS, for `https://`.
//!
//! What reqwest did that this keeps: `TCP_NODELAY` on, idle connections pooled per host for 90 s, `Host` set
//! from the URI, `accept: */*` when the request names none, errors sorted the same way. What it does not:
//! follow redirects — a tool upstream's 3xx comes back as its answer (an upstream URL comes only from the
//! configuration; a redirect would send the call, its key and the upstream's own headers somewhere else).

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderValue, Request, Response};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::Service;

use super::http::HttpTransport;
use super::read::read_answer;
use crate::{Body, CallContext, Error};

/// How long an idle pooled connection is kept (reqwest's default).
const POOL_IDLE: std::time::Duration = std::time::Duration::from_secs(90);

/// Sends each `http://` attempt with hyper-util's pooled HTTP/1 client and reads its answer as
/// [`HttpTransport`] does (at most its body limit; whole, or a streamed call's 2xx up to its commit point);
/// hands every other attempt (`https://`, a relative URI) to the [`HttpTransport`] it was built with, whose
/// body limit it shares.
///
/// Errors are sorted as [`HttpTransport`] sorts reqwest's: a connection that could not be made is
/// [`Error::Transport`] `{ sent: false }`, always safe to retry; anything after the request may have left —
/// including a body that fails midway — is `{ sent: true }`. Redirects are not followed (module docs).
///
/// ```
/// use ballast::transport::{HttpTransport, HyperTransport};
/// use bytes::Bytes;
/// use tower::ServiceExt as _;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let chaos = ballast_chaos::spawn(ballast_chaos::Profile::default()).await?;
/// let transport = HyperTransport::new(HttpTransport::new(reqwest::Client::new()).with_body_limit(64 * 1024));
/// let request = http::Request::post(chaos.url("/tools/lookup_order"))
///     .header("content-type", "application/json")
///     .body(Bytes::from_static(br#"{"op": "op-1", "order_id": "A-1"}"#))
///     .unwrap();
/// let answer = transport.oneshot(request).await.expect("answered");
/// assert_eq!(answer.status(), 200);
/// chaos.shutdown().await
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct HyperTransport {
    client: Client<HttpConnector, Full<Bytes>>,
    other_schemes: HttpTransport,
}

impl HyperTransport {
    /// A transport sending `http://` attempts itself and every other one through `other_schemes`, reading
    /// answers of at most `other_schemes`' body limit.
    pub fn new(other_schemes: HttpTransport) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .build(connector);
        HyperTransport {
            client,
            other_schemes,
        }
    }
}

impl Service<Request<Bytes>> for HyperTransport {
    type Response = Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Body>, Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Bytes>) -> Self::Future {
        if request.uri().scheme() != Some(&http::uri::Scheme::HTTP) || request.uri().authority().is_none() {
            return self.other_schemes.call(request);
        }
        let client = self.client.clone();
        let limit = self.other_schemes.body_limit();
        let stream = request
            .extensions()
            .get::<CallContext>()
            .and_then(CallContext::stream_read);
        // As reqwest: the extensions stay behind (nothing below reads ours), `accept` defaults to anything.
        request.extensions_mut().clear();
        request
            .headers_mut()
            .entry(http::header::ACCEPT)
            .or_insert(HeaderValue::from_static("*/*"));
        let request = request.map(Full::new);
        Box::pin(async move {
            let response = client.request(request).await.map_err(|error| {
                // A connection that could not be made: nothing left. Anything else: it may have.
                let sent = !error.is_connect();
                Error::transport(sent, error)
            })?;
            read_answer(response, limit, stream, |error| Error::transport(true, error)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt as _;

    use super::*;

    fn transport() -> HyperTransport {
        HyperTransport::new(HttpTransport::new(reqwest::Client::new()).with_body_limit(8))
    }

    /// Nothing listens: the request provably never left, so it is safe to retry.
    #[tokio::test]
    async fn a_refused_connection_was_never_sent() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let request = Request::post(format!("http://{addr}/tools/x"))
            .body(Bytes::new())
            .unwrap();
        let error = transport().oneshot(request).await.unwrap_err();
        assert!(matches!(error, Error::Transport { sent: false, .. }), "{error:?}");
    }

    /// A redirect is the upstream's answer, not followed: the upstream's URL comes only from the configuration.
    #[tokio::test]
    async fn a_redirect_is_the_upstreams_answer() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0; 4096];
            let read = socket.read(&mut request).await.unwrap();
            let request = String::from_utf8_lossy(&request[..read]).to_lowercase();
            socket
                .write_all(
                    b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:1/elsewhere\r\n\
                      content-length: 0\r\n\r\n",
                )
                .await
                .unwrap();
            request
        });
        let request = Request::post(format!("http://{addr}/tools/refund"))
            .body(Bytes::from_static(b"{}"))
            .unwrap();
        let answer = transport().oneshot(request).await.unwrap();
        assert_eq!(answer.status(), 307);
        let seen = upstream.await.unwrap();
        assert!(seen.starts_with("post /tools/refund http/1.1"), "{seen}");
        assert!(seen.contains(&format!("host: {addr}")), "{seen}");
        assert!(seen.contains("accept: */*"), "{seen}");
    }

    /// The body limit is the wrapped transport's, for plain HTTP too; a relative URI goes to the wrapped
    /// transport, which refuses it as never sent.
    #[tokio::test]
    async fn the_body_limit_and_other_schemes_are_the_wrapped_transports() {
        let chaos = ballast_chaos::spawn(ballast_chaos::Profile::default())
            .await
            .unwrap();
        let request = Request::get(chaos.url("/ledger")).body(Bytes::new()).unwrap();
        let error = transport().oneshot(request).await.unwrap_err();
        assert!(matches!(error, Error::BodyTooLarge { limit: 8 }), "{error:?}");
        let relative = Request::get("/ledger").body(Bytes::new()).unwrap();
        let error = transport().oneshot(relative).await.unwrap_err();
        assert!(matches!(error, Error::Transport { sent: false, .. }), "{error:?}");
        chaos.shutdown().await.unwrap();
    }
}
