//! Serving, and stopping without losing anything (DESIGN.md, "Gateway HTTP interface", graceful shutdown).
//! Connections are accepted and bounded — header and idle timeouts, a cap below the file limit — by
//! `crate::connections`. Stopping:
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

use ballast_config::{Config, ProcessEnv};
use tokio::net::TcpListener;
use tokio_util::task::AbortOnDropHandle;

use crate::connections::{self, ADMIN_CONNECTIONS, Limits};

use crate::{Gateway, StartError, admin_app, app};

/// How often records past their retention and ended deferred operations are deleted.
const REAP_EVERY: Duration = Duration::from_secs(60);

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
    let config = gateway.config();
    let upstream_calls: u64 = (config.tools.iter().map(|t| u64::from(t.concurrency)))
        .chain((config.models.iter()).map(|m| u64::from(m.concurrency) * m.deployments.len() as u64))
        .sum();
    let (max, lowered) = connections::limit(server.max_connections, upstream_calls, admin.is_some());
    if let Some(why) = lowered {
        tracing::warn!("{why}");
    }
    let limits = Limits {
        header_timeout: server.header_timeout,
        idle_timeout: server.idle_timeout,
        send_timeout: server.send_timeout,
        max,
        listener: "main",
    };
    // Aborted when serving ends, however it ends.
    let _store_probes = AbortOnDropHandle::new(tokio::spawn(crate::admin::probe_store(gateway.clone())));
    let _upkeep = gateway
        .inner
        .metrics
        .clone()
        .map(|handle| AbortOnDropHandle::new(tokio::spawn(crate::metrics::upkeep(handle))));
    // Records past their retention, and ended deferred operations, deleted once a minute: the store does not grow
    // with every key ever used.
    let _reaper = AbortOnDropHandle::new(ballast::idempotency::spawn_reaper(
        std::sync::Arc::clone(&gateway.inner.store),
        REAP_EVERY,
    ));
    let _history = (gateway.inner.metrics.clone()).map(|handle| {
        AbortOnDropHandle::new(tokio::spawn(crate::history::record(
            gateway.inner.history.clone(),
            handle,
        )))
    });
    let _deferred_gauges = (gateway.inner.deferred.clone())
        .map(|queue| AbortOnDropHandle::new(tokio::spawn(crate::deferred::gauges(queue))));
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
    let main = connections::serve(
        listener,
        router,
        limits,
        std::sync::Arc::clone(&gateway.inner.connections),
        stop_rx.clone(),
    );
    let admin_server = admin.map(|listener| {
        let limits = Limits {
            max: ADMIN_CONNECTIONS,
            listener: "admin",
            ..limits
        };
        let stats = std::sync::Arc::clone(&gateway.inner.admin_connections);
        connections::serve(
            listener,
            admin_app(gateway.clone()),
            limits,
            stats,
            stop_rx.clone(),
        )
    });
    let serving = async move {
        let admin = async move {
            if let Some(server) = admin_server {
                server.await;
            }
        };
        tokio::join!(main, admin);
    };
    tokio::pin!(serving);
    // The listeners serve until told to stop: only the signal ends this.
    let signal_at = tokio::select! {
        () = &mut serving => return Ok(()),
        at = signalled => at,
    };
    // Requests in flight finish within the grace, counted from the signal.
    let grace_end = signal_at + server.grace;
    let grace_left = |now| grace_end.saturating_duration_since(now);
    match tokio::time::timeout(grace_left(ballast::clock::now()), &mut serving).await {
        Ok(()) => {}
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
    // The spans of the requests just finished, before the process ends.
    gateway.flush_traces().await;
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
