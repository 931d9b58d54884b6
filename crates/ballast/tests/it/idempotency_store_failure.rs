//! The store failing at each moment (issue 5, "store failure"), through a store that wraps a real one and fails
//! on demand: before the claim nothing runs (503); a failed dispatch mark runs nothing and gives the key back;
//! a failed completion write still answers the caller, keeps retries at 409, and lands in the background.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ballast::idempotency::{IdempotencyLayer, spawn_reaper};
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

/// Regression (issue 11): `mark_dispatched` landed but its reply was lost, and the release that followed failed
/// too: the record stayed `dispatched` with nothing run, so the key answered `outcome_unknown` for a day. The
/// release is retried in the background until it lands, and a retry then runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_dispatch_reply_and_a_failed_release_still_give_the_key_back() {
    let (app, handlers, flaky) = fixture().await;
    flaky.dispatch_reply_lost.store(true, Ordering::SeqCst);
    flaky.releases_to_fail.store(2, Ordering::SeqCst);
    let answer = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
    assert_eq!(answer.status(), 503, "{:?}", answer.body);
    assert_eq!(answer.problem_type(), "urn:ballast:store_unavailable");
    assert_eq!(handlers.runs(), 0, "nothing ran");
    flaky.dispatch_reply_lost.store(false, Ordering::SeqCst);
    let retry = poll_until(
        &app,
        || post_json("/refunds", Some("k1"), BODY),
        |a| a.status() != 409,
    )
    .await;
    assert_eq!(retry.status(), 201, "{:?}", retry.body);
    assert!(!retry.replayed());
    assert_eq!(
        flaky.failed_releases.load(Ordering::SeqCst),
        2,
        "both failures were retried"
    );
    assert_eq!(handlers.runs(), 1);
}

/// A refund request with a deadline of `deadline_ms`.
fn deadline_request(deadline_ms: u32) -> http::Request<axum::body::Body> {
    let mut request = post_json("/refunds", Some("k1"), BODY);
    request
        .headers_mut()
        .insert("ballast-timeout-ms", deadline_ms.into());
    request
}

/// Regression (issue 11): a black-holed store made a 300 ms request wait for the store's own timeout (10 s on
/// PostgreSQL). The claim's wait ends at the deadline minus the reserve: 503, nothing ran; the claim that lands
/// later is given back, and a retry runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_slower_than_the_deadline_answers_in_time_and_is_given_back() {
    let (app, handlers, flaky) = fixture().await;
    flaky.hold_claim.store(true, Ordering::SeqCst);
    let answer = send(&app, deadline_request(300)).await;
    assert_eq!(answer.status(), 503, "{:?}", answer.body);
    assert_eq!(answer.problem_type(), "urn:ballast:store_unavailable");
    assert_eq!(answer.header("x-should-retry"), Some("true"));
    let detail = answer.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.contains("time left") && detail.contains("not run"),
        "{detail}"
    );
    flaky.hold_claim.store(false, Ordering::SeqCst);
    flaky.claim_open.notify_one();
    let retry = poll_until(
        &app,
        || post_json("/refunds", Some("k1"), BODY),
        |a| a.status() != 409,
    )
    .await;
    assert_eq!(
        retry.status(),
        201,
        "the late claim was given back: {:?}",
        retry.body
    );
    assert_eq!(handlers.runs(), 1, "nothing ran for the first request");
}

/// The same for the dispatch mark: the caller is answered by its deadline, nothing runs, and once the mark is
/// decided the key is given back (from `claimed` or `dispatched` alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_mark_slower_than_the_deadline_answers_in_time_and_is_given_back() {
    let (app, handlers, flaky) = fixture().await;
    flaky.hold_dispatch.store(true, Ordering::SeqCst);
    let answer = send(&app, deadline_request(300)).await;
    assert_eq!(answer.status(), 503, "{:?}", answer.body);
    assert_eq!(answer.problem_type(), "urn:ballast:store_unavailable");
    flaky.hold_dispatch.store(false, Ordering::SeqCst);
    flaky.dispatch_open.notify_one();
    let retry = poll_until(
        &app,
        || post_json("/refunds", Some("k1"), BODY),
        |a| a.status() != 409,
    )
    .await;
    assert_eq!(retry.status(), 201, "{:?}", retry.body);
    assert!(!retry.replayed());
    assert_eq!(handlers.runs(), 1);
}

/// Regression (issue 11): after the handler ran, its 201 was held for the whole first-write wait while a slow
/// store took its time. The answer leaves by the caller's deadline (minus the reserve), whatever the first-write
/// wait, and the write lands in the background.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_is_not_held_past_the_deadline_for_the_first_write() {
    let flaky = FlakyStore::new(sqlite().await);
    let store: Arc<dyn IdempotencyStore> = flaky.clone();
    let layer = IdempotencyLayer::builder(store.clone())
        .first_write_wait(Duration::from_secs(3600))
        .build()
        .unwrap();
    let handlers = Handlers::new(true);
    let app = app(layer, &handlers, store);
    flaky.hold_complete.store(true, Ordering::SeqCst);
    let answer = send(&app, deadline_request(300)).await;
    assert_eq!(answer.status(), 201, "answered while the write still waits");
    assert_eq!(answer.body, BODY);
    let held = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
    assert_eq!(
        held.status(),
        409,
        "the write has not landed: in progress, never run twice"
    );
    flaky.hold_complete.store(false, Ordering::SeqCst);
    flaky.complete_open.notify_one();
    let replay = poll_until(
        &app,
        || post_json("/refunds", Some("k1"), BODY),
        |a| a.status() != 409,
    )
    .await;
    assert!(replay.replayed(), "{:?}", replay.body);
    assert_eq!(handlers.runs(), 1);
}
