//! Deferred operations seen from outside: a call that asks to wait, its operation polled to its end, the chaos
//! upstream healed under it, and a receiver for the signed callback.

use std::sync::{Arc, Mutex};

use ballast_chaos::ChaosServer;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::gateway::{Gateway, PATIENCE, call, client, eventually, get_json, header, read};

/// The states an operation ends in.
pub(crate) const ENDED: [&str; 4] = ["completed", "failed", "expired", "outcome_unknown"];

/// `POST /v1/tools/{tool}` with `Idempotency-Key: key`, `op: key` in the body (the chaos ledger's name for it)
/// and `headers`; the answer's status, headers and body.
pub(crate) async fn call_keyed(
    gateway: &Gateway,
    tool: &str,
    key: &str,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut all = vec![("idempotency-key", key)];
    all.extend_from_slice(headers);
    let body = json!({"order_id": "o-1", "amount": 5, "op": key});
    read(call(&client(), gateway, tool, &body, &all).await).await
}

/// A call of `tool` with `key` that asks to wait (`Prefer: respond-async`, and `extra` headers), which must be
/// deferred: 202, `Location` where to poll it, the operation queued. Returns the body.
pub(crate) async fn deferred(gateway: &Gateway, tool: &str, key: &str, extra: &[(&str, &str)]) -> Value {
    let mut headers = vec![("prefer", "respond-async")];
    headers.extend_from_slice(extra);
    let (status, answer, body) = call_keyed(gateway, tool, key, &headers).await;
    assert_eq!(status, 202, "{key} deferred: {body}");
    assert_eq!(header(&answer, "location"), format!("/v1/operations/{key}"));
    assert_eq!(header(&answer, "preference-applied"), "respond-async");
    assert_eq!(body["status"], "queued", "{body}");
    body
}

/// `GET /v1/operations/{key}`.
pub(crate) async fn operation(gateway: &Gateway, key: &str) -> Value {
    get_json(&gateway.url(&format!("/v1/operations/{key}"))).await
}

/// Polls `key`'s operation until it ended, within [`PATIENCE`] (or `patience`); every state seen, in order, and
/// the last answer.
pub(crate) async fn until_ended(gateway: &Gateway, key: &str) -> (Vec<String>, Value) {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let last = eventually(&format!("{key} ends"), || {
        let seen = Arc::clone(&seen);
        async move {
            let now = operation(gateway, key).await;
            let state = now["status"].as_str().unwrap_or("?").to_owned();
            let mut seen = seen.lock().unwrap();
            if seen.last() != Some(&state) {
                seen.push(state.clone());
            }
            ENDED.contains(&state.as_str()).then_some(now)
        }
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    (seen, last)
}

/// Polls `key`'s operation until its state is `state`.
pub(crate) async fn until_state(gateway: &Gateway, key: &str, state: &str) -> Value {
    eventually(&format!("{key} becomes {state}"), || async move {
        let now = operation(gateway, key).await;
        (now["status"] == state).then_some(now)
    })
    .await
}

/// Swaps the chaos upstream's profile for `toml` (`""`: nothing goes wrong).
pub(crate) async fn heal(upstream: &ChaosServer, toml: &str) {
    let answer = client()
        .post(upstream.url("/admin/profile"))
        .header("content-type", "text/plain")
        .body(toml.to_owned())
        .send()
        .await
        .expect("the chaos upstream answers");
    assert!(
        answer.status().is_success(),
        "the profile swaps: {}",
        answer.text().await.unwrap_or_default()
    );
}

/// The chaos ledger's executions of every op, and its total of duplicates.
pub(crate) async fn ledger(upstream: &ChaosServer) -> Value {
    get_json(&upstream.url("/ledger")).await
}

/// Whether a poller's states are a path the operation can take: it starts queued, moves between queued and
/// in_progress (an attempt, then a wait), and ends once, last.
pub(crate) fn in_order(seen: &[String]) -> bool {
    let allowed = |from: &str, to: &str| match from {
        "queued" => to == "in_progress" || ENDED.contains(&to),
        "in_progress" => to == "queued" || ENDED.contains(&to),
        _ => false,
    };
    seen.first().is_some_and(|s| s == "queued" || s == "in_progress")
        && seen.windows(2).all(|pair| allowed(&pair[0], &pair[1]))
        && seen.last().is_some_and(|s| ENDED.contains(&s.as_str()))
}

/// What a callback receiver got: each request's head (lower-cased) and body.
pub(crate) type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A plain HTTP receiver on 127.0.0.1 that answers 200 to every request and keeps it; its URL and what it got.
/// (Bounded: each connection is read for at most [`PATIENCE`].)
pub(crate) async fn receiver() -> (String, Received) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}/hooks/ballast", listener.local_addr().expect("bound"));
    let received: Received = Arc::default();
    let kept = Arc::clone(&received);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let kept = Arc::clone(&kept);
            tokio::spawn(async move {
                let read = tokio::time::timeout(PATIENCE, read_request(&mut socket)).await;
                if let Ok(Some(request)) = read {
                    kept.lock().unwrap().push(request);
                    let _ = socket
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                }
            });
        }
    });
    (url, received)
}

/// One request: its head as text (lower case) and its body (by `content-length`).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&chunk[..n]);
        let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&bytes[..end]).to_lowercase();
        let length: usize = (head.lines())
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if bytes.len() >= end + 4 + length {
            return Some((head, bytes[end + 4..end + 4 + length].to_vec()));
        }
    }
}
