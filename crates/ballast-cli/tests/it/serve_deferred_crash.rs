//! Deferred operations across a kill -9 and across instances (issue 34): a gateway killed with operations queued
//! and attempts in flight loses none — after a restart each completes once, or, where an attempt was in flight
//! on an upstream that does not deduplicate, ends `outcome_unknown` and is never sent again; and two gateways on
//! one PostgreSQL work one queue without running anything twice.

use ballast_testkit::ConfigText;

use crate::support;
use crate::support::deferred::{deferred, heal, ledger, operation, until_ended};
use crate::support::gateway::{Gateway, chaos, eventually, get_json};

/// A side-effecting tool's lines: one attempt per call, no breaker, deduplicating upstream or not.
fn side_effect(keyed: bool) -> String {
    let idempotency = if keyed { "keyed" } else { "none" };
    format!(
        "side_effects = true\nupstream_idempotency = \"{idempotency}\"\nretry = {{ max_attempts = 1 }}\n\
         breaker = {{ consecutive_failures = 0, failure_rate = 0 }}\nthrottle = {{ enabled = false }}"
    )
}

/// Killed with 3 payments (a deduplicating upstream) and 3 refunds (one that does not) deferred, some attempts in
/// flight: after the restart every payment completes exactly once (an interrupted one is re-sent with its key,
/// and the upstream answers with its first result), and every refund completes once or — interrupted — ends
/// `outcome_unknown`, never sent twice. Nothing is lost or left waiting.
#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_with_work_queued_and_in_flight_loses_nothing_and_runs_nothing_twice() {
    let keys = ["p1", "p2", "p3", "r1", "r2", "r3"];
    // Refusing (429: nothing acted) until every call is deferred; then slow, so attempts stay in flight 1.5 s.
    let refusing = "errors = { 429 = 1.0 }";
    let upstream = chaos(&format!(
        "[endpoints.process_payment]\nkey_mode = \"keyed\"\n{refusing}\n[endpoints.create_refund]\n{refusing}\n"
    ))
    .await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            &side_effect(true),
        )
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            &side_effect(false),
        )
        .raw("[deferred]\nconcurrency = 2\nbase = \"10ms\"\ncap = \"20ms\"\nmax_attempts = 100")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
    let tool = |key: &str| {
        if key.starts_with('p') {
            "process_payment"
        } else {
            "create_refund"
        }
    };
    for key in keys {
        deferred(&gateway, tool(key), key, &[]).await;
    }
    let slow = "latency = { p50 = \"1500ms\", p99 = \"1500ms\" }";
    let healed = format!(
        "[endpoints.process_payment]\nkey_mode = \"keyed\"\n{slow}\n[endpoints.create_refund]\n{slow}\n"
    );
    heal(&upstream, &healed).await;
    eventually("two attempts in flight", || async {
        let stats = get_json(&upstream.url("/stats")).await;
        let busy: u64 = ["process_payment", "create_refund"]
            .iter()
            .map(|tool| stats["endpoints"][tool]["in_flight"].as_u64().unwrap_or(0))
            .sum();
        (busy >= 2).then_some(())
    })
    .await;
    gateway.kill9();
    let gateway = gateway.restart();
    let mut ends = Vec::new();
    for key in keys {
        let (_, end) = until_ended(&gateway, key).await;
        ends.push((key, end["status"].as_str().unwrap_or("?").to_owned()));
    }
    let book = ledger(&upstream).await;
    assert_eq!(book["totals"]["duplicates"], 0, "nothing ran twice: {book}");
    for (key, end) in &ends {
        let executions = book["ops"][key]["executions"].as_u64().unwrap_or(0);
        match (key.starts_with('p'), end.as_str()) {
            (_, "completed") => assert_eq!(executions, 1, "{key}: {book}"),
            (false, "outcome_unknown") => assert!(executions <= 1, "{key}: {book}"),
            other => panic!("{key} ended {other:?}: {ends:?}"),
        }
    }
}

/// Two gateways on one PostgreSQL: calls deferred through either are worked by both, each exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn two_instances_on_one_postgres_share_the_queue_and_run_nothing_twice() {
    let Some((url, _)) = support::raw::service(
        "PostgreSQL",
        "BALLAST_TEST_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    )
    .await
    else {
        return;
    };
    let run = {
        use std::hash::BuildHasher as _;
        let state = std::collections::hash_map::RandomState::new();
        format!("{:x}", state.hash_one(ballast::clock::now()))
    };
    let keys: Vec<String> = (0..12).map(|n| format!("two-{run}-{n}")).collect();
    let upstream = chaos("[endpoints.create_refund]\nerrors = { 429 = 1.0 }\n").await;
    // A tool name of this run's own: every instance on the store works every operation of the tools it has, and
    // other tests' gateways share this PostgreSQL.
    let tool = format!("refund_{run}");
    let config = ConfigText::new()
        .store(&url)
        .tool(&tool, "{chaos}/tools/create_refund", &side_effect(false))
        .raw("[deferred]\nconcurrency = 2\nbase = \"10ms\"\ncap = \"20ms\"\nmax_attempts = 100")
        .build();
    let [one, two] = [(); 2].map(|()| Gateway::start(&config, &upstream, &[]));
    for (n, key) in keys.iter().enumerate() {
        let gateway = if n % 2 == 0 { &one } else { &two };
        deferred(gateway, &tool, key, &[]).await;
    }
    heal(
        &upstream,
        "[endpoints.create_refund]\nlatency = { p50 = \"200ms\", p99 = \"200ms\" }\n",
    )
    .await;
    for key in &keys {
        let end = until_ended(&one, key).await.1;
        assert_eq!(end["status"], "completed", "{end}");
        assert_eq!(
            operation(&two, key).await["status"],
            "completed",
            "both see one operation"
        );
    }
    let book = ledger(&upstream).await;
    for key in &keys {
        assert_eq!(book["ops"][key]["executions"], 1, "{key} once: {book}");
    }
    let worked = |status: serde_json::Value| {
        status["deferred"]["ended_here"][&tool]["completed"]
            .as_u64()
            .unwrap_or(0)
    };
    let (by_one, by_two) = (
        worked(get_json(&one.url("/status")).await),
        worked(get_json(&two.url("/status")).await),
    );
    assert_eq!(by_one + by_two, 12, "each ended once, by one of them");
    assert!(
        by_one > 0 && by_two > 0,
        "both worked the queue: {by_one} + {by_two}"
    );
}
