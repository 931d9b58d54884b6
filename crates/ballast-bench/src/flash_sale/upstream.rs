//! One run's chaos upstream, served in this process on its own task, and what it counted: its ledger (the side
//! effects executed, and those executed twice) and its stats (every request it received).

use std::collections::HashSet;
use std::net::SocketAddr;

use serde_json::Value;

/// One run's chaos upstream, served in this process on its own task.
pub(super) struct Upstream {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Upstream {
    /// Serves `profile` on `listen` (port 0: a free one).
    pub(super) async fn start(
        listen: SocketAddr,
        profile: ballast_chaos::Profile,
    ) -> Result<Upstream, String> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|error| format!("the chaos upstream cannot listen on {listen}: {error}"))?;
        let addr = listener
            .local_addr()
            .map_err(|error| format!("the chaos upstream's address: {error}"))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(ballast_chaos::serve(listener, profile, async {
            let _ = stopped.await;
        }));
        Ok(Upstream {
            addr,
            stop: Some(stop),
            task,
        })
    }

    /// The URL of `path` on it.
    pub(super) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops it (requests in flight finish, hangs end) and waits for it.
    pub(super) async fn shutdown(mut self) -> Result<(), String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match (&mut self.task).await {
            Ok(served) => served.map_err(|error| format!("the chaos upstream failed: {error}")),
            Err(error) => Err(format!("the chaos upstream failed: {error}")),
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // An early return stops it too; a shutdown has already sent this.
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// What the chaos upstream counted in a run.
pub(super) struct UpstreamCounts {
    /// The ledger's duplicates.
    pub(super) duplicates: u64,
    /// Requests its stats counted.
    pub(super) requests: u64,
    /// The operations its ledger holds: every side effect executed at least once.
    pub(super) executed: HashSet<String>,
}

/// What the chaos upstream counted: its ledger and its stats.
pub(super) async fn upstream_counts(upstream: &Upstream) -> Result<UpstreamCounts, String> {
    let client = reqwest::Client::new();
    let get = |path: &'static str| {
        let request = client.get(upstream.url(path)).send();
        async move {
            let answer = request.await.map_err(|error| format!("GET {path}: {error}"))?;
            answer
                .json::<Value>()
                .await
                .map_err(|error| format!("GET {path}: {error}"))
        }
    };
    let ledger = get("/ledger").await?;
    let stats = get("/stats").await?;
    let duplicates = ledger["totals"]["duplicates"].as_u64().unwrap_or_default();
    let executed = ledger["ops"]
        .as_object()
        .map(|ops| ops.keys().cloned().collect())
        .unwrap_or_default();
    let requests = stats["endpoints"]
        .as_object()
        .map(|endpoints| {
            endpoints
                .values()
                .filter_map(|endpoint| endpoint["requests"].as_u64())
                .sum()
        })
        .unwrap_or_default();
    Ok(UpstreamCounts {
        duplicates,
        requests,
        executed,
    })
}
