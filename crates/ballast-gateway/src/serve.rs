//! Serving, and stopping without losing anything (DESIGN.md, "Gateway HTTP interface", graceful shutdown):
//!
//! 1. the shutdown future completes (the binary: SIGTERM or Ctrl-C);
//! 2. `/readyz` fails at once, and for `server.drain_delay` the gateway keeps serving so that load balancers
//!    notice and stop sending;
//! 3. it stops accepting; requests in flight finish, within `server.grace` from the signal — a stream still open
//!    then ends with its API's error event, any other request still running is cut;
//! 4. the work that outlives its request is drained within what is left of the grace (at least a lease's worth
//!    of a second): sent side-effecting attempts running to their timeout, idempotency records' last writes. A
//!    record whose request never ended is left `dispatched`; at the next start (SQLite) or after its lease (the
//!    others) its key answers `outcome_unknown` — or, for an upstream that deduplicates, is sent again with the
//!    same key.

use std::future::Future;
use std::time::Duration;

use axum::serve::ListenerExt as _;
use ballast_config::{Config, ProcessEnv};
use tokio::net::TcpListener;
use tokio_util::task::AbortOnDropHandle;

use crate::{Gateway, StartError, admin_app, app};

/// How long streams still open at the end of the grace have to send their error event.
const STREAM_CLOSE: Duration = Duration::from_millis(500);

/// The least time given to background work after the requests have ended.
const MIN_BACKGROUND_DRAIN: Duration = Duration::from_secs(1);

/// Opens the gateway of `config` (secrets from the process environment), installs its Prometheus recorder and
/// serves on `listener` (and on `server.admin_listen`, bound here, when set) until `shutdown` completes, then
/// stops gracefully.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let admin = match config.server.admin_listen {
        Some(addr) => Some(TcpListener::bind(addr).await.map_err(StartError::Listen)?),
        None => None,
    };
    run_on(listener, admin, config, shutdown).await
}

/// [`run`] on listeners the caller bound: `admin` serves `/metrics` and `/status` (give it when
/// `server.admin_listen` is set; the binary binds it to print the address it got).
pub async fn run_on(
    listener: TcpListener,
    admin: Option<TcpListener>,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let handle = crate::metrics::install(&config).map_err(StartError::Metrics)?;
    let gateway = Gateway::open(config, &ProcessEnv).await?.with_metrics(handle);
    serve(listener, admin, gateway, shutdown).await
}

/// `listener`, its connections with `TCP_NODELAY` set. Without it (axum's default), Nagle's algorithm holds each
/// small write while an earlier one is unacknowledged: every event of a stream after the first waited for the
/// caller's delayed ACK (up to 40 ms on Linux), and streams through the gateway were capped near 720 a second.
fn without_nagle(
    listener: TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY on a connection");
        }
    })
}

/// Serves `gateway` on `listener` (and its admin endpoints on `admin`) until `shutdown` completes, then stops
/// gracefully (module docs).
pub async fn serve(
    listener: TcpListener,
    admin: Option<TcpListener>,
    gateway: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let server = gateway.config().server.clone();
    let local = listener.local_addr().map_err(StartError::Listen)?;
    if !gateway.inner.principals.any() && !local.ip().is_loopback() {
        return Err(StartError::NotLoopback { addr: local });
    }
    let router = app(gateway.clone())?;
    // Aborted when serving ends, however it ends.
    let _store_probes = AbortOnDropHandle::new(tokio::spawn(crate::admin::probe_store(gateway.clone())));
    let _upkeep = gateway
        .inner
        .metrics
        .clone()
        .map(|handle| AbortOnDropHandle::new(tokio::spawn(crate::metrics::upkeep(handle))));
    // The signal, then the drain delay: what stops the listeners accepting.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let signalled = {
        let gateway = gateway.clone();
        async move {
            shutdown.await;
            gateway.start_draining();
            tracing::info!(drain_delay = ?server.drain_delay, grace = ?server.grace, "shutting down: /readyz fails, then new connections stop");
            let at = ballast::clock::now();
            tokio::time::sleep(server.drain_delay).await;
            let _ = stop_tx.send(true);
            at
        }
    };
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let main = axum::serve(without_nagle(listener), router).with_graceful_shutdown(stopped(stop_rx.clone()));
    let admin_server = admin.map(|listener| {
        axum::serve(listener, admin_app(gateway.clone())).with_graceful_shutdown(stopped(stop_rx.clone()))
    });
    let serving = async move {
        let admin = async move {
            match admin_server {
                Some(server) => server.await,
                None => Ok(()),
            }
        };
        let (main, admin) = tokio::join!(main.into_future(), admin);
        main.and(admin)
    };
    tokio::pin!(serving);
    let signal_at = tokio::select! {
        result = &mut serving => {
            // The listeners ended without a shutdown: an accept error.
            return result.map_err(StartError::Listen);
        }
        at = signalled => at,
    };
    // Requests in flight finish within the grace, counted from the signal.
    let grace_end = signal_at + server.grace;
    let grace_left = |now| grace_end.saturating_duration_since(now);
    match tokio::time::timeout(grace_left(ballast::clock::now()), &mut serving).await {
        Ok(result) => result.map_err(StartError::Listen)?,
        Err(_) => {
            // Streams still open end with their API's error event, never as a clean end; a moment for it to go.
            gateway.close_streams();
            if tokio::time::timeout(STREAM_CLOSE, &mut serving).await.is_err() {
                tracing::warn!(grace = ?server.grace, "requests still in flight at the end of the grace period were cut")
            }
        }
    }
    let left = grace_left(ballast::clock::now()).max(MIN_BACKGROUND_DRAIN);
    let drained = ballast::background::drain(left).await;
    if drained.finished {
        tracing::info!("stopped: every request and background write finished");
    } else {
        tracing::warn!(
            still_running = drained.still_running,
            "stopped with background work unfinished: its records answer outcome_unknown (or are re-sent with their key) after the restart"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener as _;

    use super::*;

    /// Regression: the gateway's connections kept Nagle's algorithm on, and a stream's events after the first
    /// waited for the caller's delayed ACK.
    #[tokio::test]
    async fn connections_are_accepted_with_tcp_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = without_nagle(listener);
        let (_client, (accepted, _)) = tokio::join!(
            async { tokio::net::TcpStream::connect(addr).await.unwrap() },
            listener.accept()
        );
        assert!(accepted.nodelay().unwrap());
    }
}
