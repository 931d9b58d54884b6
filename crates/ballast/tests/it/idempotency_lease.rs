//! Leases of live holders (issue 11; DESIGN.md, "Idempotency, server side"): short and fixed, renewed while the
//! handler runs, so a slow handler keeps its key however long it takes; a holder cut off from the store has its
//! late answer accepted when nobody took the key over. Real time with short leases and bounded polling (the
//! store's clock is the wall clock).

use crate::support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ballast::idempotency::{IdempotencyLayer, InvalidIdempotencyLayer};
use ballast_core::IdempotencyKey;
use ballast_store::{ExpiredDispatch, IdempotencyStore, RecordState, Scope};
use support::idempotency::{FlakyStore, Handlers, app, poll_until, post_json, send, sqlite, within};

const LEASE: Duration = Duration::from_millis(300);

fn refund() -> http::Request<axum::body::Body> {
    post_json("/refunds", Some("k1"), r#"{"order": 9}"#)
}

fn scope() -> Scope {
    Scope::new("anonymous", "POST /refunds", IdempotencyKey::parse("k1").unwrap())
}

/// Waits until `n` renewals have landed (bounded).
async fn renewed(flaky: &FlakyStore, n: u32) {
    within(async {
        while flaky.renewals.load(Ordering::SeqCst) < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// Regression (issue 11): the lease was the caller's deadline plus a grace and never renewed, so a handler
/// slower than that lost its key — a retry answered `outcome_unknown` for a handler about to succeed, or (with
/// `ExpiredDispatch::TakeOver`) ran it a second time while the first still ran. Now the holder renews its
/// lease while the handler runs: long past the first lease, a retry is told "in progress" and nothing runs
/// twice; the handler's answer is then replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_keeps_its_key_past_many_leases() {
    for expired_dispatch in [ExpiredDispatch::OutcomeUnknown, ExpiredDispatch::TakeOver] {
        let flaky = FlakyStore::new(sqlite().await);
        let store: Arc<dyn IdempotencyStore> = flaky.clone();
        let layer = IdempotencyLayer::builder(store.clone())
            .lease(LEASE)
            .expired_dispatch(expired_dispatch)
            .build()
            .unwrap();
        let handlers = Handlers::new(false);
        let app = app(layer, &handlers, store.clone());
        let mut slow = refund();
        // A deadline shorter than the handler takes: the lease does not depend on it.
        slow.headers_mut()
            .insert("ballast-timeout-ms", "100".parse().unwrap());
        let first = tokio::spawn({
            let app = app.clone();
            async move { send(&app, slow).await }
        });
        handlers.started(1).await;
        // Renewed every third of the lease: four renewals mean the first lease ran out long ago.
        renewed(&flaky, 4).await;
        let record = store.lookup(&scope()).await.unwrap().unwrap();
        assert_eq!(record.state, RecordState::Dispatched);
        assert!(
            record.lease_left > Duration::ZERO,
            "{expired_dispatch:?}: the lease is alive"
        );
        let retry = send(&app, refund()).await;
        assert_eq!(retry.status(), 409, "{expired_dispatch:?}: {:?}", retry.body);
        assert_eq!(retry.problem_type(), "urn:ballast:idempotency_in_progress");
        assert_eq!(handlers.runs(), 1, "{expired_dispatch:?}: never run twice");
        handlers.open();
        assert_eq!(first.await.unwrap().status(), 201);
        let replay = send(&app, refund()).await;
        assert_eq!(replay.status(), 201);
        assert!(
            replay.replayed(),
            "{expired_dispatch:?}: the slow handler's answer was stored"
        );
        assert_eq!(handlers.runs(), 1);
    }
}

/// The holder is cut off from the store (its renewals fail) while its handler runs: once the lease runs out a
/// retry settles the record `outcome_unknown` (nobody knows yet), and when the handler answers, its late write
/// is accepted — nobody took the key over — so from then on the key replays the true answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_answer_replaces_an_outcome_unknown_its_expired_lease_left() {
    let flaky = FlakyStore::new(sqlite().await);
    let store: Arc<dyn IdempotencyStore> = flaky.clone();
    let layer = IdempotencyLayer::builder(store.clone())
        .lease(LEASE)
        .build()
        .unwrap();
    let handlers = Handlers::new(false);
    let app = app(layer, &handlers, store.clone());
    flaky.renewals_fail.store(true, Ordering::SeqCst);
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, refund()).await }
    });
    handlers.started(1).await;
    let unknown = poll_until(&app, refund, |a| a.status() != 409).await;
    assert_eq!(unknown.status(), 502, "{:?}", unknown.body);
    assert_eq!(unknown.problem_type(), "urn:ballast:outcome_unknown");
    handlers.open();
    let answer = first.await.unwrap();
    assert_eq!(answer.status(), 201);
    let replay = send(&app, refund()).await;
    assert_eq!(replay.status(), 201, "the late answer landed: {:?}", replay.body);
    assert!(replay.replayed());
    assert_eq!(handlers.runs(), 1);
}

/// A layer over a fresh flaky SQLite store with `lease`, and its app and handlers (held at their gate).
async fn fixture(
    configure: impl FnOnce(
        ballast::idempotency::IdempotencyLayerBuilder,
    ) -> ballast::idempotency::IdempotencyLayerBuilder,
) -> (axum::Router, Handlers, Arc<FlakyStore>) {
    let flaky = FlakyStore::new(sqlite().await);
    let store: Arc<dyn IdempotencyStore> = flaky.clone();
    let layer = configure(IdempotencyLayer::builder(store.clone()))
        .build()
        .unwrap();
    let handlers = Handlers::new(false);
    (app(layer, &handlers, store), handlers, flaky)
}

/// Regression (review of issue 11): the lease runs from when the store took the claim, but renewals were timed
/// from its reply, so a reply slower than two thirds of the lease let a running holder's lease lapse — a retry
/// then answered `outcome_unknown`, or ran the handler twice. Renewals count from before the claim was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_claim_reply_does_not_let_the_lease_lapse() {
    let lease = Duration::from_millis(1200);
    let (app, handlers, flaky) = fixture(|b| b.lease(lease)).await;
    flaky.claim_reply_delay_ms.store(1000, Ordering::SeqCst);
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, refund()).await }
    });
    handlers.started(1).await;
    flaky.claim_reply_delay_ms.store(0, Ordering::SeqCst);
    renewed(&flaky, 2).await;
    assert_eq!(
        flaky.lapsed_renewals.load(Ordering::SeqCst),
        0,
        "the lease never ran out"
    );
    assert_eq!(send(&app, refund()).await.status(), 409);
    handlers.open();
    assert_eq!(first.await.unwrap().status(), 201);
    assert_eq!(handlers.runs(), 1);
}

/// Regression (review of issue 11): renewals stopped at the first write, so a write slower than the lease's
/// slack (a slow store, or a short lease) let the lease lapse while the answer was still being stored — a retry
/// then answered `outcome_unknown` for a request that had succeeded. The lease is renewed until the write lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_renewed_until_the_last_write_lands() {
    let lease = Duration::from_millis(600);
    let (app, handlers, flaky) =
        fixture(|b| b.lease(lease).first_write_wait(Duration::from_millis(500))).await;
    handlers.open();
    flaky.hold_complete.store(true, Ordering::SeqCst);
    let answer = send(&app, refund()).await;
    assert_eq!(answer.status(), 201, "answered after the first write's wait");
    let so_far = flaky.renewals.load(Ordering::SeqCst);
    renewed(&flaky, so_far + 3).await;
    assert_eq!(
        flaky.lapsed_renewals.load(Ordering::SeqCst),
        0,
        "the lease never ran out"
    );
    let retry = send(&app, refund()).await;
    assert_eq!(retry.status(), 409, "{:?}", retry.body);
    flaky.hold_complete.store(false, Ordering::SeqCst);
    flaky.complete_open.notify_one();
    let replay = poll_until(&app, refund, |a| a.status() != 409).await;
    assert!(replay.replayed(), "{:?}", replay.body);
    assert_eq!(handlers.runs(), 1);
}

/// Regression (review of issue 11): a handler that hangs was renewed forever, so its key answered 409 "retry"
/// for good. Renewals end at the longest deadline the layer grants (`max_timeout`): the lease then runs out and
/// a retry learns the outcome is unknown — and if the handler ever answers, its answer still lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_end_at_the_longest_deadline() {
    let lease = Duration::from_millis(300);
    let (app, handlers, _flaky) = fixture(|b| {
        b.lease(lease)
            .default_timeout(Duration::from_millis(900))
            .max_timeout(Duration::from_millis(900))
    })
    .await;
    let first = tokio::spawn({
        let app = app.clone();
        async move { send(&app, refund()).await }
    });
    handlers.started(1).await;
    let unknown = poll_until(&app, refund, |a| a.status() != 409).await;
    assert_eq!(unknown.status(), 502, "{:?}", unknown.body);
    assert_eq!(unknown.problem_type(), "urn:ballast:outcome_unknown");
    handlers.open();
    assert_eq!(first.await.unwrap().status(), 201);
    let replay = send(&app, refund()).await;
    assert!(
        replay.replayed(),
        "the hung handler's late answer landed: {:?}",
        replay.body
    );
    assert_eq!(handlers.runs(), 1);
}

#[test]
fn a_zero_lease_is_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let store = runtime.block_on(sqlite());
    let built = IdempotencyLayer::builder(store).lease(Duration::ZERO).build();
    assert_eq!(built.unwrap_err(), InvalidIdempotencyLayer::ZeroLease);
}
