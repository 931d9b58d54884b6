//! The chaos front door of `/mcp`: a layer that plays a `tools/call`'s faults before rmcp sees it.
//!
//! It reads the POST's JSON-RPC message; anything but a request to call a known tool passes to rmcp untouched
//! (`initialize`, `tools/list`, notifications, an unknown tool, a malformed body: rmcp answers them). A call runs
//! the tools' shared path with its `arguments` as the body ([`tools::enter`]): what answers at the HTTP level —
//! a refusal at the front door, an injected status, a hang, a reset, a commit-then-lose — is this POST's answer,
//! and so is `garbage`. What reached the tool goes down to rmcp as a [`PendingCall`] in the request's
//! extensions, for the handler to execute.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use serde_json::{Value, json};

use super::MAX_BODY;
use crate::Fault;
use crate::server::answer::CHAOS_FAULT;
use crate::server::lock::lock;
use crate::server::lose::ConnectionHandle;
use crate::server::state::App;
use crate::server::stats::Outcome;
use crate::server::tools::{self, Reached, Tool};

/// What `garbage` answers, with `200` and `Content-Type: application/json`: not JSON, let alone JSON-RPC (a
/// proxy's error page where the server's answer should be).
pub(super) const GARBAGE: &str = "<html><head><title>200 OK</title></head><body>upstream answer garbled (chaos fault garbage)</body></html>";

/// A tool call that reached the tool, on its way to the handler. Taken once: by the handler that executes it, or
/// by the door when rmcp answered the request without calling the tool.
#[derive(Clone, Debug)]
pub(super) struct PendingCall(Arc<Mutex<Option<Reached>>>);

impl PendingCall {
    fn new(reached: Reached) -> PendingCall {
        PendingCall(Arc::new(Mutex::new(Some(reached))))
    }

    /// The call, if nobody took it yet.
    pub(super) fn take(&self) -> Option<Reached> {
        lock(&self.0).take()
    }
}

/// A `tools/call` of a known tool, as the door reads it.
#[derive(Debug, PartialEq)]
pub(super) struct ToolCall {
    pub(super) tool: Tool,
    /// The arguments as the HTTP tool's body (`{}` when absent).
    pub(super) body: Vec<u8>,
}

impl ToolCall {
    /// The tool call `message` is, if it is a JSON-RPC request (it has an `id`) of `tools/call` naming a known
    /// tool.
    pub(super) fn read(message: &[u8]) -> Option<ToolCall> {
        let message: Value = serde_json::from_slice(message).ok()?;
        if message.get("method")?.as_str()? != "tools/call" || message.get("id").is_none() {
            return None;
        }
        let params = message.get("params")?;
        let tool = Tool::named(params.get("name")?.as_str()?)?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(arguments) => arguments.clone(),
        };
        Some(ToolCall {
            tool,
            body: serde_json::to_vec(&arguments).ok()?,
        })
    }
}

/// The layer's function: plays a tool call's faults, then lets rmcp answer.
pub(super) async fn door(State(app): State<App>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(message) = axum::body::to_bytes(body, MAX_BODY).await else {
        let refusal = "Payload Too Large: the body is over 4 MiB, or could not be read";
        return (StatusCode::PAYLOAD_TOO_LARGE, refusal).into_response();
    };
    let Some(call) = ToolCall::read(&message) else {
        return next.run(Request::from_parts(parts, Body::from(message))).await;
    };
    let conn = parts.extensions.get::<ConnectionHandle>().cloned();
    let reached = match tools::enter(&app, call.tool, &call.body, &parts.headers, conn).await {
        Ok(reached) => reached,
        Err(answered) => return answered,
    };
    if reached.fault() == Fault::Garbage {
        reached.skip(Outcome::Garbage);
        return garbage();
    }
    let pending = PendingCall::new(reached);
    parts.extensions.insert(pending.clone());
    let response = next.run(Request::from_parts(parts, Body::from(message))).await;
    if let Some(refused) = pending.take() {
        refused.skip(Outcome::ProtocolError);
    }
    response
}

/// A `200` that claims JSON and is not.
fn garbage() -> Response {
    let mut response = (StatusCode::OK, GARBAGE).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CHAOS_FAULT, HeaderValue::from_static("garbage"));
    response
}
