//! The breaker gauges `/metrics` reads at scrape time (`ballast_breaker_state`, `ballast_breaker_open_seconds`,
//! `ballast_breaker_open_for_seconds`): what the alert "a breaker open longer than twice its `open_for`" compares.
//! An open breaker's seconds grow while nobody calls; they stop while it is half-open (an idle upstream that
//! tripped once never passes twice `open_for`); a failed probe makes them grow again from there; 0 once closed.

use std::time::Duration;

use ballast_testkit::ConfigText;
use serde_json::json;

use crate::support::metrics::sample;
use crate::support::{Gateway, Upstream, read};

/// The tool's name: its series are this test's own in the process's recorder.
const TOOL: &str = "gauged_refund";

const FAILING: &str = r#"
[[scripts]]
endpoint = "create_refund"
op = "o-gauged"
steps = ["500", "500", "500", "500"]
"#;

async fn fail_once(gateway: &Gateway, key: &str) -> u16 {
    let body = json!({"op": "o-gauged", "order_id": "A-1", "amount": 5});
    let call = gateway.call(TOOL, &body, &[("idempotency-key", key)]).await;
    read(call).await.0
}

async fn gauges(gateway: &Gateway) -> (f64, f64) {
    let (open, open_for, _) = all_gauges(gateway).await;
    (open, open_for)
}

/// Open seconds, `open_for` and state (0 closed, 1 half open, 2 open), as one scrape shows them.
async fn all_gauges(gateway: &Gateway) -> (f64, f64, f64) {
    let page = gateway.metrics().await;
    let target = format!("target=\"{TOOL}\"");
    let open = sample(&page, "ballast_breaker_open_seconds", &[&target]);
    let open_for = sample(&page, "ballast_breaker_open_for_seconds", &[&target]);
    let state = sample(&page, "ballast_breaker_state", &[&target]);
    (
        open.expect("open seconds"),
        open_for.expect("open_for"),
        state.expect("state"),
    )
}

/// Paused time: the open time passes exactly when the test advances it.
#[tokio::test(start_paused = true)]
async fn an_open_breakers_seconds_grow_at_each_scrape_past_a_failed_probe() {
    let upstream = Upstream::chaos(FAILING);
    let config = ConfigText::new()
        .tool(
            TOOL,
            "http://chaos/tools/create_refund",
            r#"side_effects = true
            upstream_idempotency = "keyed"
            per_try_timeout = "1s"
            retry = { max_attempts = 1 }
            breaker = { consecutive_failures = 2, consecutive_spread = "0s", open_for = "30s", open_jitter = 0.0 }"#,
        )
        .build();
    let gateway = Gateway::metered(&config, &[("chaos", &upstream)], &[]).await;
    assert_eq!(gauges(&gateway).await, (0.0, 30.0), "closed: 0 seconds open");

    for key in ["k-gauged-1", "k-gauged-2"] {
        assert_eq!(fail_once(&gateway, key).await, 500);
    }
    tokio::time::advance(Duration::from_secs(10)).await;
    let (open, open_for) = gauges(&gateway).await;
    assert!((10.0..11.0).contains(&open), "{open}");
    assert_eq!(open_for, 30.0);
    tokio::time::advance(Duration::from_secs(15)).await;
    let (open, _) = gauges(&gateway).await;
    assert!((25.0..26.0).contains(&open), "grows while nobody calls: {open}");

    // The open time ends and nobody calls for an hour: half open (read at this scrape, not at the last call),
    // waiting for a probe, and the open seconds stop at one open_for: an idle upstream pages nobody.
    tokio::time::advance(Duration::from_secs(6)).await;
    let (open, _, state) = all_gauges(&gateway).await;
    assert_eq!(
        (open, state),
        (30.0, 1.0),
        "half open after exactly open_for open"
    );
    tokio::time::advance(Duration::from_secs(3600)).await;
    assert_eq!(
        all_gauges(&gateway).await,
        (30.0, 30.0, 1.0),
        "idle and half open: frozen"
    );

    // The probe fails: open again, and the seconds grow from where they stopped.
    assert_eq!(fail_once(&gateway, "k-gauged-3").await, 500);
    tokio::time::advance(Duration::from_secs(10)).await;
    let (open, _, state) = all_gauges(&gateway).await;
    assert!((40.0..41.0).contains(&open), "{open}");
    assert_eq!(state, 2.0, "open");
    tokio::time::advance(Duration::from_secs(20)).await;
    // A second probe fails: past twice open_for, as the alert asks.
    assert_eq!(fail_once(&gateway, "k-gauged-4").await, 500);
    tokio::time::advance(Duration::from_secs(5)).await;
    let (open, _, state) = all_gauges(&gateway).await;
    assert!(
        (65.0..66.0).contains(&open),
        "past twice open_for, as the alert asks: {open}"
    );
    assert_eq!(state, 2.0);
}
