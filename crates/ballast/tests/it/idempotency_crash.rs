//! Holders that vanish (issue 5, "crash"): a claim made directly in the store with a short lease stands for a
//! process that crashed. Before dispatch, the next request takes it over and runs once (and the old holder can
//! no longer write); after dispatch, the key becomes `outcome_unknown` (502) — unless the handler deduplicates
//! by the key itself. A handler that panics after dispatch leaves `outcome_unknown` too.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use ballast::idempotency::IdempotencyLayer;
use ballast_core::{IdempotencyKey, fingerprint};
use ballast_store::{
    ClaimOutcome, ClaimRequest, ExpiredDispatch, IdempotencyStore, OwnerToken, Scope, StoreError,
    StoredResponse,
};
use support::idempotency::{Handlers, app, poll_until, post_json, send, sqlite};

const BODY: &str = r#"{"order": 5}"#;
const LEASE: Duration = Duration::from_millis(300);

/// A claim on the key the layer would use for `POST /refunds` with `BODY`, held by a process that then vanishes.
async fn vanished_holder(store: &dyn IdempotencyStore, dispatched: bool) -> (Scope, OwnerToken) {
    let scope = Scope::new("anonymous", "POST /refunds", IdempotencyKey::parse("k1").unwrap());
    let claim = ClaimRequest {
        fingerprint: fingerprint("POST", "/refunds", Some("application/json"), BODY.as_bytes()).unwrap(),
        owner: OwnerToken::random(),
        lease: LEASE,
        expired_dispatch: ExpiredDispatch::OutcomeUnknown,
    };
    assert_eq!(store.claim(&scope, &claim).await.unwrap(), ClaimOutcome::Acquired);
    if dispatched {
        store.mark_dispatched(&scope, claim.owner).await.unwrap();
    }
    (scope, claim.owner)
}

fn refund() -> http::Request<axum::body::Body> {
    post_json("/refunds", Some("k1"), BODY)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_gone_before_dispatch_is_taken_over_and_runs_once() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store.clone());
    let (scope, old_owner) = vanished_holder(&*store, false).await;
    let claimed = ballast::clock::now();
    let first = send(&app, refund()).await;
    let answer = if first.status() == 409 {
        poll_until(&app, refund, |a| a.status() != 409).await
    } else {
        // A loaded machine may stall past the short lease before this first retry: then, and only then, the
        // first retry already takes over.
        let age = ballast::clock::now().saturating_duration_since(claimed);
        assert!(
            age >= LEASE,
            "taken over {age:?} into a {LEASE:?} lease: {first:?}"
        );
        first
    };
    assert_eq!(answer.status(), 201);
    assert!(!answer.replayed(), "taken over and run");
    assert_eq!(handlers.runs(), 1);
    let late = StoredResponse {
        status: 500,
        headers: Vec::new(),
        body: "late".into(),
    };
    assert!(
        matches!(
            store.complete(&scope, old_owner, &late).await,
            Err(StoreError::NotHeld)
        ),
        "the vanished holder can no longer write"
    );
    let replay = send(&app, refund()).await;
    assert!(replay.replayed());
    assert_eq!(replay.body, BODY);
    assert_eq!(handlers.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_gone_after_dispatch_leaves_outcome_unknown() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store.clone());
    vanished_holder(&*store, true).await;
    let answer = poll_until(&app, refund, |a| a.status() != 409).await;
    assert_eq!(answer.status(), 502);
    assert_eq!(answer.problem_type(), "urn:ballast:outcome_unknown");
    assert_eq!(answer.header("x-should-retry"), Some("false"));
    assert_eq!(send(&app, refund()).await.status(), 502, "for good");
    assert_eq!(handlers.runs(), 0, "never re-run automatically");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_deduplicates_is_re_run_after_a_vanished_dispatch() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let layer = IdempotencyLayer::builder(store.clone())
        .expired_dispatch(ExpiredDispatch::TakeOver)
        .build()
        .unwrap();
    let app = app(layer, &handlers, Arc::clone(&store));
    vanished_holder(&*store, true).await;
    let answer = poll_until(&app, refund, |a| a.status() != 409).await;
    assert_eq!(answer.status(), 201);
    assert_eq!(handlers.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_panic_after_dispatch_leaves_outcome_unknown() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store);
    let answer = send(&app, post_json("/panic", Some("k1"), "{}")).await;
    assert_eq!(answer.status(), 500);
    assert_eq!(answer.problem_type(), "urn:ballast:handler_panicked");
    let retry = send(&app, post_json("/panic", Some("k1"), "{}")).await;
    assert_eq!(retry.status(), 502);
    assert_eq!(retry.problem_type(), "urn:ballast:outcome_unknown");
    assert_eq!(handlers.runs(), 1);
}

/// Regression (issue 11): a panic while the layer read the handler's response body escaped the layer's guard
/// and left the record `dispatched` (409 for the whole lease). The handler had acted: `outcome_unknown`, as for
/// a panic in the handler itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_while_reading_the_response_body_leaves_outcome_unknown() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store);
    let answer = send(&app, post_json("/panic-body", Some("k1"), "{}")).await;
    assert_eq!(answer.status(), 500);
    assert_eq!(answer.problem_type(), "urn:ballast:handler_panicked");
    assert_eq!(answer.header("ballast-outcome"), Some("unknown"));
    let retry = send(&app, post_json("/panic-body", Some("k1"), "{}")).await;
    assert_eq!(retry.status(), 502, "{:?}", retry.body);
    assert_eq!(retry.problem_type(), "urn:ballast:outcome_unknown");
    assert_eq!(handlers.runs(), 1);
}
