//! Deferred work in its place (issue 34): a backlog is drained in priority order, and live traffic is not held
//! back by a deep queue beyond the slots given to deferred work. Real binaries, the chaos upstream in process
//! (its profile swapped as the test goes), real time with bounded polling.

use ballast_testkit::ConfigText;

use crate::serve_deferred::side_effect;
use crate::support::deferred::{call_keyed, deferred, heal, ledger, operation, until_ended, until_state};
use crate::support::gateway::{Gateway, chaos, eventually, get_json};

/// The in-flight calls of `tool`'s admission, from `/status`.
async fn in_flight(gateway: &Gateway, tool: &str) -> u64 {
    let status = get_json(&gateway.url("/status")).await;
    status["tools"][tool]["admission"]["in_flight"]
        .as_u64()
        .unwrap_or(0)
}

/// With one deferred slot held by a slow attempt while a backlog of both classes forms (the refunds deferred
/// first), every payment (`critical_plus`) is worked before any refund (`sheddable`).
#[tokio::test(flavor = "multi_thread")]
async fn payments_are_drained_before_the_lower_class() {
    let slow = "[endpoints.lookup_order]\nlatency = { p50 = \"1500ms\", p99 = \"1500ms\" }\n";
    let refusing = "[endpoints.create_refund]\nerrors = { 429 = 1.0 }\n[endpoints.process_payment]\nerrors = { 429 = 1.0 }\n";
    let upstream = chaos(&format!("{slow}{refusing}")).await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool(
            "slow_hold",
            "{chaos}/tools/lookup_order",
            &format!("{}\nconcurrency = 1\nqueue = 0", side_effect("sheddable")),
        )
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            &side_effect("sheddable"),
        )
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            &side_effect("critical_plus"),
        )
        .raw("[deferred]\nconcurrency = 1\nbase = \"10ms\"\ncap = \"20ms\"\nmax_attempts = 100")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
    // `hold` is shed while `first` has the slow tool's one slot; once `first` is done, hold's attempt takes the
    // one deferred slot for 1.5 s.
    let first = call_keyed(&gateway, "slow_hold", "first", &[]);
    let hold = async {
        eventually("first has the slot", || async {
            (in_flight(&gateway, "slow_hold").await == 1).then_some(())
        })
        .await;
        deferred(&gateway, "slow_hold", "hold", &[]).await
    };
    let ((status, _, _), _) = tokio::join!(first, hold);
    assert_eq!(status, 200);
    until_state(&gateway, "hold", "in_progress").await;
    eventually("hold's attempt has the slot", || async {
        (in_flight(&gateway, "slow_hold").await == 1).then_some(())
    })
    .await;
    // The backlog, refunds first, then the upstream heals (hold's attempt still in flight).
    let keys = ["r1", "r2", "r3", "p1", "p2", "p3"];
    for key in keys {
        let tool = if key.starts_with('r') {
            "create_refund"
        } else {
            "process_payment"
        };
        deferred(&gateway, tool, key, &[]).await;
    }
    let fast = "latency = { p50 = \"100ms\", p99 = \"100ms\" }";
    heal(
        &upstream,
        &format!("{slow}[endpoints.create_refund]\n{fast}\n[endpoints.process_payment]\n{fast}\n"),
    )
    .await;
    assert_eq!(
        operation(&gateway, "hold").await["status"],
        "in_progress",
        "the backlog formed behind it"
    );
    for key in keys {
        assert_eq!(until_ended(&gateway, key).await.1["status"], "completed");
    }
    // When each ended, relative to one pass of reads (each attempt takes 100 ms, so they are that far apart).
    let mut done_at = Vec::new();
    for key in keys {
        let end = operation(&gateway, key).await;
        done_at.push((
            end["took_ms"].as_i64().unwrap() - end["age_ms"].as_i64().unwrap(),
            key,
        ));
    }
    done_at.sort();
    let order: Vec<&str> = done_at.iter().map(|(_, key)| *key).collect();
    assert!(
        order[..3].iter().all(|k| k.starts_with('p')),
        "payments first: {order:?}"
    );
    assert_eq!(ledger(&upstream).await["totals"]["duplicates"], 0);
}

/// A deep queue on a slow upstream holds at most its deferred slots: live calls of the same tool all go
/// through meanwhile (none shed, none deferred), and the queue never has more attempts in progress than it was
/// given.
#[tokio::test(flavor = "multi_thread")]
async fn live_traffic_is_not_held_back_by_a_deep_queue() {
    let upstream = chaos("[endpoints.create_refund]\nerrors = { 429 = 1.0 }\n").await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            &format!("{}\nconcurrency = 4", side_effect("critical")),
        )
        .raw("[deferred]\nconcurrency = 2\nbase = \"10ms\"\ncap = \"20ms\"\nmax_attempts = 100")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
    let backlog = (0..20).map(|n| {
        let gateway = &gateway;
        async move { deferred(gateway, "create_refund", &format!("q{n}"), &[]).await }
    });
    futures::future::join_all(backlog).await;
    heal(
        &upstream,
        "[endpoints.create_refund]\nlatency = { p50 = \"300ms\", p99 = \"300ms\" }\n",
    )
    .await;
    let live = (0..4).map(|n| {
        let gateway = &gateway;
        async move {
            call_keyed(
                gateway,
                "create_refund",
                &format!("live{n}"),
                &[("prefer", "respond-async")],
            )
            .await
        }
    });
    let watching = async {
        let mut most = 0;
        for _ in 0..20 {
            let status = get_json(&gateway.url("/status")).await;
            let held =
                status["deferred"]["queues"]["create_refund"]["classes"]["critical"]["in_progress"].as_u64();
            most = most.max(held.unwrap_or(0));
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        most
    };
    let (answers, most) = tokio::join!(futures::future::join_all(live), watching);
    for (status, _, body) in answers {
        assert_eq!(status, 200, "a live call went through, not deferred: {body}");
    }
    assert!(most <= 2, "at most the deferred slots were in progress: {most}");
    for n in 0..20 {
        assert_eq!(
            until_ended(&gateway, &format!("q{n}")).await.1["status"],
            "completed"
        );
    }
}
