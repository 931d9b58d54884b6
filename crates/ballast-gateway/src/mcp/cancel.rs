//! A 2025-11-25 client's `notifications/cancelled`: a request of its own, which rmcp's stateless server ignores —
//! no session ties it to the call it names. The gateway finds the call itself: a read-only call with a run is
//! registered under (principal, run, request id) while it runs, and the notification naming those cancels it.
//! Request ids are unique per client only; a run is one client's (one MCP client per agent run), so the three
//! name one call, and another principal's or another run's notification never reaches it. A call without a run,
//! and every side-effecting call (it runs on to its answer, stored for the retry), is not cancelled so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use ballast::headers::BALLAST_RUN_ID;
use rmcp::model::RequestId;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// (principal, run, JSON-RPC request id as JSON text).
type CancelKey = (String, String, String);

/// The read-only calls in flight that a notification may cancel.
#[derive(Debug, Default)]
pub(super) struct Cancels(Mutex<HashMap<CancelKey, CancellationToken>>);

/// A call's entry in [`Cancels`], removed when the call ends (dropped).
pub(super) struct Cancellable {
    cancels: Arc<Cancels>,
    key: CancelKey,
}

impl Drop for Cancellable {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.cancels.0.lock() {
            calls.remove(&self.key);
        }
    }
}

impl Cancels {
    /// Registers the read-only call `http` of request `id` (when it has a run): `cancel` fires when its client's
    /// notification names it.
    pub(super) fn register(
        self: &Arc<Self>,
        http: &Request,
        id: &RequestId,
        cancel: &CancellationToken,
    ) -> Option<Cancellable> {
        let (principal, run) = principal_and_run(http.headers(), http.extensions())?;
        let key = (principal, run, serde_json::to_value(id).ok()?.to_string());
        self.0.lock().ok()?.insert(key.clone(), cancel.clone());
        Some(Cancellable {
            cancels: Arc::clone(self),
            key,
        })
    }

    /// Whether `body` is a `notifications/cancelled`: then the call it names, by the request's principal and run
    /// and the request id, is cancelled when it is in flight.
    pub(super) fn notified(&self, parts: &http::request::Parts, body: &[u8]) -> bool {
        const METHOD: &str = "notifications/cancelled";
        if !body.windows(METHOD.len()).any(|w| w == METHOD.as_bytes()) {
            return false;
        }
        let Ok(message) = serde_json::from_slice::<Value>(body) else {
            return false;
        };
        if message.get("method").and_then(Value::as_str) != Some(METHOD) {
            return false;
        }
        let id = message.pointer("/params/requestId").map(Value::to_string);
        if let (Some((principal, run)), Some(id)) = (principal_and_run(&parts.headers, &parts.extensions), id)
            && let Some(cancel) = (self.0.lock().ok()).and_then(|c| c.get(&(principal, run, id)).cloned())
        {
            cancel.cancel();
        }
        true
    }
}

/// The (principal, run) of a request: its principal's name and its `ballast-run-id`, when it has one.
fn principal_and_run(headers: &http::HeaderMap, extensions: &http::Extensions) -> Option<(String, String)> {
    let run = headers.get(&BALLAST_RUN_ID)?.to_str().ok()?.to_owned();
    let principal = (extensions.get::<ballast::idempotency::Principal>())
        .map_or(crate::auth::ANONYMOUS, |p| p.name())
        .to_owned();
    Some((principal, run))
}
