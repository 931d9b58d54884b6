//! Accepting connections, each bounded in time, all bounded in number (DESIGN.md, "The open network").
//!
//! Why our own accept loop and not `axum::serve`: axum serves each connection with hyper's defaults and no timer,
//! so a caller that sends its headers slowly, or nothing at all, holds its connection (and a file descriptor)
//! forever, and there is no cap: 1 100 idle sockets under `ulimit -n 1024` locked every caller out, `/healthz`
//! included. hyper has the pieces but one timer (`header_read_timeout`, which also bounds the idle time between
//! requests), so the timeouts of Envoy, nginx and Go are kept here, per connection (`activity.rs` decides, from
//! what the connection's socket, requests and answers did):
//!
//! - **header timeout**: from a new connection's accept, or from the first byte of a kept-alive connection's
//!   next request, to the end of that request's headers. A connection past it is closed without an answer (no
//!   request was read to answer).
//! - **idle timeout**: from the end of an answer to the first byte of the next request. A connection past it is
//!   closed gracefully (hyper closes an idle connection at once; one that cannot send its last bytes is dropped a
//!   second later).
//! - **send timeout**: a caller that reads none of its answer for that long — the socket refusing every write —
//!   is dropped, whatever it has in flight: nothing can reach it, and it would hold its slot forever.
//! - **a cap** on open connections (`limit.rs` sets it below the file limit). At the cap, a new connection takes
//!   the place of the open one idle the longest (waiting for a request, or still sending its headers: nothing of
//!   it in flight), as nginx reuses idle keep-alive connections, else of one whose caller has not read for a
//!   second; when every connection has a request in flight, the new one is answered `503 overloaded` at once and
//!   closed. So idle, slow or unread sockets, however many, never keep a well-behaved caller out.
//!
//! A request in flight is otherwise bounded by its own deadline and by `server.body_timeout` for its body
//! (`body.rs`), never cut here. On shutdown every connection finishes what it has in flight and closes.

mod activity;
mod limit;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use ballast::clock;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

use activity::{Activity, Step, Tracked, Watched, eviction_key, next_step};
pub(crate) use limit::{ADMIN_CONNECTIONS, limit};

/// What bounds the connections of one listener.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) send_timeout: Duration,
    /// Open connections at most.
    pub(crate) max: usize,
    /// The listener's name in metrics: `main` or `admin`.
    pub(crate) listener: &'static str,
}

/// What a listener's connections did, for `/status`: open now, the cap, how many were evicted to make room,
/// refused because every one had a request in flight, or closed by a timeout.
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

/// The answer to a connection over the cap when none can make room, as bytes: no request was read, and the
/// answer is written to the socket before hyper ever sees it, so it is composed here rather than by `AppError`
/// (same code, same headers: `x-should-retry: true`, a jittered `Retry-After` of 1-2 s, as `edge::finish` sends).
fn refusal() -> Vec<u8> {
    let wait = crate::error::jittered(Duration::from_secs(1), &mut rand::rng());
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
         ballast-shed: connections\r\nx-should-retry: true\r\nretry-after: {}\r\nretry-after-ms: {}\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        wait.as_millis().div_ceil(1000),
        wait.as_millis(),
        body.len()
    )
    .into_bytes()
}

/// Answers a connection over the cap `503` without serving it, and closes it — at once, holding no descriptor.
fn refuse(stream: TcpStream, stats: &ConnectionStats, listener: &'static str) {
    stats.refused.fetch_add(1, Ordering::Relaxed);
    crate::metrics::connection_event(listener, "refused", 1);
    // What the caller already sent is read (and dropped) first: closing a socket with unread bytes resets it, and
    // the caller would see the reset, not the answer. The kernel's send buffer takes the whole answer.
    let mut sent = [0u8; 4096];
    let _ = stream.try_read(&mut sent);
    let _ = stream.try_write(&refusal());
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

    /// Tells the connection that is the best victim (`eviction_key`) to close, making room; false when every one
    /// has a request in flight. One scan, at the cap only.
    fn evict_idlest(&self, stats: &ConnectionStats, listener: &'static str) -> bool {
        let now = clock::now();
        let connections = self.connections.lock().unwrap_or_else(PoisonError::into_inner);
        let victim = (connections.iter())
            .filter_map(|c| eviction_key(&c.snapshot(), now).map(|key| (key, c)))
            .min_by_key(|(key, _)| *key);
        let Some((_, victim)) = victim else {
            return false;
        };
        victim.evict();
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
    let mut closing_since = None;
    let mut stopped = None;
    loop {
        let changed = activity.changed.notified();
        if stopped.is_none() && *stop.borrow() {
            stopped = Some(clock::now());
        }
        let step = next_step(
            &activity.snapshot(),
            &limits,
            clock::now(),
            stopped,
            closing_since,
        );
        let wake = match step {
            Step::Wait(wake) => wake,
            Step::Drop(why) => {
                count_timeout(why, &limits, stats);
                return;
            }
            Step::CloseGracefully(why) => {
                count_timeout(why, &limits, stats);
                closing_since = Some(clock::now());
                connection.as_mut().graceful_shutdown();
                continue;
            }
        };
        let expired = async {
            match wake {
                Some(at) => tokio::time::sleep_until(clock::to_tokio(at)).await,
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
            _ = stop.wait_for(|stop| *stop), if stopped.is_none() => {}
            () = changed => {}
            () = expired => {}
        }
    }
}

/// Counts a connection closed by one of its timeouts.
fn count_timeout(why: activity::Why, limits: &Limits, stats: &ConnectionStats) {
    if let Some(event) = why.timeout_event() {
        stats.timed_out.fetch_add(1, Ordering::Relaxed);
        crate::metrics::connection_event(limits.listener, event, 1);
    }
}

/// The limits of the tests (those of `activity.rs` and `tests.rs`).
#[cfg(test)]
const TEST_LIMITS: Limits = Limits {
    header_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(75),
    send_timeout: Duration::from_secs(60),
    max: 4,
    listener: "main",
};

#[cfg(test)]
mod tests;
