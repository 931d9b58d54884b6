//! Fixtures of the ToolClient tests: tools from TOML over the chaos router or a test double, and an upstream
//! that keeps an operation "in progress".

use std::sync::{Arc, Mutex};

use axum::Router;
use ballast::{
    Clients,
    tool::{ToolCall, ToolClients},
    transport::ServiceTransport,
};
use ballast_config::Config;
use bytes::Bytes;
use serde_json::json;
use tower::util::BoxCloneSyncService;

use super::BODY_LIMIT;

/// The tools of `toml` over `router` in process.
pub(crate) fn clients(toml: &str, router: &Router) -> ToolClients {
    clients_over(
        toml,
        ServiceTransport::new(router.clone()).with_body_limit(BODY_LIMIT),
    )
}

/// The tools of `toml` over any transport (a test double).
pub(crate) fn clients_over(toml: &str, transport: impl ballast::transport::Transport) -> ToolClients {
    let config = Config::from_toml_str(toml).unwrap_or_else(|e| panic!("test config is invalid:\n{e}"));
    Clients::from_config(&config)
        .build(transport)
        .expect("tools build")
        .tools
}

/// `lookup_order` on the chaos upstream, 1 s per try, 2 attempts (the observability tests' tool).
pub(crate) const LOOKUP: &str = r#"
    version = 1
    [[tools]]
    name = "lookup_order"
    upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
    per_try_timeout = "1s"
    retry = { max_attempts = 2 }
"#;

/// `create_refund` on the chaos upstream with this `upstream_idempotency`, 1 s per try, 3 attempts.
pub(crate) fn refund_tool(upstream_idempotency: &str) -> String {
    format!(
        r#"
        version = 1
        [[tools]]
        name = "create_refund"
        upstream = {{ method = "POST", url = "http://chaos/tools/create_refund" }}
        side_effects = true
        upstream_idempotency = "{upstream_idempotency}"
        per_try_timeout = "1s"
        retry = {{ max_attempts = 3, base = "100ms", cap = "1s" }}
        "#
    )
}

/// A refund of operation `op` (the chaos ledger's key).
pub(crate) fn refund(op: &str) -> ToolCall {
    ToolCall::new(json!({"order_id": "1234", "amount": 42.5, "op": op}))
}

/// A boxed upstream test double a `ToolClients` can share.
pub(crate) type SyncUpstream =
    BoxCloneSyncService<http::Request<Bytes>, http::Response<Bytes>, ballast::Error>;

/// What an in-progress upstream saw of one request: when, and its `ballast-attempt` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) at: ballast_core::Instant,
    pub(crate) attempt: u32,
}

/// An upstream that answers 409 "in progress" (with `Retry-After: <retry_after>`) `busy` times, then 200
/// `{"status": "succeeded"}`; every request it saw is logged.
pub(crate) fn in_progress_upstream(
    busy: u32,
    retry_after: &'static str,
) -> (SyncUpstream, Arc<Mutex<Vec<Seen>>>) {
    let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let seen = Arc::clone(&log);
    let upstream = tower::service_fn(move |request: http::Request<Bytes>| {
        assert!(request.headers().contains_key("idempotency-key"));
        let attempt = request.headers()["ballast-attempt"]
            .to_str()
            .ok()
            .and_then(|n| n.parse().ok())
            .expect("a ballast-attempt header");
        let mut seen = seen.lock().expect("not poisoned");
        seen.push(Seen {
            at: ballast::clock::now(),
            attempt,
        });
        let response = if seen.len() <= busy as usize {
            http::Response::builder()
                .status(409)
                .header("content-type", "application/problem+json")
                .header("retry-after", retry_after)
                .body(Bytes::from_static(
                    br#"{"type": "urn:ballast:idempotency_in_progress"}"#,
                ))
        } else {
            http::Response::builder()
                .status(200)
                .body(Bytes::from_static(br#"{"status": "succeeded"}"#))
        };
        std::future::ready(Ok(response.expect("a valid response")))
    });
    (SyncUpstream::new(upstream), log)
}
