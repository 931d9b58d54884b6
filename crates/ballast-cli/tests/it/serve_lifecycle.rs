//! `ballast serve` stopping: SIGTERM with requests in flight lets them finish and loses nothing; kill -9 in the
//! middle of a side effect, then a restart on the same SQLite file, answers the retry at once — a replay or
//! `outcome_unknown` — and never runs the side effect twice.

use crate::support;

use std::time::Duration;

use ballast_testkit::ConfigText;
use serde_json::{Value, json};
use support::gateway::{Gateway, call, chaos, client, eventually, executions, get_json, header, read};

/// A grace of 5 s, and side effects at an upstream that does not deduplicate (`process_payment`) and at one that
/// does (`create_refund`).
fn config() -> String {
    ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .server("grace = \"5s\"")
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            "side_effects = true\nupstream_idempotency = \"none\"\nper_try_timeout = \"3s\"",
        )
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            "side_effects = true\nupstream_idempotency = \"keyed\"\nper_try_timeout = \"3s\"",
        )
        .build()
}

fn payment(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001", "amount": 500})
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_requests_in_flight_finish_and_loses_nothing() {
    let upstream = chaos(
        r#"
        [endpoints.process_payment]
        key_mode = "none"
        latency = { p50 = "700ms", p99 = "700ms" }
        "#,
    )
    .await;
    let gateway = Gateway::start(&config(), &upstream, &[]);
    let client = client();
    let in_flight: Vec<_> = (0..3)
        .map(|i| {
            let (client, url) = (client.clone(), gateway.url("/v1/tools/process_payment"));
            tokio::spawn(async move {
                let response = client
                    .post(url)
                    .header("idempotency-key", format!("k-term-{i}"))
                    .json(&payment(&format!("o-term-{i}")))
                    .send()
                    .await
                    .expect("answered before the gateway stopped");
                read(response).await
            })
        })
        .collect();
    eventually("three payments are at the upstream", || async {
        (get_json(&upstream.url("/stats")).await["in_flight"].as_u64() == Some(3)).then_some(())
    })
    .await;
    gateway.signal("-TERM");
    // Readiness fails first, while the requests still run.
    eventually("/readyz fails once draining", || async {
        let status = client.get(gateway.url("/readyz")).send().await.ok()?.status();
        (status == reqwest::StatusCode::SERVICE_UNAVAILABLE).then_some(())
    })
    .await;
    for task in in_flight {
        let (status, headers, body) = task.await.expect("the task ran");
        assert_eq!(status, 200, "{body}");
        assert_eq!(header(&headers, "idempotent-replayed"), "");
    }
    assert_eq!(gateway.wait_for_exit(), Some(0), "{}", gateway.stderr());
    // Nothing was lost: after a restart every key replays its answer, and nothing ran twice.
    let gateway = gateway.restart();
    for i in 0..3 {
        let key = format!("k-term-{i}");
        let (status, headers, _) = read(
            call(
                &client,
                &gateway,
                "process_payment",
                &payment(&format!("o-term-{i}")),
                &[("idempotency-key", &key)],
            )
            .await,
        )
        .await;
        assert_eq!(
            (status, header(&headers, "idempotent-replayed")),
            (200, "true"),
            "{key}"
        );
        assert_eq!(executions(&upstream, &format!("o-term-{i}")).await, 1);
    }
}

/// Starts a payment through `gateway`, waits until the upstream holds it, kills the gateway with SIGKILL and
/// starts it again on the same store.
async fn kill_mid_request(
    gateway: Gateway,
    upstream: &ballast_chaos::ChaosServer,
    tool: &str,
    key: &str,
    op: &str,
) -> Gateway {
    let (url, key_owned, body) = (
        gateway.url(&format!("/v1/tools/{tool}")),
        key.to_owned(),
        payment(op),
    );
    let cut = tokio::spawn(async move {
        // The connection dies with the gateway: an error is the expected end.
        let _ = client()
            .post(url)
            .header("idempotency-key", key_owned)
            .json(&body)
            .send()
            .await;
    });
    eventually("the side effect is at the upstream", || async {
        (get_json(&upstream.url("/stats")).await["in_flight"].as_u64() > Some(0)).then_some(())
    })
    .await;
    gateway.kill9();
    let _ = cut.await;
    gateway.restart()
}

/// A client that gives up after 3 s: the restarted gateway must not wait out a 10 s lease.
fn impatient() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .expect("a client")
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_payment_then_a_restart_answers_the_retry_outcome_unknown_at_once() {
    let upstream = chaos(
        r#"
        [endpoints.process_payment]
        key_mode = "none"
        latency = { p50 = "1500ms", p99 = "1500ms" }
        "#,
    )
    .await;
    let gateway = Gateway::start(&config(), &upstream, &[]);
    let gateway = kill_mid_request(gateway, &upstream, "process_payment", "k-kill", "o-kill").await;
    let key = [("idempotency-key", "k-kill")];
    let (status, headers, body) = read(
        call(
            &impatient(),
            &gateway,
            "process_payment",
            &payment("o-kill"),
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, &body["code"]),
        (502, &json!("outcome_unknown")),
        "{body}"
    );
    assert_eq!(header(&headers, "x-should-retry"), "false");
    let operation = get_json(&gateway.url("/v1/operations/k-kill")).await;
    assert_eq!(operation["status"], "outcome_unknown", "{operation}");
    // Whether the payment the dead gateway sent ran is the upstream's to say (the chaos upstream drops work whose
    // client went away before it acted); a retry never sends a second one.
    let (status, _, body) = read(
        call(
            &impatient(),
            &gateway,
            "process_payment",
            &payment("o-kill"),
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(
        (status, &body["code"]),
        (502, &json!("outcome_unknown")),
        "{body}"
    );
    assert!(executions(&upstream, "o-kill").await <= 1);
    let stats = get_json(&upstream.url("/stats")).await;
    assert_eq!(
        stats["endpoints"]["process_payment"]["requests"], 1,
        "one payment request ever reached it: {stats}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_mid_refund_to_a_deduplicating_upstream_then_a_restart_gets_the_one_answer() {
    let upstream = chaos(
        r#"
        [endpoints.create_refund]
        key_mode = "keyed"
        latency = { p50 = "1500ms", p99 = "1500ms" }
        "#,
    )
    .await;
    let gateway = Gateway::start(&config(), &upstream, &[]);
    let gateway = kill_mid_request(
        gateway,
        &upstream,
        "create_refund",
        "k-kill-keyed",
        "o-kill-keyed",
    )
    .await;
    // The restarted gateway re-sends with the same key; the upstream answers its one execution (after waiting out
    // its in-progress 409), so the caller gets the refund's answer, not a second refund.
    let (status, _, body) = read(
        call(
            &client(),
            &gateway,
            "create_refund",
            &payment("o-kill-keyed"),
            &[("idempotency-key", "k-kill-keyed")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "succeeded", "{body}");
    assert_eq!(executions(&upstream, "o-kill-keyed").await, 1);
}
