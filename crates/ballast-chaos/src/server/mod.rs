//! The HTTP side: the mock model (chat completions, Responses and Anthropic's Messages), embeddings and tools
//! behind a front door of faults, the stored responses, the ledger, the stats.
//!
//! Every model, embeddings and tool request goes the same way (`arrival`): counted in the stats; numbered (the
//! `ballast-attempt` header when it holds a number from 1, else a count per (endpoint, op) of the requests
//! without it); refused with 503 during an outage window (`Retry-After`: the time left) or beyond the capacity
//! limit (`Retry-After` in the endpoint's form, when it has one); delayed by its drawn latency; then it meets its
//! fault (`Profile::fault_for`): an error status, a hang, a reset, a commit-then-lose, a stream cut, stall or
//! error after content — or nothing. The tools' idempotency keys are checked between the front door and the fault
//! (`tools` documents the key modes). `POST /v1/chat/completions`, `POST /v1/responses` and `POST /v1/messages`
//! are one endpoint, `model`, with faults keyed alike (`chat`, `responses`, `messages`; the last answers in
//! Anthropic's format, with its headers); `POST /v1/embeddings` is `embeddings`. `POST /mcp` is the tools again,
//! as an MCP server (`mcp`): a `tools/call` goes through the tool's own front door, faults and ledger
//! (`tools::enter`), and rmcp speaks the protocol. Streams (`sse`) are planned,
//! then played, with their cuts, stalls and keep-alives. `GET /ledger`, `GET /stats`, `GET /healthz`,
//! `GET /v1/models`, `POST /admin/profile`, `POST /v1/messages/count_tokens` and the stored responses
//! (`GET`/`DELETE /v1/responses/{id}`, `POST /v1/responses/{id}/cancel`) have no faults.
//!
//! Why serve connections ourselves: a reset must close the TCP connection without any answer, and a handler has
//! no socket. [`serve`] runs each connection on its own task, which resets it when a handler asks (`lose`); the
//! bare [`router`] cannot, and approximates a reset by a body that fails at once (the client sees the connection
//! close without a complete answer — an EOF rather than an RST).

mod admin;
mod answer;
mod arrival;
mod capacity;
mod chat;
mod clock;
mod connection;
mod embed;
mod embeddings;
mod ids;
mod keys;
mod ledger;
mod lock;
mod lose;
mod mcp;
mod messages;
mod response_store;
mod responses;
mod sse;
mod state;
mod stats;
mod tools;

use std::future::Future;
use std::io;

use axum::Router;
use axum::routing::{get, post};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use embed::{ChaosServer, spawn};
use state::App;

use crate::Profile;

/// The chaos server's routes as an axum [`Router`], for any server or `tower::ServiceExt::oneshot`.
///
/// Everything works under it except a true connection reset: a bare router cannot close its connection, so a
/// reset (and a commit-then-lose that resets, and the end of a hang) answers with a body that fails at once —
/// hyper abandons the response and closes the connection, and the client sees the connection close without a
/// complete answer (an EOF, not an RST). Use [`serve`] or [`spawn`] for real resets.
pub fn router(profile: Profile) -> Router {
    routes(App::new(profile, CancellationToken::new()))
}

/// Serves `profile` on `listener` until `shutdown` completes, then stops gracefully: it stops accepting, ends
/// hangs, lets every request in flight finish, and returns. A handler's reset drops its connection with an RST.
/// During the profile's `closed` windows (from this call) it refuses connections and resets those open.
///
/// # Errors
/// When accepting connections keeps failing (six errors in a row that are not about one connection).
///
/// # Examples
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let url = format!("http://{}/healthz", listener.local_addr()?);
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let server = tokio::spawn(ballast_chaos::serve(listener, ballast_chaos::Profile::default(), async {
///     let _ = stopped.await;
/// }));
/// let health = reqwest::get(&url).await.expect("the server answers");
/// assert!(health.status().is_success());
/// let _ = stop.send(());
/// server.await.expect("the server task")?;
/// # Ok(())
/// # }
/// ```
pub async fn serve(
    listener: TcpListener,
    profile: Profile,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let stopping = CancellationToken::new();
    let closed = profile.closed.clone();
    let router = routes(App::new(profile, stopping.clone()));
    connection::serve_router(listener, router, stopping, shutdown, closed).await
}

fn routes(app: App) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/responses", post(responses::create_response))
        .route(
            "/v1/responses/{id}",
            get(responses::get_response).delete(responses::delete_response),
        )
        .route("/v1/responses/{id}/cancel", post(responses::cancel_response))
        .route("/v1/messages", post(messages::create_message))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .route("/v1/embeddings", post(embeddings::create_embeddings))
        .route("/v1/models", get(admin::models))
        .route("/tools/{name}", post(tools::call_tool))
        .route("/ledger", get(admin::ledger))
        .route("/stats", get(admin::stats))
        .route("/admin/profile", post(admin::swap_profile))
        .route("/healthz", get(admin::healthz))
        .route("/echo", post(admin::echo))
        .merge(mcp::routes(app.clone()))
        .with_state(app)
}

/// The first 16 hex digits of the SHA-256 of `bytes`: a short stable id.
fn short_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The operation id of a request that names none: a hash of its raw body, so an identical retry keeps it.
fn body_hash(body: &[u8]) -> String {
    format!("body-{}", short_hash(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_hashes_are_stable_and_distinct() {
        assert_eq!(body_hash(b"{}"), body_hash(b"{}"));
        assert_ne!(body_hash(b"{}"), body_hash(b"[]"));
        assert_eq!(body_hash(b"").len(), "body-".len() + 16);
    }
}
