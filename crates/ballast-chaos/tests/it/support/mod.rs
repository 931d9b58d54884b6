//! Shared fixtures of the HTTP tests: profiles built from scripts, a client with short timeouts, JSON helpers,
//! and bounded polling.

// Each test file uses its own subset of the fixtures.
#![allow(dead_code)]

pub(crate) mod mcp;
pub(crate) mod oneshot;

use std::future::Future;
use std::time::Duration;

use ballast_chaos::{ChaosServer, EndpointProfile, KeyMode, LoseMode, Profile, ScriptStep};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The longest any bounded wait of these tests lasts.
pub(crate) const PATIENCE: Duration = Duration::from_secs(5);

/// A profile where `endpoint` has `faults` and meets `steps` for each (op, steps).
pub(crate) fn profile(endpoint: &str, faults: EndpointProfile, scripts: &[(&str, &[ScriptStep])]) -> Profile {
    ballast_testkit::scripted(0, endpoint, faults, scripts)
}

/// Faults with only a key mode.
pub(crate) fn keyed(mode: KeyMode) -> EndpointProfile {
    EndpointProfile {
        key_mode: mode,
        ..EndpointProfile::default()
    }
}

/// Faults with a key mode and a way to lose answers.
pub(crate) fn losing(mode: KeyMode, lose_with: LoseMode) -> EndpointProfile {
    EndpointProfile {
        key_mode: mode,
        lose_with,
        ..EndpointProfile::default()
    }
}

/// A client whose requests give up after `timeout`.
pub(crate) fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .expect("a reqwest client")
}

/// A refund request body.
pub(crate) fn refund(op: &str, amount: u64) -> Value {
    json!({"op": op, "order_id": "A-1001", "amount": amount})
}

/// `POST /tools/{tool}` with `body` and, if given, an `Idempotency-Key`.
pub(crate) async fn call(
    client: &reqwest::Client,
    server: &ChaosServer,
    tool: &str,
    body: &Value,
    key: Option<&str>,
) -> reqwest::Result<reqwest::Response> {
    let mut request = client.post(server.url(&format!("/tools/{tool}"))).json(body);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.send().await
}

/// `GET path` as JSON.
pub(crate) async fn get_json(server: &ChaosServer, path: &str) -> Value {
    client(PATIENCE)
        .get(server.url(path))
        .send()
        .await
        .expect("the server answers")
        .json()
        .await
        .expect("a JSON body")
}

/// Executions of `op` in the ledger (0 when it never executed).
pub(crate) async fn executions(server: &ChaosServer, op: &str) -> u64 {
    get_json(server, "/ledger").await["ops"][op]["executions"]
        .as_u64()
        .unwrap_or(0)
}

/// How many requests to `endpoint` ended in `bucket`.
pub(crate) async fn bucket(server: &ChaosServer, endpoint: &str, bucket: &str) -> u64 {
    get_json(server, "/stats").await["endpoints"][endpoint]["statuses"][bucket]
        .as_u64()
        .unwrap_or(0)
}

/// Requests to `endpoint` being handled now.
pub(crate) async fn in_flight(server: &ChaosServer, endpoint: &str) -> u64 {
    get_json(server, "/stats").await["endpoints"][endpoint]["in_flight"]
        .as_u64()
        .unwrap_or(0)
}

/// Polls `check` until it holds; panics naming `what` after [`PATIENCE`] (the test kit's poll).
pub(crate) async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    ballast_testkit::eventually(PATIENCE, what, || {
        let holds = check();
        async move { holds.await.then_some(()) }
    })
    .await;
}

/// The operation id the server gives a request that names none: `body-` and 16 hex digits of its SHA-256.
pub(crate) fn body_op(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("body-{hex}")
}

/// Whether `err`, or an error it was caused by, is an I/O error of `kind`.
pub(crate) fn caused_by(err: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    let mut source = Some(err);
    while let Some(err) = source {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
        {
            return true;
        }
        source = err.source();
    }
    false
}
