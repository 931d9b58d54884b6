//! [`HttpTransport`]: the attempt over the network, with reqwest.

use std::sync::Arc;
use std::task::{Context, Poll};

use ballast_config::DEFAULT_BODY_LIMIT;
use ballast_core::Instant;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use tower::Service;

use super::read::read_answer;
use super::urls::Urls;
use crate::{Body, BoxError, CallContext, Error, clock};

/// Sends each attempt with a [`reqwest::Client`] and reads its answer, at most its body limit: whole, or for a
/// streamed call's 2xx up to its commit point (see [the module](crate::transport::HttpTransport)'s transports).
///
/// The URL is the request's URI (absolute: `http://host:port/path`); method, headers and body go as they are.
/// reqwest's errors are sorted by what they say about the request:
/// - a connection that could not be made (refused, DNS, TLS handshake, a connect timeout — reqwest's
///   `is_connect`) or a request that could not be built (a relative URI): [`Error::Transport`] `{ sent: false }`,
///   always safe to retry;
/// - a timeout of the client's own (if it was built with one): [`Error::Timeout`], `after` the time the attempt
///   had run;
/// - anything else, including a body that fails midway: [`Error::Transport`] `{ sent: true }` — the upstream may
///   have acted.
///
/// A body over the limit is [`Error::BodyTooLarge`]. The attempt's timeout is the attempt layer's; the client
/// needs none. Any `https` URL works (rustls with the webpki roots).
#[derive(Clone, Debug)]
pub struct HttpTransport {
    client: reqwest::Client,
    body_limit: usize,
    /// Shared by clones, as the client is.
    urls: Arc<Urls>,
}

impl HttpTransport {
    /// A transport sending with `client` and reading answers of at most the configuration's default
    /// `server.body_limit` (8 MiB by default).
    pub fn new(client: reqwest::Client) -> Self {
        HttpTransport {
            client,
            body_limit: super::answer_limit(DEFAULT_BODY_LIMIT),
            urls: Arc::default(),
        }
    }

    /// The same transport reading answers of at most `limit` bytes (a config's `server.body_limit`).
    #[must_use]
    pub fn with_body_limit(mut self, limit: u64) -> Self {
        self.body_limit = super::answer_limit(limit);
        self
    }

    /// The most bytes of an answer it reads.
    pub(super) fn body_limit(&self) -> usize {
        self.body_limit
    }
}

impl Service<Request<Bytes>> for HttpTransport {
    type Response = Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Body>, Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let client = self.client.clone();
        let limit = self.body_limit;
        let stream = request
            .extensions()
            .get::<CallContext>()
            .and_then(CallContext::stream_read);
        let request = to_reqwest(request, &self.urls);
        Box::pin(async move {
            let start = clock::now();
            let request = request.map_err(|e| Error::transport(false, e))?;
            let response = client.execute(request).await.map_err(|e| sort_error(e, start))?;
            let response = Response::<reqwest::Body>::from(response);
            read_answer(response, limit, stream, |error| body_failed(error, start)).await
        })
    }
}

/// What a body that failed midway says about the attempt: reqwest's error sorted as any of its errors.
fn body_failed(error: BoxError, start: Instant) -> Error {
    match error.downcast::<reqwest::Error>() {
        Ok(error) => sort_error(*error, start),
        Err(other) => Error::transport(true, other),
    }
}

/// `request` as reqwest's own conversion makes it (method, URL, headers, body, version), its URL parsed once per
/// URI ([`Urls`]). The extensions stay behind: reqwest reads only its own there (types it does not export), and
/// hands none to the connection. A URI that does not parse goes through reqwest's conversion, for its error.
fn to_reqwest(request: Request<Bytes>, urls: &Urls) -> Result<reqwest::Request, reqwest::Error> {
    let Some(url) = urls.url_for(request.uri()) else {
        return reqwest::Request::try_from(request);
    };
    let (parts, body) = request.into_parts();
    let mut converted = reqwest::Request::new(parts.method, url);
    *converted.headers_mut() = parts.headers;
    *converted.body_mut() = Some(body.into());
    *converted.version_mut() = parts.version;
    Ok(converted)
}

/// What a reqwest error says about the request (see [`HttpTransport`]).
fn sort_error(error: reqwest::Error, start: Instant) -> Error {
    if error.is_connect() || error.is_builder() {
        Error::transport(false, error)
    } else if error.is_timeout() {
        Error::timeout(clock::now().saturating_duration_since(start))
    } else {
        Error::transport(true, error)
    }
}
