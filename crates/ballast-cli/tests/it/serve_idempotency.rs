//! `ballast serve` keeps side effects single, as a caller sees it over HTTP: commit-then-lose with an upstream
//! that deduplicates and one that does not, one key sent sixteen times at once, two calls of one step, a caller
//! that disconnects after dispatch.

use crate::support;

use std::io::Write as _;

use serde_json::{Value, json};
use support::gateway::{Gateway, call, chaos, client, eventually, executions, get_json, header, read};

/// The gateway's tools: `create_refund` over an upstream that deduplicates by key (`keyed`), `process_payment`
/// over one that does not (`none`); attempts time out after 300 ms.
const CONFIG: &str = r#"
version = 1
[store]
url = "sqlite://{dir}/ballast.db"
[[tools]]
name = "create_refund"
upstream = { method = "POST", url = "{chaos}/tools/create_refund" }
side_effects = true
upstream_idempotency = "keyed"
per_try_timeout = "300ms"
[[tools]]
name = "process_payment"
upstream = { method = "POST", url = "{chaos}/tools/process_payment" }
side_effects = true
upstream_idempotency = "none"
per_try_timeout = "300ms"
"#;

fn refund(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001", "amount": 500})
}

#[tokio::test(flavor = "multi_thread")]
async fn commit_then_lose_with_a_deduplicating_upstream_runs_once_and_the_retry_gets_the_answer() {
    let upstream = chaos(
        r#"
        [endpoints.create_refund]
        key_mode = "keyed"
        lose_with = "hang"
        [[scripts]]
        endpoint = "create_refund"
        op = "o-keyed"
        steps = ["commit_then_lose"]
        "#,
    )
    .await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    let key = [("idempotency-key", "k-keyed")];
    let (status, headers, body) =
        read(call(&client, &gateway, "create_refund", &refund("o-keyed"), &key).await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        header(&headers, "ballast-attempts"),
        "2",
        "the lost answer was retried with the same key"
    );
    assert_eq!(header(&headers, "ballast-idempotency-key"), "k-keyed");
    assert_eq!(executions(&upstream, "o-keyed").await, 1);
    // The caller's own retry gets the stored answer; nothing runs again.
    let (status, headers, again) =
        read(call(&client, &gateway, "create_refund", &refund("o-keyed"), &key).await).await;
    assert_eq!((status, header(&headers, "idempotent-replayed")), (200, "true"));
    assert_eq!(again, body);
    assert_eq!(executions(&upstream, "o-keyed").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn commit_then_lose_without_deduplication_is_outcome_unknown_and_never_run_again() {
    let upstream = chaos(
        r#"
        [endpoints.process_payment]
        key_mode = "none"
        lose_with = "hang"
        [[scripts]]
        endpoint = "process_payment"
        op = "o-none"
        steps = ["commit_then_lose"]
        "#,
    )
    .await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    let key = [("idempotency-key", "k-none")];
    let (status, headers, body) =
        read(call(&client, &gateway, "process_payment", &refund("o-none"), &key).await).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["code"], "outcome_unknown");
    assert_eq!(body["type"], "urn:ballast:outcome_unknown");
    assert_eq!(header(&headers, "ballast-outcome"), "unknown");
    assert_eq!(
        header(&headers, "x-should-retry"),
        "false",
        "an SDK must not pay twice"
    );
    assert_eq!(header(&headers, "ballast-idempotency-key"), "k-none");
    assert!(
        body["detail"].as_str().unwrap().contains("/v1/operations/k-none"),
        "{body}"
    );
    // What a caller who believes it does next: check the operation.
    let operation = get_json(&gateway.url("/v1/operations/k-none")).await;
    assert_eq!(operation["status"], "outcome_unknown", "{operation}");
    // A retry anyway runs nothing.
    let (status, headers, body) =
        read(call(&client, &gateway, "process_payment", &refund("o-none"), &key).await).await;
    assert_eq!(
        (status, &body["code"]),
        (502, &json!("outcome_unknown")),
        "{body}"
    );
    assert_eq!(header(&headers, "x-should-retry"), "false");
    assert_eq!(executions(&upstream, "o-none").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn sixteen_requests_with_one_key_at_once_execute_once() {
    let upstream = chaos(
        r#"
        [endpoints.process_payment]
        key_mode = "none"
        latency = { p50 = "200ms", p99 = "200ms" }
        "#,
    )
    .await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    let calls = (0..16).map(|_| {
        let (client, gateway) = (client.clone(), &gateway);
        async move {
            read(
                call(
                    &client,
                    gateway,
                    "process_payment",
                    &refund("o-16"),
                    &[("idempotency-key", "k-16")],
                )
                .await,
            )
            .await
        }
    });
    let answers = futures::future::join_all(calls).await;
    let mut fresh = 0;
    for (status, headers, body) in &answers {
        match status {
            200 if header(headers, "idempotent-replayed") == "true" => {}
            200 => fresh += 1,
            409 => {
                assert_eq!(body["type"], "urn:ballast:idempotency_in_progress", "{body}");
                assert_eq!(header(headers, "x-should-retry"), "true");
                assert!(!header(headers, "retry-after").is_empty());
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(fresh, 1, "exactly one request ran: {answers:?}");
    assert_eq!(executions(&upstream, "o-16").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_calls_of_one_step_run_twice_and_their_resends_run_nothing() {
    let upstream = chaos("[endpoints.create_refund]\nkey_mode = \"none\"\n").await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    let step = |ordinal: &'static str| {
        [
            ("ballast-run-id", "run-1"),
            ("ballast-step-id", "step-3"),
            ("ballast-call-ordinal", ordinal),
        ]
    };
    let mut keys = Vec::new();
    for ordinal in ["0", "1"] {
        let (status, headers, body) = read(
            call(
                &client,
                &gateway,
                "create_refund",
                &refund("o-step"),
                &step(ordinal),
            )
            .await,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(header(&headers, "idempotent-replayed"), "");
        keys.push(header(&headers, "ballast-idempotency-key").to_owned());
    }
    assert_ne!(keys[0], keys[1], "two calls of one step have two keys");
    assert_eq!(executions(&upstream, "o-step").await, 2);
    for (ordinal, key) in ["0", "1"].into_iter().zip(&keys) {
        let (status, headers, _) = read(
            call(
                &client,
                &gateway,
                "create_refund",
                &refund("o-step"),
                &step(ordinal),
            )
            .await,
        )
        .await;
        assert_eq!((status, header(&headers, "idempotent-replayed")), (200, "true"));
        assert_eq!(
            header(&headers, "ballast-idempotency-key"),
            key,
            "a re-run step re-sends the same key"
        );
    }
    assert_eq!(executions(&upstream, "o-step").await, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_that_disconnects_after_dispatch_still_gets_its_answer_stored() {
    let upstream = chaos(
        r#"
        [endpoints.process_payment]
        key_mode = "none"
        latency = { p50 = "250ms", p99 = "250ms" }
        "#,
    )
    .await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let body = refund("o-gone").to_string();
    let mut socket = std::net::TcpStream::connect(gateway.addr).expect("connects");
    write!(
        socket,
        "POST /v1/tools/process_payment HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Idempotency-Key: k-gone\r\nContent-Length: {}\r\n\r\n{body}",
        gateway.addr,
        body.len()
    )
    .expect("sent");
    eventually("the upstream call is in flight", || async {
        (get_json(&upstream.url("/stats")).await["in_flight"].as_u64() > Some(0)).then_some(())
    })
    .await;
    drop(socket);
    eventually("the side effect ran", || async {
        (executions(&upstream, "o-gone").await == 1).then_some(())
    })
    .await;
    let client = client();
    let (headers, body) = eventually("the answer is stored and replayed", || async {
        let (status, headers, body) = read(
            call(
                &client,
                &gateway,
                "process_payment",
                &refund("o-gone"),
                &[("idempotency-key", "k-gone")],
            )
            .await,
        )
        .await;
        (status == 200).then_some((headers, body))
    })
    .await;
    assert_eq!(header(&headers, "idempotent-replayed"), "true", "{body}");
    assert_eq!(body["status"], "succeeded", "{body}");
    assert_eq!(executions(&upstream, "o-gone").await, 1);
}
