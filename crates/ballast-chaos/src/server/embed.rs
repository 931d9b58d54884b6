//! A chaos server in the background of a test or a benchmark: [`spawn`] and [`ChaosServer`].

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Profile;

/// A chaos server running on its own task, on `127.0.0.1` and a port of the system's choice.
///
/// It shuts down gracefully on [`ChaosServer::shutdown`], or when dropped (then in the background: the drop does
/// not wait).
#[derive(Debug)]
pub struct ChaosServer {
    addr: SocketAddr,
    stop: CancellationToken,
    task: Option<JoinHandle<io::Result<()>>>,
}

/// Starts a chaos server serving `profile` on `127.0.0.1:0` (with connection resets, as [`crate::serve`]).
///
/// # Errors
/// When the listener cannot be bound.
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let server = ballast_chaos::spawn(ballast_chaos::Profile::default()).await?;
/// let refund = serde_json::json!({"op": "order-7-refund", "order_id": "A-7", "amount": 1250});
/// let client = reqwest::Client::new();
/// let url = server.url("/tools/create_refund");
/// let answer = client.post(&url).json(&refund).send().await.expect("answered");
/// assert!(answer.status().is_success());
/// let ledger: serde_json::Value =
///     reqwest::get(server.url("/ledger")).await.expect("answered").json().await.expect("JSON");
/// assert_eq!(ledger["ops"]["order-7-refund"]["executions"], 1);
/// server.shutdown().await
/// # }
/// ```
pub async fn spawn(profile: Profile) -> io::Result<ChaosServer> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let stopped = stop.clone().cancelled_owned();
    let task = tokio::spawn(super::serve(listener, profile, stopped));
    Ok(ChaosServer {
        addr,
        stop,
        task: Some(task),
    })
}

impl ChaosServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL of `path` on it: `url("/ledger")` is `http://127.0.0.1:PORT/ledger`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops accepting connections, lets the requests in flight finish (hangs end at once), and waits for it.
    ///
    /// # Errors
    /// When the server failed while running (its accept loop gave up), or its task panicked.
    pub async fn shutdown(mut self) -> io::Result<()> {
        self.stop.cancel();
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for ChaosServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
