//! `ballast serve`'s Prometheus recorder, as a scrape reads it: the counters a dashboard's `rate()` needs are
//! registered at zero from the start, and the histograms have buckets. (How the metrics move with calls, and what
//! `/status` shows, is the router's: `ballast-gateway`'s `load` tests, with a recorder of their own.)

use crate::support;
use ballast_testkit::{ConfigText, Samples};

use serde_json::json;
use support::gateway::{Gateway, call, chaos, client, read};

#[tokio::test(flavor = "multi_thread")]
async fn the_binarys_recorder_registers_its_counters_from_the_start_and_has_histogram_buckets() {
    let upstream = chaos("").await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool(
            "lookup_order",
            "{chaos}/tools/lookup_order",
            "per_try_timeout = \"2s\"",
        )
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
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
    let body = json!({"op": "o-m1", "order_id": "A-1001"});
    let (status, _, _) = read(call(&client, &gateway, "lookup_order", &body, &[]).await).await;
    assert_eq!(status, 200);
    let after = scrape().await;
    assert!(
        after
            .series()
            .any(|k| k.starts_with("ballast_overhead_seconds_bucket")),
        "the overhead histogram"
    );
}
