//! Under load, as a caller reads it: a shed invites a retry (`Retry-After`, `x-should-retry: true`), a deadline
//! shed does not; `/metrics` moves with the calls; `/status` shows what decides.

use ballast_testkit::{ConfigText, Samples};
use serde_json::{Value, json};

use crate::support::{Gateway, Upstream, eventually, header, read};

fn lookup(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001"})
}

/// Paused time: the upstream's 800 ms holds both slots while the test is refused, whatever the machine's speed.
#[tokio::test(start_paused = true)]
async fn a_shed_invites_a_retry_and_a_deadline_shed_does_not() {
    let upstream =
        Upstream::chaos("[endpoints.lookup_order]\nlatency = { p50 = \"800ms\", p99 = \"800ms\" }\n");
    let config = ConfigText::new()
        .tool(
            "search_products",
            "http://chaos/tools/lookup_order",
            "per_try_timeout = \"2s\"\nconcurrency = 1\nqueue = 0",
        )
        .tool(
            "search_queued",
            "http://chaos/tools/lookup_order",
            "per_try_timeout = \"2s\"\nconcurrency = 1\nqueue = 4",
        )
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]).await;
    let holders: Vec<_> = ["search_products", "search_queued"]
        .into_iter()
        .map(|tool| {
            let gateway = gateway.clone();
            tokio::spawn(async move { gateway.call(tool, &lookup("o-hold"), &[]).await.status() })
        })
        .collect();
    eventually("both slots are taken", || async {
        (upstream.stats().await["in_flight"].as_u64() == Some(2)).then_some(())
    })
    .await;
    // No slot and no queue: shed for room. Nothing reached the upstream, so a retry is invited.
    let (status, headers, body) = read(gateway.call("search_products", &lookup("o-shed"), &[]).await).await;
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
        gateway
            .call(
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
        assert_eq!(holder.await.expect("ran"), http::StatusCode::OK);
    }
}

/// `/metrics` moves with the calls, `/status` shows what decides. The tool is named after the test, so the
/// series it reads are its own (`support::metrics`); that the counters are registered from the start and the
/// histograms have buckets is the binary's recorder, tested in `ballast-cli`'s `serve_load`.
#[tokio::test]
async fn metrics_move_with_calls_and_status_shows_what_decides() {
    let upstream = Upstream::chaos("");
    let config = ConfigText::new()
        .run("retry_allowance = 1\nretry_allowance_per_call = 0.0")
        .tool(
            "lookup_metered",
            "http://chaos/tools/lookup_order",
            "per_try_timeout = \"2s\"\nretry = { max_attempts = 3, base = \"10ms\", cap = \"10ms\" }",
        )
        .build();
    let gateway = Gateway::metered(&config, &[("chaos", &upstream)], &[]).await;
    let before = Samples::parse(&gateway.metrics().await);
    let ok = ["target=\"lookup_metered\"", "outcome=\"ok\""];
    let requests_before = before.total("ballast_requests_total", &ok);
    for op in ["o-m1", "o-m2"] {
        let (status, _, _) = read(gateway.call("lookup_metered", &lookup(op), &[]).await).await;
        assert_eq!(status, 200);
    }
    let after = Samples::parse(&gateway.metrics().await);
    assert_eq!(after.total("ballast_requests_total", &ok) - requests_before, 2.0);
    assert!(after.total("ballast_attempts_total", &["target=\"lookup_metered\""]) >= 2.0);
    assert!(
        after.series().any(|k| {
            k.starts_with("ballast_overhead_seconds_bucket") && k.contains("route=\"lookup_metered\"")
        }),
        "the overhead histogram"
    );
    assert!(
        after.total(
            "ballast_request_duration_seconds_count",
            &["route=\"lookup_metered\""]
        ) >= 2.0
    );

    let status = gateway.get_json("/status").await;
    let lookup_status = &status["tools"]["lookup_metered"];
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
