//! The breaker gauges `/metrics` reads at scrape time (`ballast_breaker_open_seconds`,
//! `ballast_breaker_open_for_seconds`): what the alert "a breaker open longer than twice its `open_for`" compares.
//! An open breaker's seconds grow while nobody calls, a failed probe does not restart them, and they are 0 once it
//! closes.

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
    let page = gateway.metrics().await;
    let target = format!("target=\"{TOOL}\"");
    let open = sample(&page, "ballast_breaker_open_seconds", &[&target]);
    let open_for = sample(&page, "ballast_breaker_open_for_seconds", &[&target]);
    (open.expect("open seconds"), open_for.expect("open_for"))
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

    // The open time ends; the probe fails and the breaker opens again: still cut off since the first opening.
    tokio::time::advance(Duration::from_secs(6)).await;
    assert_eq!(fail_once(&gateway, "k-gauged-3").await, 500);
    tokio::time::advance(Duration::from_secs(30)).await;
    let (open, _) = gauges(&gateway).await;
    assert!(
        (61.0..62.0).contains(&open),
        "past twice open_for, as the alert asks: {open}"
    );
}
