//! Transports: where an attempt leaves the stack, and where its whole answer is read.
//!
//! Every layer of the stack speaks `http::Request<Bytes>` in and `http::Response<Bytes>` out, so the transport
//! reads the whole response body within the attempt's timeout (the attempt layer bounds the transport's future)
//! and under a size limit. A body that fails midway is then a transport error of that attempt — retried, or
//! reported as `outcome_unknown`, by the same rules as a reset — rather than a surprise after the call "succeeded".
//!
//! Both transports sort failures the same way, because the retry decision depends on it: an error that proves
//! the request never left ([`Error::Transport`](crate::Error::Transport) `{ sent: false }`) is always safe to
//! retry; anything after the request may have reached the upstream is `{ sent: true }` or a timeout.
//!
//! - [`HttpTransport`] — over the network with reqwest.
//! - [`ServiceTransport`] — over any tower service in process (an axum `Router`: the chaos upstream in tests).
//!
//! ```
//! use ballast::{Error, HttpTransport};
//! use bytes::Bytes;
//! use tower::ServiceExt as _;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let chaos = ballast_chaos::spawn(ballast_chaos::Profile::default()).await?;
//! let transport = HttpTransport::new(reqwest::Client::new(), 64 * 1024);
//! let request = http::Request::post(chaos.url("/tools/lookup_order"))
//!     .header("content-type", "application/json")
//!     .body(Bytes::from_static(br#"{"op": "op-1", "order_id": "A-1"}"#))
//!     .unwrap();
//! let answer = transport.clone().oneshot(request).await.expect("answered");
//! assert_eq!(answer.status(), 200);
//! // A body over the limit is refused, not truncated.
//! let tiny = HttpTransport::new(reqwest::Client::new(), 8);
//! let request = http::Request::get(chaos.url("/ledger")).body(Bytes::new()).unwrap();
//! assert!(matches!(tiny.oneshot(request).await, Err(Error::BodyTooLarge { limit: 8 })));
//! chaos.shutdown().await
//! # }
//! ```

mod body;
mod http;
mod ready;
mod service;
mod urls;

pub use self::http::HttpTransport;
pub(crate) use self::http::sort_error;
pub(crate) use self::ready::{CallNow, call_now};
pub use self::service::ServiceTransport;
