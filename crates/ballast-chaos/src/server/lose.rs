//! Losing an answer: hanging, and resetting the connection.
//!
//! A handler cannot close its own TCP connection — axum hands it a request, not a socket. Under [`super::serve`]
//! every request carries a [`ConnectionHandle`]; the handler asks it for a reset and waits, and the connection's
//! task drops the socket with `SO_LINGER` 0, so the client reads a real RST and no byte of an answer. Under a
//! bare [`super::router`] there is no handle: the handler answers with a body that fails at once, hyper then
//! abandons the response and closes the connection — the client sees the connection close without a complete
//! answer (an EOF, not an RST).

use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::LoseMode;

/// The longest a hang lasts: long enough for any client timeout to fire, short enough that nothing leaks.
pub(crate) const HANG_BOUND: Duration = Duration::from_secs(600);

/// The way to reset the connection a request arrived on (only under [`super::serve`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct ConnectionHandle(CancellationToken);

impl ConnectionHandle {
    /// Asks the connection's task to drop the socket with an RST.
    pub(crate) fn reset(&self) {
        self.0.cancel();
    }

    /// Fires when a handler asked for a reset.
    pub(crate) async fn reset_requested(&self) {
        self.0.cancelled().await;
    }
}

/// Loses the answer as `mode` says.
pub(crate) async fn lose(
    mode: LoseMode,
    stopping: &CancellationToken,
    conn: Option<ConnectionHandle>,
) -> Response {
    match mode {
        LoseMode::Hang => hang(stopping, conn).await,
        LoseMode::Reset => reset(conn).await,
    }
}

/// Never answers: waits until the client goes away (hyper then drops this future), the server stops, or
/// [`HANG_BOUND`] passes — then resets the connection.
pub(crate) async fn hang(stopping: &CancellationToken, conn: Option<ConnectionHandle>) -> Response {
    tokio::select! {
        () = tokio::time::sleep(HANG_BOUND) => {}
        () = stopping.cancelled() => {}
    }
    reset(conn).await
}

/// Resets the connection without an answer (see the module docs for a bare router).
pub(crate) async fn reset(conn: Option<ConnectionHandle>) -> Response {
    if let Some(conn) = conn {
        conn.reset();
        // The connection's task drops this future with the socket; the wait is only a bound.
        tokio::time::sleep(HANG_BOUND).await;
    }
    aborted()
}

/// A response whose body fails before its first byte: hyper abandons it and closes the connection.
pub(crate) fn aborted() -> Response {
    let failure = io::Error::new(io::ErrorKind::ConnectionReset, "connection reset (chaos fault)");
    let body = Body::from_stream(futures::stream::once(async move { Err::<Bytes, _>(failure) }));
    Response::new(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_aborted_body_fails() {
        let body = aborted().into_body();
        assert!(axum::body::to_bytes(body, 1024).await.is_err());
    }

    #[tokio::test]
    async fn a_hang_ends_when_the_server_stops() {
        let stopping = CancellationToken::new();
        stopping.cancel();
        let response = hang(&stopping, None).await;
        assert!(axum::body::to_bytes(response.into_body(), 1024).await.is_err());
    }

    #[tokio::test]
    async fn a_reset_signals_the_connection() {
        let handle = ConnectionHandle::default();
        let signalled = handle.clone();
        let waiting = tokio::spawn(reset(Some(handle)));
        tokio::time::timeout(Duration::from_secs(5), signalled.reset_requested())
            .await
            .expect("the reset reaches the connection");
        waiting.abort();
    }
}
