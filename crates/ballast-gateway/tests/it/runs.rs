//! A run (`ballast-run-id`) across separate HTTP calls: its retry allowance and its deadline hold, an SDK's
//! per-request timeout never becomes its deadline, and runs are bounded in memory — a flood evicts only the
//! flooder's runs.

use ballast_testkit::ConfigText;
use serde_json::{Value, json};

use crate::support::{Gateway, Upstream, eventually, header, read};

fn lookup(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001"})
}

/// A run of one retry in all, and a tool that would retry twice.
fn config() -> String {
    ConfigText::new()
        .run("retry_allowance = 1\nretry_allowance_per_call = 0.0")
        .tool(
            "lookup_order",
            "http://chaos/tools/lookup_order",
            "per_try_timeout = \"2s\"\nretry = { max_attempts = 3, base = \"10ms\", cap = \"10ms\" }",
        )
        .build()
}

#[tokio::test]
async fn a_runs_retry_allowance_holds_across_separate_http_calls() {
    let upstream = Upstream::chaos(
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
    );
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
    let run = |id: &'static str| [("ballast-run-id", id)];
    // The run's one retry goes to its first call, which then stops at its second 503.
    let (status, headers, _) = read(gateway.call("lookup_order", &lookup("o-a"), &run("run-1")).await).await;
    assert_eq!(status, 503);
    assert_eq!(header(&headers, "ballast-code"), "run_allowance_exhausted");
    assert_eq!(header(&headers, "ballast-attempts"), "2");
    assert_eq!(header(&headers, "x-should-retry"), "false");
    // A second HTTP call of the same run has no retry left.
    let (status, headers, _) = read(gateway.call("lookup_order", &lookup("o-b"), &run("run-1")).await).await;
    assert_eq!((status, header(&headers, "ballast-attempts")), (503, "1"));
    assert_eq!(header(&headers, "ballast-code"), "run_allowance_exhausted");
    // Another run has its own.
    let (status, headers, _) = read(gateway.call("lookup_order", &lookup("o-c"), &run("run-2")).await).await;
    assert_eq!((status, header(&headers, "ballast-attempts")), (200, "2"));
}

/// Paused time: the run's 1.5 s pass while the test polls, at once.
#[tokio::test(start_paused = true)]
async fn a_runs_deadline_holds_across_separate_http_calls() {
    let upstream = Upstream::chaos("");
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
    let remaining = |headers: &http::HeaderMap| -> u64 {
        header(headers, "ballast-remaining-ms")
            .parse()
            .expect("ballast-remaining-ms")
    };
    let first = [("ballast-run-id", "run-d"), ("ballast-timeout-ms", "1500")];
    let (status, headers, _) = read(gateway.call("lookup_order", &lookup("o-1"), &first).await).await;
    assert_eq!(status, 200);
    assert!(remaining(&headers) <= 1500);
    // A later call of the run without a deadline header keeps the run's deadline, not the 30 s default.
    let (status, headers, _) = read(
        gateway
            .call("lookup_order", &lookup("o-2"), &[("ballast-run-id", "run-d")])
            .await,
    )
    .await;
    assert_eq!(status, 200);
    assert!(remaining(&headers) <= 1500, "{}", remaining(&headers));
    // Once it has passed, every call of the run is refused, saying what a run id is (just before, a call is
    // refused for the little time left, and the polling goes on).
    let body = eventually("the run's deadline passes", || async {
        let (status, headers, body) = read(
            gateway
                .call("lookup_order", &lookup("o-3"), &[("ballast-run-id", "run-d")])
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
    let (_, headers, _) = read(gateway.call("lookup_order", &lookup("o-4"), &sdk).await).await;
    assert!(remaining(&headers) <= 1000);
    let (_, headers, _) = read(
        gateway
            .call("lookup_order", &lookup("o-5"), &[("ballast-run-id", "run-sdk")])
            .await,
    )
    .await;
    assert!(
        remaining(&headers) > 20_000,
        "the default, not the SDK's second: {}",
        remaining(&headers)
    );
}

const DEV: &str = "Bearer dev-secret";
const OTHER: &str = "Bearer other-secret";

/// Regression: 200 000 distinct run ids (any principal with a key) cost ~130 MB for ten minutes. Runs are bounded
/// in all and per principal; a flood evicts the flooder's own oldest runs, and a run evicted and called again is
/// told it restarted.
#[tokio::test]
async fn runs_are_bounded_and_a_flood_evicts_only_the_flooders_runs() {
    let upstream = Upstream::chaos("");
    let config = ConfigText::new()
        .run("max_runs = 300\nmax_runs_per_principal = 100")
        .principal("dev", "TEST_DEV_KEY")
        .principal("other", "TEST_OTHER_KEY")
        .tool("echo", "http://chaos/echo", "")
        .build();
    let gateway = Gateway::start(
        &config,
        &upstream,
        &[("TEST_DEV_KEY", "dev-secret"), ("TEST_OTHER_KEY", "other-secret")],
    )
    .await;
    let echo = |auth: &'static str, run: String, timeout: Option<&'static str>| {
        let gateway = &gateway;
        async move {
            let mut headers = vec![("authorization", auth), ("ballast-run-id", run.as_str())];
            headers.extend(timeout.map(|t| ("ballast-timeout-ms", t)));
            let (status, headers, body) = read(gateway.call("echo", &json!({}), &headers).await).await;
            assert_eq!(status, 200, "{body}");
            headers
        }
    };
    // dev's run has a deadline of 20 s.
    echo(DEV, "working".into(), Some("20000")).await;
    // other names a new run on every call: 1000 of them, 16 at a time.
    for batch in 0..(1000 / 16 + 1) {
        let calls = (0..16).map(|i| echo(OTHER, format!("flood-{}", batch * 16 + i), None));
        futures::future::join_all(calls).await;
    }
    let status = gateway.get_json_with("/status", DEV).await;
    let runs = &status["runs"];
    assert!(runs["remembered"].as_u64().unwrap() <= 101, "{runs}");
    assert!(runs["evicted"].as_u64().unwrap() >= 899, "{runs}");
    assert_eq!(
        (runs["max"].as_u64(), runs["max_per_principal"].as_u64()),
        (Some(300), Some(100))
    );
    // dev's run kept its deadline: a call without a deadline header is bounded by it, not by the 30 s default.
    let headers = echo(DEV, "working".into(), None).await;
    let remaining: u64 = header(&headers, "ballast-remaining-ms").parse().unwrap();
    assert!(remaining <= 20_000, "the run's deadline still holds: {remaining}");
    assert_eq!(header(&headers, "ballast-run"), "");
    // The flood's first run was evicted: called again, it starts afresh and the answer says so, once.
    let headers = echo(OTHER, "flood-0".into(), None).await;
    assert_eq!(header(&headers, "ballast-run"), "restarted");
    let headers = echo(OTHER, "flood-0".into(), None).await;
    assert_eq!(header(&headers, "ballast-run"), "");
}
