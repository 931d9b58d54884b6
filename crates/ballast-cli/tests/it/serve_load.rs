//! `ballast serve` under load, as a caller reads it: a shed invites a retry (`Retry-After`,
//! `x-should-retry: true`), a deadline shed does not; a run's deadline and retry allowance hold across separate
//! HTTP calls; `/metrics` is Prometheus text that moves with the calls; `/status` shows what decides.

use crate::support;
use ballast_testkit::Samples;

use serde_json::{Value, json};
use support::gateway::{Gateway, call, chaos, client, eventually, get_json, header, read};

const CONFIG: &str = r#"
version = 1
[store]
url = "sqlite://{dir}/ballast.db"
[run]
retry_allowance = 1
retry_allowance_per_call = 0.0
[[tools]]
name = "lookup_order"
upstream = { method = "POST", url = "{chaos}/tools/lookup_order" }
per_try_timeout = "2s"
retry = { max_attempts = 3, base = "10ms", cap = "10ms" }
[[tools]]
name = "search_products"
upstream = { method = "POST", url = "{chaos}/tools/lookup_order" }
per_try_timeout = "2s"
concurrency = 1
queue = 0
[[tools]]
name = "search_queued"
upstream = { method = "POST", url = "{chaos}/tools/lookup_order" }
per_try_timeout = "2s"
concurrency = 1
queue = 4
"#;

fn lookup(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001"})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shed_invites_a_retry_and_a_deadline_shed_does_not() {
    let upstream = chaos("[endpoints.lookup_order]\nlatency = { p50 = \"800ms\", p99 = \"800ms\" }\n").await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    let holders: Vec<_> = ["search_products", "search_queued"]
        .into_iter()
        .map(|tool| {
            let (client, url) = (client.clone(), gateway.url(&format!("/v1/tools/{tool}")));
            tokio::spawn(async move {
                client
                    .post(url)
                    .json(&lookup("o-hold"))
                    .send()
                    .await
                    .map(|r| r.status())
            })
        })
        .collect();
    eventually("both slots are taken", || async {
        (get_json(&upstream.url("/stats")).await["in_flight"].as_u64() == Some(2)).then_some(())
    })
    .await;
    // No slot and no queue: shed for room. Nothing reached the upstream, so a retry is invited.
    let (status, headers, body) =
        read(call(&client, &gateway, "search_products", &lookup("o-shed"), &[]).await).await;
    assert_eq!((status, &body["code"]), (503, &json!("overloaded")), "{body}");
    assert_eq!(header(&headers, "ballast-shed"), "queue_full");
    assert_eq!(header(&headers, "x-should-retry"), "true");
    let retry_after: u64 = header(&headers, "retry-after")
        .parse()
        .expect("Retry-After in seconds");
    let retry_after_ms: u64 = header(&headers, "retry-after-ms")
        .parse()
        .expect("retry-after-ms");
    assert!(
        (1..=60).contains(&retry_after) && retry_after_ms <= 60_000,
        "{retry_after} s, {retry_after_ms} ms"
    );
    // Queued behind an 800 ms call with a 300 ms deadline: it cannot be served in time. A retry cannot help.
    let (status, headers, body) = read(
        call(
            &client,
            &gateway,
            "search_queued",
            &lookup("o-late"),
            &[("ballast-timeout-ms", "300")],
        )
        .await,
    )
    .await;
    assert!(status == 503 || status == 504, "{status}: {body}");
    assert_eq!(header(&headers, "x-should-retry"), "false", "{body}");
    assert!(
        header(&headers, "retry-after-ms").is_empty(),
        "no retry is invited: {body}"
    );
    for holder in holders {
        assert_eq!(
            holder.await.expect("ran").expect("answered"),
            reqwest::StatusCode::OK
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_retry_allowance_holds_across_separate_http_calls() {
    let upstream = chaos(
        r#"
        [[scripts]]
        endpoint = "lookup_order"
        op = "o-a"
        steps = ["503", "503", "ok"]
        [[scripts]]
        endpoint = "lookup_order"
        op = "o-b"
        steps = ["503", "ok"]
        [[scripts]]
        endpoint = "lookup_order"
        op = "o-c"
        steps = ["503", "ok"]
        "#,
    )
    .await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    let run = |id: &'static str| [("ballast-run-id", id)];
    // The run's one retry goes to its first call, which then stops at its second 503.
    let (status, headers, _) =
        read(call(&client, &gateway, "lookup_order", &lookup("o-a"), &run("run-1")).await).await;
    assert_eq!(status, 503);
    assert_eq!(header(&headers, "ballast-code"), "run_allowance_exhausted");
    assert_eq!(header(&headers, "ballast-attempts"), "2");
    assert_eq!(header(&headers, "x-should-retry"), "false");
    // A second HTTP call of the same run has no retry left.
    let (status, headers, _) =
        read(call(&client, &gateway, "lookup_order", &lookup("o-b"), &run("run-1")).await).await;
    assert_eq!((status, header(&headers, "ballast-attempts")), (503, "1"));
    assert_eq!(header(&headers, "ballast-code"), "run_allowance_exhausted");
    // Another run has its own.
    let (status, headers, _) =
        read(call(&client, &gateway, "lookup_order", &lookup("o-c"), &run("run-2")).await).await;
    assert_eq!((status, header(&headers, "ballast-attempts")), (200, "2"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runs_deadline_holds_across_separate_http_calls() {
    let upstream = chaos("").await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    let remaining = |headers: &reqwest::header::HeaderMap| -> u64 {
        header(headers, "ballast-remaining-ms")
            .parse()
            .expect("ballast-remaining-ms")
    };
    let first = [("ballast-run-id", "run-d"), ("ballast-timeout-ms", "1500")];
    let (status, headers, _) =
        read(call(&client, &gateway, "lookup_order", &lookup("o-1"), &first).await).await;
    assert_eq!(status, 200);
    assert!(remaining(&headers) <= 1500);
    // A later call of the run without a deadline header keeps the run's deadline, not the 30 s default.
    let (status, headers, _) = read(
        call(
            &client,
            &gateway,
            "lookup_order",
            &lookup("o-2"),
            &[("ballast-run-id", "run-d")],
        )
        .await,
    )
    .await;
    assert_eq!(status, 200);
    assert!(remaining(&headers) <= 1500, "{}", remaining(&headers));
    // Once it has passed, every call of the run is refused, saying what a run id is (just before, a call is
    // refused for the little time left, and the polling goes on).
    let body = eventually("the run's deadline passes", || async {
        let (status, headers, body) = read(
            call(
                &client,
                &gateway,
                "lookup_order",
                &lookup("o-3"),
                &[("ballast-run-id", "run-d")],
            )
            .await,
        )
        .await;
        let passed = body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("a run id names one agent request"));
        (status == 504 && passed).then(|| {
            assert_eq!(header(&headers, "x-should-retry"), "false");
            body
        })
    })
    .await;
    assert_eq!(body["code"], "deadline_exceeded");
    // An SDK's per-request timeout bounds its call, never its run.
    let sdk = [("ballast-run-id", "run-sdk"), ("x-stainless-read-timeout", "1.0")];
    let (_, headers, _) = read(call(&client, &gateway, "lookup_order", &lookup("o-4"), &sdk).await).await;
    assert!(remaining(&headers) <= 1000);
    let (_, headers, _) = read(
        call(
            &client,
            &gateway,
            "lookup_order",
            &lookup("o-5"),
            &[("ballast-run-id", "run-sdk")],
        )
        .await,
    )
    .await;
    assert!(
        remaining(&headers) > 20_000,
        "the default, not the SDK's second: {}",
        remaining(&headers)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_prometheus_text_that_moves_with_calls_and_status_shows_what_decides() {
    let upstream = chaos("").await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    let scrape = || async {
        Samples::parse(
            &client
                .get(gateway.url("/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        )
    };
    let before = scrape().await;
    for name in [
        "ballast_idempotency_total",
        "ballast_retry_budget_exhausted_total",
        "ballast_throttled_total",
    ] {
        assert!(
            before.series().any(|k| k.starts_with(name)),
            "{name} is registered from the start"
        );
    }
    let ok = ["target=\"lookup_order\"", "outcome=\"ok\""];
    let requests_before = before.total("ballast_requests_total", &ok);
    for op in ["o-m1", "o-m2"] {
        let (status, _, _) = read(call(&client, &gateway, "lookup_order", &lookup(op), &[]).await).await;
        assert_eq!(status, 200);
    }
    let after = scrape().await;
    assert_eq!(after.total("ballast_requests_total", &ok) - requests_before, 2.0);
    assert!(after.total("ballast_attempts_total", &["target=\"lookup_order\""]) >= 2.0);
    assert!(
        after
            .series()
            .any(|k| k.starts_with("ballast_overhead_seconds_bucket")),
        "the overhead histogram"
    );
    assert!(
        after.total(
            "ballast_request_duration_seconds_count",
            &["route=\"lookup_order\""]
        ) >= 2.0
    );

    let status = get_json(&gateway.url("/status")).await;
    let lookup_status = &status["tools"]["lookup_order"];
    assert_eq!(lookup_status["breaker"]["state"], "closed", "{status}");
    assert!(
        lookup_status["retry_budget"]["available"].as_u64().is_some(),
        "{status}"
    );
    assert_eq!(
        lookup_status["admission"]["queued_by_class"]["critical"], 0,
        "{status}"
    );
    assert!(
        lookup_status["throttle"]["refusal_probability"].is_number(),
        "{status}"
    );
    assert!(status["runs"]["in_flight"].is_u64(), "{status}");
    assert_eq!(status["store"]["healthy"], true, "{status}");
    assert_eq!(status["store"]["backend"], "sqlite", "{status}");
}
