//! Side effects kept single, as a caller sees them over HTTP: commit-then-lose with an upstream that deduplicates
//! and one that does not, one key sent sixteen times at once, two calls of one step, a caller that disconnects
//! after dispatch (its request's future dropped, as hyper drops it when the connection closes). Paused time: the
//! attempts' 300 ms timeouts and the upstream's latencies pass at once.

use ballast_testkit::ConfigText;
use serde_json::{Value, json};

use crate::support::{Gateway, Upstream, eventually, header, read};

/// The gateway's tools: `create_refund` over an upstream that deduplicates by key (`keyed`), `process_payment`
/// over one that does not (`none`); attempts time out after 300 ms.
fn config() -> String {
    ConfigText::new()
        .tool(
            "create_refund",
            "http://chaos/tools/create_refund",
            "side_effects = true\nupstream_idempotency = \"keyed\"\nper_try_timeout = \"300ms\"",
        )
        .tool(
            "process_payment",
            "http://chaos/tools/process_payment",
            "side_effects = true\nupstream_idempotency = \"none\"\nper_try_timeout = \"300ms\"",
        )
        .build()
}

fn refund(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001", "amount": 500})
}

#[tokio::test(start_paused = true)]
async fn commit_then_lose_with_a_deduplicating_upstream_runs_once_and_the_retry_gets_the_answer() {
    let upstream = Upstream::chaos(
        r#"
        [endpoints.create_refund]
        key_mode = "keyed"
        lose_with = "hang"
        [[scripts]]
        endpoint = "create_refund"
        op = "o-keyed"
        steps = ["commit_then_lose"]
        "#,
    );
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
    let key = [("idempotency-key", "k-keyed")];
    let (status, headers, body) = read(gateway.call("create_refund", &refund("o-keyed"), &key).await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        header(&headers, "ballast-attempts"),
        "2",
        "the lost answer was retried with the same key"
    );
    assert_eq!(header(&headers, "ballast-idempotency-key"), "k-keyed");
    assert_eq!(upstream.executions("o-keyed").await, 1);
    // The caller's own retry gets the stored answer; nothing runs again.
    let (status, headers, again) = read(gateway.call("create_refund", &refund("o-keyed"), &key).await).await;
    assert_eq!((status, header(&headers, "idempotent-replayed")), (200, "true"));
    assert_eq!(again, body);
    assert_eq!(upstream.executions("o-keyed").await, 1);
}

#[tokio::test(start_paused = true)]
async fn commit_then_lose_without_deduplication_is_outcome_unknown_and_never_run_again() {
    let upstream = Upstream::chaos(
        r#"
        [endpoints.process_payment]
        key_mode = "none"
        lose_with = "hang"
        [[scripts]]
        endpoint = "process_payment"
        op = "o-none"
        steps = ["commit_then_lose"]
        "#,
    );
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
    let key = [("idempotency-key", "k-none")];
    let (status, headers, body) = read(gateway.call("process_payment", &refund("o-none"), &key).await).await;
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
    let operation = gateway.get_json("/v1/operations/k-none").await;
    assert_eq!(operation["status"], "outcome_unknown", "{operation}");
    // A retry anyway runs nothing.
    let (status, headers, body) = read(gateway.call("process_payment", &refund("o-none"), &key).await).await;
    assert_eq!(
        (status, &body["code"]),
        (502, &json!("outcome_unknown")),
        "{body}"
    );
    assert_eq!(header(&headers, "x-should-retry"), "false");
    assert_eq!(upstream.executions("o-none").await, 1);
}

#[tokio::test(start_paused = true)]
async fn sixteen_requests_with_one_key_at_once_execute_once() {
    let upstream = Upstream::chaos(
        r#"
        [endpoints.process_payment]
        key_mode = "none"
        latency = { p50 = "200ms", p99 = "200ms" }
        "#,
    );
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
    let calls = (0..16).map(|_| {
        let gateway = &gateway;
        async move {
            read(
                gateway
                    .call("process_payment", &refund("o-16"), &[("idempotency-key", "k-16")])
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
    assert_eq!(upstream.executions("o-16").await, 1);
}

#[tokio::test(start_paused = true)]
async fn two_calls_of_one_step_run_twice_and_their_resends_run_nothing() {
    let upstream = Upstream::chaos("[endpoints.create_refund]\nkey_mode = \"none\"\n");
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
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
            gateway
                .call("create_refund", &refund("o-step"), &step(ordinal))
                .await,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(header(&headers, "idempotent-replayed"), "");
        keys.push(header(&headers, "ballast-idempotency-key").to_owned());
    }
    assert_ne!(keys[0], keys[1], "two calls of one step have two keys");
    assert_eq!(upstream.executions("o-step").await, 2);
    for (ordinal, key) in ["0", "1"].into_iter().zip(&keys) {
        let (status, headers, _) = read(
            gateway
                .call("create_refund", &refund("o-step"), &step(ordinal))
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
    assert_eq!(upstream.executions("o-step").await, 2);
}

/// The caller goes away once its call is at the upstream: the request's future is dropped, as the server drops it
/// when its connection closes.
#[tokio::test(start_paused = true)]
async fn a_caller_that_disconnects_after_dispatch_still_gets_its_answer_stored() {
    let upstream = Upstream::chaos(
        r#"
        [endpoints.process_payment]
        key_mode = "none"
        latency = { p50 = "250ms", p99 = "250ms" }
        "#,
    );
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
    let caller = tokio::spawn({
        let gateway = gateway.clone();
        async move {
            let key = [("idempotency-key", "k-gone")];
            gateway.call("process_payment", &refund("o-gone"), &key).await
        }
    });
    eventually("the upstream call is in flight", || async {
        (upstream.stats().await["in_flight"].as_u64() > Some(0)).then_some(())
    })
    .await;
    caller.abort();
    assert!(
        caller.await.is_err_and(|e| e.is_cancelled()),
        "it went away before its answer"
    );
    eventually("the side effect ran", || async {
        (upstream.executions("o-gone").await == 1).then_some(())
    })
    .await;
    let (headers, body) = eventually("the answer is stored and replayed", || async {
        let key = [("idempotency-key", "k-gone")];
        let (status, headers, body) =
            read(gateway.call("process_payment", &refund("o-gone"), &key).await).await;
        (status == 200).then_some((headers, body))
    })
    .await;
    assert_eq!(header(&headers, "idempotent-replayed"), "true", "{body}");
    assert_eq!(body["status"], "succeeded", "{body}");
    assert_eq!(upstream.executions("o-gone").await, 1);
}
