//! Accepting connections, each bounded in time, all bounded in number (DESIGN.md, "The open network").
//!
//! Why our own accept loop and not `axum::serve`: axum serves each connection with hyper's defaults and no timer,
//! so a caller that sends its headers slowly, or nothing at all, holds its connection (and a file descriptor)
//! forever, and there is no cap: 1 100 idle sockets under `ulimit -n 1024` locked every caller out, `/healthz`
//! included. hyper has the pieces but one timer (`header_read_timeout`, which also bounds the idle time between
//! requests), so the two timeouts of Envoy and Go are kept here, per connection:
//!
//! - **header timeout**: from a new connection's accept, or from the first byte of a kept-alive connection's
//!   next request, to the end of that request's headers. A connection past it is closed without an answer (no
//!   request was read to answer).
//! - **idle timeout**: from the end of an answer to the first byte of the next request. A connection past it is
//!   closed gracefully (hyper closes an idle connection at once).
//! - **a cap** on open connections ([`limit`] sets it below the file limit). At the cap, a new connection takes
//!   the place of the open one idle the longest (waiting for a request, or still sending its headers: either
//!   way nothing of it is in flight), as nginx reuses idle keep-alive connections; when every connection has a
//!   request in flight, the new one is answered `503 overloaded` at once and closed. So idle or slow sockets,
//!   however many, never keep a well-behaved caller out.
//!
//! A request in flight is bounded by its own deadline and by `server.body_timeout` for its body (`body.rs`),
//! never cut here. On shutdown every connection is told to finish what it has in flight and close.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use ballast_core::Instant;
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tower::Service as _;

use ballast::clock;

/// What bounds the connections of one listener.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    /// Open connections at most.
    pub(crate) max: usize,
    /// The listener's name in metrics: `main` or `admin`.
    pub(crate) listener: &'static str,
}

/// What a listener's connections did, for `/status`: open now, the cap, and how many were evicted to make room
/// or refused because every one had a request in flight.
#[derive(Debug, Default)]
pub(crate) struct ConnectionStats {
    open: AtomicUsize,
    max: AtomicUsize,
    evicted: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
}

impl ConnectionStats {
    /// As JSON for `/status`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "open": self.open.load(Ordering::Relaxed),
            "max": self.max.load(Ordering::Relaxed),
            "evicted": self.evicted.load(Ordering::Relaxed),
            "refused": self.refused.load(Ordering::Relaxed),
            "timed_out": self.timed_out.load(Ordering::Relaxed),
        })
    }
}

/// Serves `router` on `listener` under `limits` until `stop` becomes true; then stops accepting, tells every
/// connection to finish what it has in flight and close, and returns once they all have.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stats: Arc<ConnectionStats>,
    mut stop: watch::Receiver<bool>,
) {
    stats.max.store(limits.max, Ordering::Relaxed);
    let open = Arc::new(Open::default());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let (stream, _peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors (or another transient failure): wait a little rather than spin.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        without_nagle(&stream);
        if open.len() >= limits.max && !open.evict_idlest(&stats, limits.listener) {
            refuse(stream, &stats, limits.listener);
            continue;
        }
        let connection = open.add();
        stats.open.fetch_add(1, Ordering::Relaxed);
        crate::metrics::connections_open(limits.listener, 1.0);
        let (router, stop, stats, open) = (
            router.clone(),
            stop.clone(),
            Arc::clone(&stats),
            Arc::clone(&open),
        );
        tokio::spawn(async move {
            serve_connection(stream, router, limits, &connection, stop, &stats).await;
            open.remove(&connection);
            stats.open.fetch_sub(1, Ordering::Relaxed);
            crate::metrics::connections_open(limits.listener, -1.0);
        });
    }
    drop(listener);
    open.drained().await;
}

/// `TCP_NODELAY` on a connection. Without it (axum's default, and the kernel's), Nagle's algorithm holds each small
/// write while an earlier one is unacknowledged: every event of a stream after the first waited for the caller's
/// delayed ACK (up to 40 ms on Linux), and streams through the gateway were capped near 720 a second.
pub(crate) fn without_nagle(stream: &TcpStream) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "could not set TCP_NODELAY on a connection");
    }
}

/// The answer to a connection over the cap when none can make room: the gateway's problem+json, as bytes.
fn refusal() -> &'static [u8] {
    static REFUSAL: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    REFUSAL.get_or_init(|| {
        let body = serde_json::json!({
            "type": "urn:ballast:overloaded",
            "title": "Too many connections",
            "status": 503,
            "code": "overloaded",
            "detail": "every connection the gateway may hold has a request in flight; nothing was read; retry shortly",
        })
        .to_string();
        format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\nballast-code: overloaded\r\n\
             ballast-shed: connections\r\nx-should-retry: true\r\nretry-after: 1\r\nconnection: close\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    })
}

/// Answers a connection over the cap `503` without reading it, and closes it — at once, holding no descriptor.
fn refuse(stream: TcpStream, stats: &ConnectionStats, listener: &'static str) {
    stats.refused.fetch_add(1, Ordering::Relaxed);
    crate::metrics::connection_event(listener, "refused", 1);
    // The kernel's send buffer takes the whole answer; what would not fit is dropped with the connection.
    let _ = stream.try_write(refusal());
    drop(stream);
}

/// The open connections, for eviction at the cap and the drain at the end.
#[derive(Default)]
struct Open {
    connections: Mutex<Vec<Arc<Activity>>>,
    /// Signalled when the last connection closes.
    empty: Notify,
}

impl Open {
    fn len(&self) -> usize {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn add(&self) -> Arc<Activity> {
        let activity = Arc::new(Activity::new(clock::now()));
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&activity));
        activity
    }

    fn remove(&self, activity: &Arc<Activity>) {
        let mut connections = self.connections.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = connections.iter().position(|c| Arc::ptr_eq(c, activity)) {
            connections.swap_remove(index);
        }
        if connections.is_empty() {
            self.empty.notify_waiters();
        }
    }

    /// Tells the connection idle the longest (nothing in flight) to close, making room; false when every one has
    /// a request in flight. One scan, at the cap only.
    fn evict_idlest(&self, stats: &ConnectionStats, listener: &'static str) -> bool {
        let connections = self.connections.lock().unwrap_or_else(PoisonError::into_inner);
        let idlest = connections
            .iter()
            .filter(|c| c.in_flight.load(Ordering::Acquire) == 0 && !c.evicted.load(Ordering::Acquire))
            .min_by_key(|c| c.last_active());
        let Some(idlest) = idlest else {
            return false;
        };
        idlest.evicted.store(true, Ordering::Release);
        idlest.changed.notify_one();
        stats.evicted.fetch_add(1, Ordering::Relaxed);
        crate::metrics::connection_event(listener, "evicted", 1);
        true
    }

    /// Once every connection has closed.
    async fn drained(&self) {
        loop {
            let notified = self.empty.notified();
            if self.len() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// What one connection is doing, as its reads, its requests and its answers tell.
struct Activity {
    /// Requests whose answer has not been sent to its end.
    in_flight: AtomicUsize,
    /// When the connection last read a byte, or an answer ended (nanoseconds on the core's timeline).
    last: AtomicU64,
    /// When the head of the next request began (its first byte; a new connection: its accept), or 0 when the
    /// connection is between requests with nothing read.
    head_since: AtomicU64,
    /// Told to close for room.
    evicted: std::sync::atomic::AtomicBool,
    /// Signalled when any of the above changes what the connection waits for.
    changed: Notify,
}

impl Activity {
    fn new(now: Instant) -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(now.as_nanos()),
            head_since: AtomicU64::new(now.as_nanos()),
            evicted: std::sync::atomic::AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn last_active(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }

    /// Bytes arrived.
    fn read(&self) {
        let now = clock::now().as_nanos();
        self.last.store(now, Ordering::Relaxed);
        if self.in_flight.load(Ordering::Acquire) == 0
            && self
                .head_since
                .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            // The next request's head began: the header timeout runs from here.
            self.changed.notify_one();
        }
    }

    /// A request's head was read: it is in flight until its answer ends.
    fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(0, Ordering::Release);
        InFlight(Arc::clone(self))
    }

    /// What the connection waits for now, and until when.
    fn waiting(&self, limits: &Limits) -> Waiting {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Waiting::Request;
        }
        match self.head_since.load(Ordering::Acquire) {
            0 => Waiting::Idle(Instant::from_nanos(self.last.load(Ordering::Relaxed)) + limits.idle_timeout),
            since => Waiting::Head(Instant::from_nanos(since) + limits.header_timeout),
        }
    }
}

/// What a connection waits for.
enum Waiting {
    /// A request in flight: bounded by its own deadline, not here.
    Request,
    /// The next request's first byte, until then.
    Idle(Instant),
    /// The rest of a request's head, until then.
    Head(Instant),
}

/// A request in flight; its end (the answer's body dropped by hyper, sent or not) starts the idle time.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.last.store(clock::now().as_nanos(), Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.changed.notify_one();
        }
    }
}

/// Serves one connection until it closes, its timeouts end it, it is evicted, or the server stops.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: Limits,
    activity: &Arc<Activity>,
    mut stop: watch::Receiver<bool>,
    stats: &ConnectionStats,
) {
    let io = TokioIo::new(Watched {
        stream,
        activity: Arc::clone(activity),
    });
    let service = Tracked {
        router,
        activity: Arc::clone(activity),
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // This module keeps the header and idle timeouts; hyper's one timer would conflate them.
    builder.header_read_timeout(None);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut closing = false;
    loop {
        let changed = activity.changed.notified();
        let wake = match activity.waiting(&limits) {
            Waiting::Request => None,
            Waiting::Idle(at) | Waiting::Head(at) => Some(clock::to_tokio(at)),
        };
        let expired = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "a connection ended with an error");
                }
                return;
            }
            _ = stop.wait_for(|stop| *stop), if !closing => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            () = changed => {}
            () = expired => {}
        }
        let now = clock::now();
        // Evicted for room, or the server stopping: a connection with nothing in flight goes now.
        let evicted = activity.evicted.load(Ordering::Acquire) || *stop.borrow();
        match activity.waiting(&limits) {
            // Mid-head (or a new connection that sent nothing): no request to finish, so close at once.
            Waiting::Head(at) if evicted || now >= at => {
                if !evicted {
                    stats.timed_out.fetch_add(1, Ordering::Relaxed);
                    crate::metrics::connection_event(limits.listener, "header_timeout", 1);
                }
                return;
            }
            // Between requests: hyper closes an idle connection at once, after the last answer's bytes.
            Waiting::Idle(at) if (evicted || now >= at) && !closing => {
                if !evicted {
                    stats.timed_out.fetch_add(1, Ordering::Relaxed);
                    crate::metrics::connection_event(limits.listener, "idle_timeout", 1);
                }
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            _ => {}
        }
    }
}

/// The router, for one connection: each request counted in flight until its answer's body is dropped.
#[derive(Clone)]
struct Tracked {
    router: Router,
    activity: Arc<Activity>,
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: Request<Incoming>) -> Answer {
        let in_flight = self.activity.request();
        // axum's router is always ready and cheap to clone (what `axum::serve` does for every request).
        let mut router = self.router.clone();
        let answer = router.call(request.map(Body::new));
        Box::pin(async move {
            let response = match answer.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok(response.map(|body| TrackedBody {
                inner: body,
                _in_flight: in_flight,
            }))
        })
    }
}

/// An answer's body, holding its request in flight until hyper drops it.
struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The connection's socket, telling its [`Activity`] when bytes arrive.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Descriptors the process keeps for itself beyond its listeners' connections: stdio, the listeners, the
/// runtime's epoll and timers, DNS, the store's files.
const PROCESS_FILES: u64 = 64;

/// Connections of the admin listener at most (counted apart from `listen`'s).
pub(crate) const ADMIN_CONNECTIONS: usize = 64;

/// The cap on `listen`'s connections: `max_connections`, lowered to what the file limit leaves after the
/// process's own descriptors, one per concurrent upstream call (`upstream_calls`) and the admin listener's
/// connections — the soft limit first raised as far as needed and the hard limit allows. With it, why it was
/// lowered, when it was.
pub(crate) fn limit(max_connections: u32, upstream_calls: u64, admin: bool) -> (usize, Option<String>) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let wanted = u64::from(max_connections);
    let kept = PROCESS_FILES + upstream_calls + if admin { ADMIN_CONNECTIONS as u64 } else { 0 };
    let mut files = getrlimit(Resource::Nofile);
    let needed = wanted.saturating_add(kept);
    if files.current.is_some_and(|soft| soft < needed) {
        let raised = files.maximum.map_or(needed, |hard| hard.min(needed));
        let new = Rlimit {
            current: Some(raised),
            maximum: files.maximum,
        };
        if setrlimit(Resource::Nofile, new).is_ok() {
            files = getrlimit(Resource::Nofile);
        }
    }
    let Some(soft) = files.current else {
        return (max_connections as usize, None);
    };
    let room = soft.saturating_sub(kept);
    if room >= wanted {
        return (max_connections as usize, None);
    }
    let cap = room.max(1);
    let why = format!(
        "server.max_connections lowered from {max_connections} to {cap}: the process may open {soft} files \
         (ulimit -n, hard limit {}) and keeps {kept} for itself, its upstream calls and the admin listener; raise \
         the limit (LimitNOFILE= in systemd, ulimit -n) to serve more connections",
        files
            .maximum
            .map_or_else(|| "unlimited".to_owned(), |hard| hard.to_string()),
    );
    (usize::try_from(cap).unwrap_or(usize::MAX), Some(why))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A fresh connection with `bytes` written on it (a raw client).
    async fn send(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(bytes).await.unwrap();
        stream
    }

    const LIMITS: Limits = Limits {
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(75),
        max: 4,
        listener: "main",
    };

    async fn start(limits: Limits) -> (SocketAddr, Arc<ConnectionStats>, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
        let stats = Arc::new(ConnectionStats::default());
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(serve(listener, router, limits, Arc::clone(&stats), stopped));
        (addr, stats, stop)
    }

    /// Reads what the peer sends until it closes (bounded by the paused clock's auto-advance).
    async fn answer(stream: &mut TcpStream) -> String {
        let mut text = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(600), stream.read_to_end(&mut text)).await;
        String::from_utf8_lossy(&text).into_owned()
    }

    const GET: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_sends_nothing_or_half_a_head_is_closed_at_the_header_timeout() {
        let (addr, stats, _stop) = start(LIMITS).await;
        let started = clock::now();
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let mut half = send(addr, b"GET /healthz HTTP/1.1\r\nhost:").await;
        assert_eq!(answer(&mut silent).await, "", "closed without an answer");
        assert_eq!(answer(&mut half).await, "");
        let waited = clock::now().saturating_duration_since(started);
        assert!(
            waited >= LIMITS.header_timeout && waited < LIMITS.header_timeout * 2,
            "{waited:?}"
        );
        assert_eq!(stats.timed_out.load(Ordering::Relaxed), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_alive_connection_is_closed_at_the_idle_timeout_not_the_header_timeout() {
        let (addr, _stats, _stop) = start(LIMITS).await;
        let mut stream = send(addr, GET).await;
        let mut buf = [0u8; 1024];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        let answered = clock::now();
        assert_eq!(answer(&mut stream).await, "", "then closed, idle");
        let idle = clock::now().saturating_duration_since(answered);
        assert!(
            idle >= LIMITS.idle_timeout && idle < LIMITS.idle_timeout + Duration::from_secs(1),
            "{idle:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_a_new_connection_takes_the_place_of_the_idlest() {
        let (addr, stats, _stop) = start(LIMITS).await;
        let mut idle = Vec::new();
        for _ in 0..LIMITS.max {
            idle.push(TcpStream::connect(addr).await.unwrap());
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        // A well-behaved caller past the cap is served: the oldest idle connection made room.
        let mut caller = send(addr, GET).await;
        let mut buf = [0u8; 1024];
        let n = caller.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        assert_eq!(answer(&mut idle[0]).await, "", "the idlest was closed");
        assert_eq!(stats.evicted.load(Ordering::Relaxed), 1);
        assert!(stats.open.load(Ordering::Relaxed) <= LIMITS.max);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_with_every_connection_busy_a_new_one_is_refused_at_once() {
        let limits = Limits { max: 1, ..LIMITS };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (release, released) = watch::channel(false);
        let router = Router::new().route(
            "/slow",
            axum::routing::get(move || {
                let mut released = released.clone();
                async move {
                    let _ = released.wait_for(|r| *r).await;
                    "done"
                }
            }),
        );
        let stats = Arc::new(ConnectionStats::default());
        let (_stop, stopped) = watch::channel(false);
        tokio::spawn(serve(listener, router, limits, Arc::clone(&stats), stopped));
        let mut busy = send(addr, b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n").await;
        tokio::time::advance(Duration::from_millis(10)).await;
        let mut refused = send(addr, GET).await;
        let text = answer(&mut refused).await;
        assert!(text.starts_with("HTTP/1.1 503"), "{text}");
        assert!(
            text.contains("x-should-retry: true") && text.contains("retry-after: 1"),
            "{text}"
        );
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        let body: serde_json::Value = serde_json::from_str(body).expect("its length is right");
        assert_eq!(body["code"], "overloaded");
        assert_eq!(stats.refused.load(Ordering::Relaxed), 1);
        release.send_replace(true);
        let mut buf = [0u8; 1024];
        let n = busy.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    }

    /// Regression: the gateway's connections kept Nagle's algorithm on, and a stream's events after the first
    /// waited for the caller's delayed ACK.
    #[tokio::test]
    async fn connections_are_served_with_tcp_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (accepted, _) = accepted.unwrap();
        without_nagle(&accepted);
        assert!(accepted.nodelay().unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_closes_idle_connections_and_lets_requests_in_flight_finish() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "done"
            }),
        );
        let stats = Arc::new(ConnectionStats::default());
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(serve(listener, router, LIMITS, Arc::clone(&stats), stopped));
        let mut idle = TcpStream::connect(addr).await.unwrap();
        let mut busy = send(addr, b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n").await;
        tokio::time::advance(Duration::from_millis(10)).await;
        stop.send_replace(true);
        assert_eq!(answer(&mut idle).await, "", "closed at once");
        let text = answer(&mut busy).await;
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("done"),
            "finished, then closed: {text}"
        );
        server.await.unwrap();
        assert_eq!(stats.open.load(Ordering::Relaxed), 0);
    }
}
