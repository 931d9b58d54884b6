//! `POST /mcp`: the mock tools as an MCP server (Streamable HTTP) that fails the way the HTTP tools fail.
//!
//! # Who does what
//! rmcp speaks the protocol: `initialize`, `tools/list`, version negotiation, the per-request `_meta` of
//! 2026-07-28, the JSON-RPC framing, and the switch from a JSON answer to an SSE stream when a call sends progress
//! first. The tools' own path ([`super::tools::enter`]) plays the faults, so a call over MCP meets the same
//! faults, ledger, stats, attempt counts and keys as `POST /tools/{name}` with the same arguments. The seam is a
//! layer in front of rmcp (`door`): for a `tools/call` of a known tool it runs the tools' front door and the
//! faults that answer at the HTTP level, then hands what reached the tool down to rmcp in the request's
//! extensions; rmcp validates the request and calls the handler (`handler`), which executes the call and answers
//! its result. A request rmcp refuses never executes.
//!
//! # Why the faults are HTTP, not JSON-RPC
//! An MCP server behind HTTP fails as an HTTP server does: an overloaded one answers the POST with 503 and
//! `Retry-After`, a crashed one resets the connection, a stuck one never answers — none of these is a JSON-RPC
//! error, and a client that only handles JSON-RPC errors is caught by them. So an injected status is the POST's
//! status (with the HTTP tools' body and headers), a hang holds the POST, a reset resets it, a commit-then-lose
//! executes then loses the answer, and `garbage` answers a `200` whose body is not JSON-RPC. The tool's own
//! answers are MCP's: a 2xx is a result, a 4xx (a bad body, a key in use or reused) a result with
//! `isError: true`, and `is_error` a drawn tool error.
//!
//! # Stateless
//! No session ids (`legacy_session_mode` off): a 2026-07-28 client sends its version and capabilities in each
//! request's `_meta`; a 2025-11-25 client sends `initialize` first, and any later request is served on its
//! `MCP-Protocol-Version` header alone. Every host is allowed: the chaos server runs on loopback under tests, on
//! whatever port, and a benchmark may reach it by another name.

mod catalog;
mod door;
mod handler;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::state::App;
use handler::ChaosTools;

/// The largest request body the MCP endpoint reads (rmcp's own limit).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// `/mcp`: rmcp's Streamable HTTP service behind the chaos front door.
pub(super) fn routes(app: App) -> Router<App> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(MAX_BODY)
        .disable_allowed_hosts();
    let tools = {
        let app = app.clone();
        StreamableHttpService::new(
            move || Ok(ChaosTools::new(app.clone())),
            Arc::new(NeverSessionManager::default()),
            config,
        )
    };
    Router::new()
        .route_service("/mcp", tools)
        .route_layer(axum::middleware::from_fn_with_state(app, door::door))
}
