//! `ballast serve` on an open network, where only the real process will do: the key the upstream sees the same
//! after a restart, bodies too large, never sent or too slow and connections slow or idle on real sockets, a flood
//! of connections under a file limit, a store that goes away noticed by the probes `serve` runs. (Answers to a
//! careless or hostile caller, two tenants' keys kept apart, runs bounded in memory: the router's, tested in
//! process by `ballast-gateway`'s `answers`, `auth` and `runs` modules.)

use crate::support;

use ballast_testkit::ConfigText;
use serde_json::{Value, json};
use support::gateway::{Gateway, chaos, client, executions, header, read};

const DEV: &str = "Bearer dev-secret";
const OTHER: &str = "Bearer other-secret";

/// Two principals, `dev` and `other`, and a side-effecting tool that answers what it received (`echo_write`).
fn tenants() -> String {
    ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .principal("dev", "TEST_DEV_KEY")
        .principal("other", "TEST_OTHER_KEY")
        .tool(
            "echo_write",
            "{chaos}/echo",
            "side_effects = true\nper_try_timeout = \"2s\"",
        )
        .build()
}

/// What the upstream sees: a key of the principal's own — not the caller's, 36 printable characters, another for
/// another principal — and the same one after a restart (and on a fresh store), so a deduplicating upstream
/// still recognises a retry.
#[tokio::test(flavor = "multi_thread")]
async fn the_upstream_sees_the_principals_own_key_the_same_after_a_restart() {
    let upstream = chaos("").await;
    let gateway = Gateway::start(
        &tenants(),
        &upstream,
        &[("TEST_DEV_KEY", "dev-secret"), ("TEST_OTHER_KEY", "other-secret")],
    );
    let client = client();
    let seen = |echoed: &Value| {
        echoed["headers"]["idempotency-key"][0]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let send = |gateway: &Gateway, auth: &'static str| {
        let (client, url) = (client.clone(), gateway.url("/v1/tools/echo_write"));
        async move {
            let response = client
                .post(url)
                .header("authorization", auth)
                .header("idempotency-key", "k-1")
                .json(&json!({"op": "e-1"}))
                .send()
                .await
                .expect("an answer");
            let (status, _, body) = read(response).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let dev_key = seen(&send(&gateway, DEV).await);
    let other_key = seen(&send(&gateway, OTHER).await);
    assert_ne!(dev_key, "k-1", "the caller's key is not sent verbatim");
    assert_eq!(dev_key.len(), 36, "{dev_key}");
    assert!(dev_key.bytes().all(|b| b.is_ascii_graphic()));
    assert_ne!(dev_key, other_key, "two principals, two keys");
    // A restart on a fresh store: the call reaches the upstream again, under the same key.
    gateway.signal("-TERM");
    assert_eq!(gateway.wait_for_exit(), Some(0));
    for entry in std::fs::read_dir(gateway.dir()).expect("the gateway's directory") {
        let path = entry.expect("an entry").path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("ballast.db"))
        {
            std::fs::remove_file(path).expect("the store is removed");
        }
    }
    let gateway = gateway.restart();
    assert_eq!(seen(&send(&gateway, DEV).await), dev_key);
}

/// A request's head, to write on a raw connection.
fn head(path: &str, extra: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: {DEV}\r\ncontent-type: application/json\r\n{extra}\r\n"
    )
}

/// Regression: a `content-length` over `body_limit` was not refused until the body was read; a body never sent
/// was never answered; a slow body held its connection whatever its deadline said.
#[tokio::test(flavor = "multi_thread")]
async fn bodies_too_large_never_sent_or_too_slow_are_answered_in_time_and_closed() {
    use tokio::io::AsyncWriteExt as _;
    let upstream = chaos("").await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .server("body_timeout = \"700ms\"")
        .principal("dev", "TEST_DEV_KEY")
        .tool("echo", "{chaos}/echo", "per_try_timeout = \"2s\"")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[("TEST_DEV_KEY", "dev-secret")]);
    let patience = std::time::Duration::from_secs(3);
    // Announced over the limit: 413 before a byte of it is sent.
    let mut stream = support::raw::connect(gateway.addr).await;
    let request = head("/v1/tools/echo", "content-length: 100000000\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let (answer, closed) = support::raw::read_until_closed(&mut stream, patience).await;
    assert_eq!(support::raw::status(&answer), 413, "{answer}");
    assert!(
        closed,
        "the connection is closed: the body it announced will not be read"
    );
    // Announced and never sent: answered by the request's deadline less the reserve (350 ms, before the body
    // timeout's 700 ms: so the code says which bound ended it), 504.
    let started = ballast::clock::now();
    let mut stream = support::raw::connect(gateway.addr).await;
    let request = head(
        "/v1/tools/echo",
        "content-length: 100\r\nballast-timeout-ms: 400\r\n",
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let (answer, closed) = support::raw::read_until_closed(&mut stream, patience).await;
    assert_eq!(support::raw::status(&answer), 504, "{answer}");
    assert_eq!(support::raw::header(&answer, "ballast-code"), "deadline_exceeded");
    assert!(closed);
    let waited = ballast::clock::now().saturating_duration_since(started);
    assert!(
        waited >= std::time::Duration::from_millis(300),
        "waited for the body until its deadline: {waited:?}"
    );
    // Trickled, a byte every 100 ms, with a long deadline: 408 at body_timeout (700 ms), while still trickling.
    let started = ballast::clock::now();
    let (mut reader, mut writer) = support::raw::connect(gateway.addr).await.into_split();
    let request = head(
        "/v1/tools/echo",
        "content-length: 100\r\nballast-timeout-ms: 30000\r\n",
    );
    writer.write_all(request.as_bytes()).await.unwrap();
    let trickle = async move {
        for _ in 0..30 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            if writer.write_all(b" ").await.is_err() {
                break;
            }
        }
    };
    let trickling = tokio::spawn(trickle);
    let (answer, closed) = support::raw::read_until_closed(&mut reader, patience).await;
    assert_eq!(support::raw::status(&answer), 408, "{answer}");
    assert_eq!(support::raw::header(&answer, "ballast-code"), "body_timeout");
    assert!(closed);
    let waited = ballast::clock::now().saturating_duration_since(started);
    assert!(
        waited < std::time::Duration::from_secs(2),
        "at body_timeout: {waited:?}"
    );
    trickling.abort();
}

/// A payment at an upstream that does not deduplicate (run twice, it is paid twice), its store at `store`.
fn payments(store: &str) -> String {
    ConfigText::new()
        .store(store)
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            "side_effects = true\nper_try_timeout = \"2s\"",
        )
        .build()
}

/// Regression: with the SQLite file deleted (or replaced) while serving, `/status` said healthy and calls were
/// still acknowledged; after a restart a completed payment ran a second time. Made read-only, `/status` still
/// said healthy. Now each turns `/status` and `/readyz` unhealthy and side effects `store_unavailable` (nothing
/// runs) until the file is back; after that and a restart every acknowledged payment replays, none runs twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_store_file_deleted_replaced_or_made_read_only_is_noticed_and_nothing_runs_twice() {
    let upstream = chaos("").await;
    let gateway = Gateway::start(&payments("sqlite://{dir}/ballast.db"), &upstream, &[]);
    let client = client();
    let pay = |gateway: &Gateway, key: &'static str| {
        let (client, url) = (client.clone(), gateway.url("/v1/tools/process_payment"));
        async move {
            let response = client
                .post(url)
                .header("idempotency-key", key)
                .json(&json!({"op": key, "amount": 10}))
                .send()
                .await
                .expect("an answer");
            read(response).await
        }
    };
    let store = gateway.dir().join("ballast.db");
    let aside = gateway.dir().join("ballast.db.aside");
    let status_url = gateway.url("/status");
    let ready_url = gateway.url("/readyz");
    let healthy = || async {
        let status = support::gateway::get_json(&status_url).await;
        status["store"]["healthy"].as_bool().expect("a health")
    };
    // Unhealthy: /status (probed at once) and /readyz (the last probe, within a second) say so, and a payment
    // is refused with nothing run.
    let refused_while = |what: &'static str, key: &'static str| {
        let (ready_url, upstream) = (ready_url.clone(), &upstream);
        let gateway = &gateway;
        async move {
            let unhealthy = format!("{what}: /status says unhealthy");
            support::gateway::eventually(&unhealthy, || async { (!healthy().await).then_some(()) }).await;
            support::gateway::eventually(&format!("{what}: /readyz says so"), || async {
                let ready = support::gateway::get_json(&ready_url).await;
                (ready["store"] == "unavailable").then_some(())
            })
            .await;
            let (status, headers, body) = pay(gateway, key).await;
            assert_eq!(
                (status, header(&headers, "ballast-code")),
                (503, "store_unavailable"),
                "{what}: {body}"
            );
            assert_eq!(executions(upstream, key).await, 0, "{what}: nothing ran");
        }
    };
    let (status, _, body) = pay(&gateway, "pay-1").await;
    assert_eq!(status, 200, "{body}");
    assert!(healthy().await);
    // Deleted (moved away), then put back.
    std::fs::rename(&store, &aside).unwrap();
    refused_while("deleted", "pay-deleted").await;
    std::fs::rename(&aside, &store).unwrap();
    support::gateway::eventually("back at its path", || async { healthy().await.then_some(()) }).await;
    // Replaced by a copy (the original kept aside under another name), then the original put back.
    std::fs::hard_link(&store, &aside).unwrap();
    let copy = gateway.dir().join("ballast.db.copy");
    std::fs::copy(&store, &copy).unwrap();
    std::fs::rename(&copy, &store).unwrap();
    refused_while("replaced", "pay-replaced").await;
    std::fs::rename(&aside, &store).unwrap();
    support::gateway::eventually("the original is back", || async { healthy().await.then_some(()) }).await;
    // Made read-only, then writable again.
    let mut permissions = std::fs::metadata(&store).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&store, permissions.clone()).unwrap();
    refused_while("read-only", "pay-read-only").await;
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(&store, permissions).unwrap();
    support::gateway::eventually("writable again", || async { healthy().await.then_some(()) }).await;
    let (status, _, body) = pay(&gateway, "pay-2").await;
    assert_eq!(status, 200, "{body}");
    // A restart: every acknowledged payment replays, and none ran twice.
    gateway.signal("-TERM");
    assert_eq!(gateway.wait_for_exit(), Some(0));
    let gateway = gateway.restart();
    for key in ["pay-1", "pay-2"] {
        let (status, headers, body) = pay(&gateway, key).await;
        assert_eq!(
            (status, header(&headers, "idempotent-replayed")),
            (200, "true"),
            "{key}: {body}"
        );
        assert_eq!(executions(&upstream, key).await, 1, "{key} ran once");
    }
}

/// A lost PostgreSQL or Redis turns `/status` unhealthy and side effects `store_unavailable` (nothing runs) until
/// it is back; then they are served again.
#[tokio::test(flavor = "multi_thread")]
async fn a_lost_redis_or_postgresql_is_noticed_and_side_effects_fail_closed_until_it_is_back() {
    let upstream = chaos("").await;
    let servers = [
        ("Redis", "BALLAST_TEST_REDIS_URL", "redis://127.0.0.1:6379"),
        (
            "PostgreSQL",
            "BALLAST_TEST_POSTGRES_URL",
            "postgres://postgres@127.0.0.1:5432/test",
        ),
    ];
    for (what, var, default) in servers {
        let Some((url, addr)) = support::raw::service(what, var, default).await else {
            continue;
        };
        let proxy = support::raw::Cuttable::to(addr).await;
        let proxied = url.replacen(&addr.to_string(), &proxy.addr.to_string(), 1);
        let gateway = Gateway::start(&payments(&proxied), &upstream, &[]);
        let client = client();
        let run = uuid_like(what);
        let pay = |key: String| {
            let (client, url) = (client.clone(), gateway.url("/v1/tools/process_payment"));
            async move {
                let response = client
                    .post(url)
                    .header("idempotency-key", key.as_str())
                    .json(&json!({"op": key, "amount": 10}))
                    .send()
                    .await
                    .expect("an answer");
                read(response).await
            }
        };
        let healthy = || async {
            let status = support::gateway::get_json(&gateway.url("/status")).await;
            status["store"]["healthy"].as_bool().expect("a health")
        };
        let (status, _, body) = pay(format!("{run}-before")).await;
        assert_eq!(status, 200, "{what}: {body}");
        proxy.cut();
        support::gateway::eventually(&format!("{what} lost: /status says so"), || async {
            (!healthy().await).then_some(())
        })
        .await;
        let lost = format!("{run}-lost");
        let (status, headers, body) = pay(lost.clone()).await;
        assert_eq!(
            (status, header(&headers, "ballast-code")),
            (503, "store_unavailable"),
            "{what}: {body}"
        );
        assert_eq!(executions(&upstream, &lost).await, 0, "{what}: nothing ran");
        proxy.restore();
        support::gateway::eventually(&format!("{what} back: /status says so"), || async {
            healthy().await.then_some(())
        })
        .await;
        let after = format!("{run}-after");
        let (status, _, body) = support::gateway::eventually(&format!("{what}: served again"), || {
            let pay = pay(after.clone());
            async move {
                let answer = pay.await;
                (answer.0 == 200).then_some(answer)
            }
        })
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(executions(&upstream, &after).await, 1);
    }
}

/// An operation id of this test run's own (the stores are shared between runs): random, from std's hasher keys.
fn uuid_like(what: &str) -> String {
    use std::hash::BuildHasher as _;
    let random = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    format!("{what}-{random:016x}")
}

/// Regression: with no header or idle timeout and no cap, 1 100 idle connections under `ulimit -n 1024` locked out
/// every caller, `/healthz` included. Here the gateway may open 256 files; 300 connections that send nothing,
/// and 300 that send half a request's head, still leave `/healthz` and a tool call served in time.
#[tokio::test(flavor = "multi_thread")]
async fn a_flood_of_idle_and_slow_connections_beyond_the_file_limit_leaves_callers_served() {
    use tokio::io::AsyncWriteExt as _;
    let upstream = chaos("").await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool("echo", "{chaos}/echo", "concurrency = 8")
        .build();
    let gateway = Gateway::start_with_file_limit(&config, &upstream, &[], 256);
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .unwrap();
    let served = |what: &'static str| {
        let client = client.clone();
        let (healthz, echo) = (gateway.url("/healthz"), gateway.url("/v1/tools/echo"));
        async move {
            let health = client
                .get(healthz)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{what}: /healthz: {e}"));
            assert_eq!(health.status(), 200, "{what}");
            let call = client.post(echo).json(&json!({})).send().await;
            let call = call.unwrap_or_else(|e| panic!("{what}: a tool call: {e}"));
            assert_eq!(call.status(), 200, "{what}");
        }
    };
    served("before").await;
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(support::raw::connect(gateway.addr).await);
    }
    served("300 idle connections open").await;
    let mut slow = Vec::new();
    for _ in 0..300 {
        let mut stream = support::raw::connect(gateway.addr).await;
        let _ = stream
            .write_all(b"POST /v1/tools/echo HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            .await;
        slow.push(stream);
    }
    served("300 slow heads open too").await;
    // An evicted connection is told to close and closes in its own task: on a busy machine a few are still
    // closing when the last one is accepted, so the count is read until they have (the cap, and /status's own
    // connection).
    let status = support::gateway::eventually("the evicted connections closed", || async {
        let status = support::gateway::get_json(&gateway.url("/status")).await;
        let connections = &status["connections"];
        let (open, max) = (connections["open"].as_u64()?, connections["max"].as_u64()?);
        (open <= max + 1).then_some(status)
    })
    .await;
    let connections = &status["connections"];
    let max = connections["max"].as_u64().unwrap();
    assert!(max < 256, "the cap is below the file limit: {connections}");
    assert!(
        connections["evicted"].as_u64().unwrap() >= 600 - max,
        "{connections}"
    );
    assert!(
        gateway.stderr().contains("server.max_connections lowered"),
        "{}",
        gateway.stderr()
    );
}

/// Regression: a caller that sent its headers slowly, or nothing, or kept a connection idle, held it forever.
#[tokio::test(flavor = "multi_thread")]
async fn slow_headers_and_idle_connections_are_closed_at_their_timeouts() {
    use tokio::io::AsyncWriteExt as _;
    let upstream = chaos("").await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .server("header_timeout = \"400ms\"\nidle_timeout = \"800ms\"")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
    let patience = std::time::Duration::from_secs(5);
    let within = |waited: std::time::Duration, low: u64, high: u64, what: &str| {
        assert!(
            waited >= std::time::Duration::from_millis(low)
                && waited < std::time::Duration::from_millis(high),
            "{what}: closed after {waited:?}"
        );
    };
    // Nothing sent, and half a head sent then nothing: closed without an answer at the header timeout.
    let started = ballast::clock::now();
    let mut silent = support::raw::connect(gateway.addr).await;
    let mut half = support::raw::connect(gateway.addr).await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    for (what, stream) in [("silent", &mut silent), ("half a head", &mut half)] {
        let (answer, closed) = support::raw::read_until_closed(stream, patience).await;
        assert!(closed && answer.is_empty(), "{what}: {answer:?}");
    }
    within(
        ballast::clock::now().saturating_duration_since(started),
        350,
        3_000,
        "header timeout",
    );
    // A head trickled a byte every 100 ms: the header timeout counts from its first byte, not from the last.
    let (mut reader, mut writer) = support::raw::connect(gateway.addr).await.into_split();
    let started = ballast::clock::now();
    let trickle = tokio::spawn(async move {
        for byte in b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n" {
            if writer.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    });
    let (answer, closed) = support::raw::read_until_closed(&mut reader, patience).await;
    assert!(closed && answer.is_empty(), "trickled: {answer:?}");
    within(
        ballast::clock::now().saturating_duration_since(started),
        350,
        3_000,
        "a trickled head",
    );
    trickle.abort();
    // A kept-alive connection, answered, then idle: closed at the idle timeout, later than a header timeout.
    let mut stream = support::raw::connect(gateway.addr).await;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let answered = ballast::clock::now();
    let (rest, closed) = support::raw::read_until_closed(&mut stream, patience).await;
    assert!(closed && rest.is_empty(), "{rest:?}");
    within(
        ballast::clock::now().saturating_duration_since(answered),
        700,
        3_000,
        "idle timeout",
    );
}
