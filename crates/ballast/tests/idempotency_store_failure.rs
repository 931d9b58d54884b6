//! The store failing at each moment (issue 5, "store failure"), through a store that wraps a real one and fails
//! on demand: before the claim nothing runs (503); a failed dispatch mark runs nothing and gives the key back;
//! a failed completion write still answers the caller, keeps retries at 409, and lands in the background.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ballast::{IdempotencyLayer, spawn_reaper};
use ballast_core::Backoff;
use ballast_store::IdempotencyStore;
use support::idempotency::{FlakyStore, Handlers, app, poll_until, post_json, send, sqlite, within};

const BODY: &str = r#"{"order": 3}"#;

async fn fixture() -> (axum::Router, Handlers, Arc<FlakyStore>) {
    let flaky = FlakyStore::new(sqlite().await);
    let store: Arc<dyn IdempotencyStore> = flaky.clone();
    let layer = IdempotencyLayer::builder(store.clone())
        .write_backoff(Backoff::full_jitter(Duration::from_millis(10), Duration::from_millis(50)).unwrap())
        .build()
        .unwrap();
    let handlers = Handlers::new(true);
    (app(layer, &handlers, store), handlers, flaky)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_down_before_the_claim_runs_nothing() {
    let (app, handlers, flaky) = fixture().await;
    flaky.claims_fail.store(true, Ordering::SeqCst);
    let answer = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.problem_type(), "urn:ballast:store_unavailable");
    assert_eq!(answer.header("x-should-retry"), Some("true"));
    assert_eq!(handlers.runs(), 0, "fail closed");
    flaky.claims_fail.store(false, Ordering::SeqCst);
    assert_eq!(
        send(&app, post_json("/refunds", Some("k1"), BODY)).await.status(),
        201
    );
    assert_eq!(handlers.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_dispatch_mark_runs_nothing_and_gives_the_key_back() {
    let (app, handlers, flaky) = fixture().await;
    flaky.dispatch_fails.store(true, Ordering::SeqCst);
    let answer = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
    assert_eq!(answer.status(), 503);
    assert_eq!(handlers.runs(), 0);
    flaky.dispatch_fails.store(false, Ordering::SeqCst);
    let retry = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
    assert_eq!(
        retry.status(),
        201,
        "the claim was released: the retry runs at once"
    );
    assert!(!retry.replayed());
    assert_eq!(handlers.runs(), 1);
}

/// Regression: a claim taken over before it was marked dispatched (its lease ran out, another request holds the
/// key now) was answered 500 `store-failed`, "report this to the operators", `x-should-retry: false` — though
/// nothing is wrong with the store and the key is simply in progress elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_taken_over_before_dispatch_is_in_progress_not_a_store_failure() {
    let (app, handlers, flaky) = fixture().await;
    flaky.dispatch_not_held.store(true, Ordering::SeqCst);
    let answer = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
    assert_eq!(answer.status(), 409, "{:?}", answer.body);
    assert_eq!(answer.problem_type(), "urn:ballast:idempotency_in_progress");
    assert_eq!(answer.header("x-should-retry"), Some("true"));
    assert!(answer.header("retry-after").is_some());
    assert_eq!(handlers.runs(), 0, "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_completion_write_still_answers_and_lands_in_the_background() {
    let (app, handlers, flaky) = fixture().await;
    flaky.completes_fail.store(true, Ordering::SeqCst);
    let answer = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
    assert_eq!(answer.status(), 201, "the caller still gets the handler's answer");
    assert_eq!(answer.body, BODY);
    assert!(flaky.failed_completes.load(Ordering::SeqCst) >= 1);
    // While the write keeps failing (and is being retried), a retry is told to come back, never run again.
    for _ in 0..3 {
        let retry = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
        assert_eq!(retry.status(), 409);
        assert_eq!(retry.problem_type(), "urn:ballast:idempotency_in_progress");
    }
    let failures = flaky.failed_completes.load(Ordering::SeqCst);
    within(async {
        while flaky.failed_completes.load(Ordering::SeqCst) < failures + 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    flaky.completes_fail.store(false, Ordering::SeqCst);
    let replay = poll_until(
        &app,
        || post_json("/refunds", Some("k1"), BODY),
        |a| a.status() != 409,
    )
    .await;
    assert_eq!(replay.status(), 201);
    assert!(replay.replayed(), "the background write landed");
    assert_eq!(replay.body, BODY);
    assert_eq!(handlers.runs(), 1, "the handler ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_reaps_on_its_timer() {
    let flaky = FlakyStore::new(sqlite().await);
    let reaper = spawn_reaper(flaky.clone(), Duration::from_millis(20));
    within(async {
        while flaky.reaps.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    reaper.abort();
}
