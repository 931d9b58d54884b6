//! Transports: where an attempt leaves the stack, and where its answer is read.
//!
//! Every transport is a tower service from `http::Request<Bytes>` to `http::Response<`[`Body`]`>` with
//! [`Error`]: the one shape the layers above speak, for tools and models alike. It reads the answer
//! within the attempt's timeout (the attempt layer bounds the transport's future) and under a size limit, the same
//! way for every transport (`read.rs`):
//! - whole, for every answer but one: a body that fails midway is then a transport error of that attempt —
//!   retried, or reported as `outcome_unknown`, by the same rules as a reset — rather than a surprise after the
//!   call "succeeded";
//! - for the 2xx of a streamed call (a [`CallContext`](crate::context::CallContext) with a commit rule, set by the chat
//!   client), up to the event that commits it: the answer is then a [`Body`] stream, the rest unread. Until that
//!   event the stream is an attempt like any other, so the attempt's timeout bounds the time to it.
//!
//! Every transport sorts failures the same way, because the retry decision depends on it: an error that proves
//! the request never left ([`Error::Transport`] `{ sent: false }`) is always safe to
//! retry; anything after the request may have reached the upstream is `{ sent: true }` or a timeout.
//!
//! - [`HttpTransport`] — over the network with reqwest.
//! - [`HyperTransport`] — `http://` over the network with hyper-util's pooled client (what reqwest is built on,
//!   without its per-request URL parsing and redirect layer), anything else through an [`HttpTransport`]: the
//!   gateway's transport.
//! - [`ServiceTransport`] — over any tower service in process (an axum `Router`: the chaos upstream in tests).
//!
//! Whatever a client is built over is a [`Transport`]: the one name for that shape, so that a builder says
//! `T: Transport` and not the service bound in full.
//!
//! `HttpTransport` and `ServiceTransport` are built alike: `new` reads answers up to the configuration's default
//! `server.body_limit` (8 MiB by default), and
//! `.with_body_limit(config.server.body_limit)` sets another; a `HyperTransport` reads up to the limit of the
//! `HttpTransport` it wraps.
//!
//! ```
//! use ballast::{Error, transport::HttpTransport};
//! use bytes::Bytes;
//! use tower::ServiceExt as _;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let chaos = ballast_chaos::spawn(ballast_chaos::Profile::default()).await?;
//! let transport = HttpTransport::new(reqwest::Client::new()).with_body_limit(64 * 1024);
//! let request = http::Request::post(chaos.url("/tools/lookup_order"))
//!     .header("content-type", "application/json")
//!     .body(Bytes::from_static(br#"{"op": "op-1", "order_id": "A-1"}"#))
//!     .unwrap();
//! let answer = transport.clone().oneshot(request).await.expect("answered");
//! assert_eq!(answer.status(), 200);
//! // A body over the limit is refused, not truncated.
//! let tiny = HttpTransport::new(reqwest::Client::new()).with_body_limit(8);
//! let request = http::Request::get(chaos.url("/ledger")).body(Bytes::new()).unwrap();
//! assert!(matches!(tiny.oneshot(request).await, Err(Error::BodyTooLarge { limit: 8 })));
//! chaos.shutdown().await
//! # }
//! ```

#[cfg(feature = "http")]
mod http;
#[cfg(feature = "http")]
mod hyper_http;
mod read;
mod service;
#[cfg(feature = "http")]
mod urls;

#[cfg(feature = "http")]
pub use self::http::HttpTransport;
#[cfg(feature = "http")]
pub use self::hyper_http::HyperTransport;
pub use self::service::ServiceTransport;
use crate::body::Body;

use bytes::Bytes;
use tower::Service;

use crate::Error;

/// What a client sends its attempts through: a tower service from `http::Request<Bytes>` to an [`Answer`] (an
/// `http::Response` whose body becomes a [`Body`]), failing with [`Error`] — [`HttpTransport`],
/// [`HyperTransport`], [`ServiceTransport`], or a test's own service of that shape. The bound, written once:
/// every such service is a `Transport` by the one blanket impl, and nothing else can be one (the impl is sealed
/// by coherence), so the bound can change without breaking a caller.
pub trait Transport:
    Service<::http::Request<Bytes>, Response: Answer, Error = Error, Future: Send + 'static>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<T> Transport for T
where
    T: Service<::http::Request<Bytes>, Error = Error> + Clone + Send + Sync + 'static,
    T::Future: Send + 'static,
    T::Response: Answer,
{
}

/// A transport's answer: an `http::Response` whose body becomes a [`Body`] (`Body` itself, `Bytes`, a `String`,
/// ...).
pub trait Answer: 'static {
    /// The answer with its body as a [`Body`].
    fn into_answer(self) -> ::http::Response<Body>;
}

impl<B: Into<Body> + 'static> Answer for ::http::Response<B> {
    fn into_answer(self) -> ::http::Response<Body> {
        self.map(Into::into)
    }
}

/// The most bytes of an answer read: a config's `body_limit` (a `u64`), as far as this machine can hold.
fn answer_limit(limit: u64) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}
