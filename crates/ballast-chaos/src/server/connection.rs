//! Serving connections ourselves, so that a handler can reset its connection.
//!
//! `axum::serve` owns its sockets; here each accepted connection gets its own task that runs hyper's HTTP/1
//! connection and listens to the [`ConnectionHandle`] its requests carry: on a reset it takes the socket back
//! from hyper, sets `SO_LINGER` 0 and drops it — the kernel sends an RST and the client reads
//! "connection reset", with no byte of an answer. Shutdown is graceful (mini-redis style): stop accepting, let
//! every connection finish its in-flight request (hangs end when the server stops), then return.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::clock;
use super::lose::ConnectionHandle;
use crate::Window;

/// Accepts connections on `listener` and serves `router` on each until `shutdown` completes, then drains. During
/// each of the `closed` windows (from now) no connection is accepted: the listener is dropped, so connecting is
/// refused, and the connections open when the window starts are reset; it is bound again at the window's end.
pub(crate) async fn serve_router(
    listener: TcpListener,
    router: Router,
    stopping: CancellationToken,
    shutdown: impl Future<Output = ()>,
    closed: Vec<Window>,
) -> io::Result<()> {
    let addr = listener.local_addr()?;
    let started = clock::now().instant;
    let mut listener = Some(listener);
    let mut connections = JoinSet::new();
    // Cancelled when a closed window starts: every connection open then is reset.
    let mut closing = CancellationToken::new();
    let mut shutdown = pin!(shutdown);
    let mut failures = 0;
    loop {
        let age = clock::now().instant.duration_since(started);
        let inside = closed.iter().any(|w| w.start <= age && age < w.end);
        if inside && listener.is_some() {
            listener = None;
            closing.cancel();
            closing = CancellationToken::new();
        } else if !inside && listener.is_none() {
            listener = Some(TcpListener::bind(addr).await?);
        }
        let next_change = next_boundary(&closed, age).map(|at| started + at);
        tokio::select! {
            () = &mut shutdown => break,
            accepted = accept(listener.as_ref()) => match accepted {
                Ok((stream, _peer)) => {
                    failures = 0;
                    connections.spawn(serve_connection(stream, router.clone(), stopping.clone(), closing.clone()));
                }
                Err(err) => {
                    failures += 1;
                    survive_accept_error(err, failures).await?;
                }
            },
            () = sleep_until(next_change) => {}
            Some(_finished) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    stopping.cancel();
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// The next start or end of a window after `age`, if any.
fn next_boundary(windows: &[Window], age: Duration) -> Option<Duration> {
    windows
        .iter()
        .flat_map(|w| [w.start, w.end])
        .filter(|at| *at > age)
        .min()
}

/// The next connection on `listener`; never, while it is closed.
async fn accept(listener: Option<&TcpListener>) -> io::Result<(TcpStream, std::net::SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Until `at`; never, without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Serves one connection until it closes, a handler asks for a reset, a closed window starts (a reset too), or
/// (after draining) the server stops.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    stopping: CancellationToken,
    closing: CancellationToken,
) {
    // Best effort: small answers and SSE chunks leave at once; a failure only costs latency.
    let _ = stream.set_nodelay(true);
    let handle = ConnectionHandle::default();
    let signal = handle.clone();
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(handle.clone());
        router.clone().oneshot(request)
    });
    let mut conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(stream), service);
    let mut draining = false;
    loop {
        tokio::select! {
            _closed = &mut conn => return,
            () = signal.reset_requested() => break,
            () = closing.cancelled() => break,
            () = stopping.cancelled(), if !draining => {
                draining = true;
                std::pin::Pin::new(&mut conn).graceful_shutdown();
            }
        }
    }
    // A reset: take the socket back from hyper (dropping the in-flight request) and close it with an RST.
    let stream = conn.into_parts().io.into_inner();
    // Best effort: without it the close is a FIN, still without an answer.
    let _ = stream.set_zero_linger();
}

/// How many accept errors in a row the loop survives.
const MAX_ACCEPT_FAILURES: u32 = 6;

/// Decides whether the accept loop survives `err`, the `failures`-th in a row. An error of one connection is
/// skipped; any other (out of file descriptors, of memory) pauses the loop, doubling from 50 ms, so connections in
/// flight can free resources — the loop ends after [`MAX_ACCEPT_FAILURES`] in a row (mini-redis's rule).
async fn survive_accept_error(err: io::Error, failures: u32) -> io::Result<()> {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset, Interrupted};
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset | Interrupted
    ) {
        return Ok(());
    }
    if failures >= MAX_ACCEPT_FAILURES {
        return Err(err);
    }
    tokio::time::sleep(Duration::from_millis(50) * 2u32.pow(failures - 1)).await;
    Ok(())
}
