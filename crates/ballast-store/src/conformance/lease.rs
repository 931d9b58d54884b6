//! The suite's cases of a live holder's lease: renewal, and the final writes of a holder that was only late
//! (DESIGN.md, "Idempotency, server side": "holder still running", "holder's final write after its lease
//! expired").

use super::{
    LONG, Opener, PATIENCE, SHORT, acquire, claim_after_lease, fresh_scope, open, request, response,
};
use crate::{ClaimOutcome, ClaimRequest, ExpiredDispatch, IdempotencyStore, InFlight, RecordState, Scope};
use crate::{OwnerToken, StoreError, StoreOptions};

fn not_held(result: Result<(), StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::NotHeld)),
        "{what}: expected NotHeld, got {result:?}"
    );
}

/// Renewal moves the lease to `lease` from now, in `claimed` and in `dispatched`: a claimer meanwhile is told
/// the key is in progress for the renewed time, not the first lease's.
pub async fn a_live_holder_renews_its_lease(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let holder = request("{}", SHORT);
    acquire(&*store, &scope, &holder).await;
    for dispatched in [false, true] {
        if dispatched {
            store.mark_dispatched(&scope, holder.owner).await.unwrap();
        }
        store.renew(&scope, holder.owner, LONG).await.unwrap();
        let record = store.lookup(&scope).await.unwrap().unwrap();
        assert!(
            record.lease_left > LONG / 2,
            "renewed to {LONG:?}, left {:?}",
            record.lease_left
        );
        match store.claim(&scope, &request("{}", LONG)).await.unwrap() {
            ClaimOutcome::InProgress { state, lease_left } => {
                let was = if dispatched {
                    InFlight::Dispatched
                } else {
                    InFlight::Claimed
                };
                assert_eq!(state, was);
                assert!(lease_left > LONG / 2, "in progress for {lease_left:?}");
            }
            other => panic!("a renewed record is in progress, got {other:?}"),
        }
    }
    // Renewing to a shorter lease is honest too: the lease is what the holder last asked for.
    store.renew(&scope, holder.owner, SHORT).await.unwrap();
    let left = store.lookup(&scope).await.unwrap().unwrap().lease_left;
    assert!(left <= SHORT, "renewed to {SHORT:?}, left {left:?}");
    store
        .complete(&scope, holder.owner, &response(201, b"once"))
        .await
        .unwrap();
}

/// A holder whose lease ran out while nobody claimed the key was only slow: its renewal is accepted and the key
/// is its own again.
pub async fn a_late_renewal_is_accepted_when_nobody_took_over(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let holder = request("{}", SHORT);
    acquire(&*store, &scope, &holder).await;
    wait_for_lease_to_run_out(&*store, &scope).await;
    store.renew(&scope, holder.owner, LONG).await.unwrap();
    assert!(
        matches!(
            store.claim(&scope, &request("{}", LONG)).await.unwrap(),
            ClaimOutcome::InProgress { .. }
        ),
        "the renewed holder keeps its key"
    );
}

/// Only the holder renews, and only while it holds the record: a stranger, a displaced holder, and any
/// holder of a finished record are refused, and the record is unchanged.
pub async fn renewal_by_anyone_but_the_holder_is_refused(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let absent = fresh_scope();
    not_held(store.renew(&absent, OwnerToken::random(), LONG).await, "absent");
    assert_eq!(
        store.lookup(&absent).await.unwrap(),
        None,
        "a refused renewal creates nothing"
    );

    let scope = fresh_scope();
    let slow = request("{}", SHORT);
    acquire(&*store, &scope, &slow).await;
    not_held(store.renew(&scope, OwnerToken::random(), LONG).await, "stranger");
    let taker = request("{}", LONG);
    assert_eq!(
        claim_after_lease(&*store, &scope, &taker).await,
        ClaimOutcome::TookOver {
            was: InFlight::Claimed
        }
    );
    not_held(store.renew(&scope, slow.owner, LONG).await, "displaced holder");
    store.mark_dispatched(&scope, taker.owner).await.unwrap();
    store
        .complete(&scope, taker.owner, &response(200, b"done"))
        .await
        .unwrap();
    not_held(store.renew(&scope, taker.owner, LONG).await, "completed");

    let unknown = fresh_scope();
    let holder = request("{}", LONG);
    acquire(&*store, &unknown, &holder).await;
    store.mark_dispatched(&unknown, holder.owner).await.unwrap();
    store.mark_outcome_unknown(&unknown, holder.owner).await.unwrap();
    not_held(store.renew(&unknown, holder.owner, LONG).await, "outcome_unknown");
    assert_eq!(
        store.lookup(&unknown).await.unwrap().unwrap().state,
        RecordState::OutcomeUnknown
    );
}

/// The holder's lease ran out while `dispatched` and a claim made the record `outcome_unknown`; the holder was
/// only late. Its true answer replaces the unknown (nobody took the key over), and is replayed from then on.
pub async fn a_late_answer_settles_an_expiry_made_outcome_unknown(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let holder = request("{}", SHORT);
    acquire(&*store, &scope, &holder).await;
    store.mark_dispatched(&scope, holder.owner).await.unwrap();
    let outcome = claim_after_lease(&*store, &scope, &request("{}", LONG)).await;
    assert_eq!(outcome, ClaimOutcome::OutcomeUnknown);
    not_held(
        store.renew(&scope, holder.owner, LONG).await,
        "renewal of an outcome_unknown",
    );
    not_held(
        store
            .complete(&scope, OwnerToken::random(), &response(200, b"forged"))
            .await,
        "a stranger's complete",
    );
    let truth = response(201, b"the refund ran once");
    store.complete(&scope, holder.owner, &truth).await.unwrap();
    assert_eq!(
        store.claim(&scope, &request("{}", LONG)).await.unwrap(),
        ClaimOutcome::Completed(truth.clone())
    );
    not_held(
        store
            .complete(&scope, holder.owner, &response(500, b"again"))
            .await,
        "a second complete",
    );
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::Completed(truth)
    );
}

/// Same, but the late holder learned that nothing ran (it never sent, its send failed): its release clears the
/// unknown, and the key runs again.
pub async fn a_late_release_clears_an_expiry_made_outcome_unknown(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let holder = request("{}", SHORT);
    acquire(&*store, &scope, &holder).await;
    store.mark_dispatched(&scope, holder.owner).await.unwrap();
    let outcome = claim_after_lease(&*store, &scope, &request("{}", LONG)).await;
    assert_eq!(outcome, ClaimOutcome::OutcomeUnknown);
    not_held(
        store.release(&scope, OwnerToken::random()).await,
        "a stranger's release",
    );
    store.release(&scope, holder.owner).await.unwrap();
    assert_eq!(store.lookup(&scope).await.unwrap(), None);
    acquire(&*store, &scope, &request("{}", LONG)).await;
}

/// After a take-over of an expired dispatch (the upstream deduplicates), the old holder's late answer is
/// refused: the taker's record stands.
pub async fn a_late_answer_after_a_take_over_is_refused(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let holder = request("{}", SHORT);
    acquire(&*store, &scope, &holder).await;
    store.mark_dispatched(&scope, holder.owner).await.unwrap();
    let taker = ClaimRequest {
        expired_dispatch: ExpiredDispatch::TakeOver,
        ..request("{}", LONG)
    };
    assert_eq!(
        claim_after_lease(&*store, &scope, &taker).await,
        ClaimOutcome::TookOver {
            was: InFlight::Dispatched
        }
    );
    not_held(
        store
            .complete(&scope, holder.owner, &response(200, b"late"))
            .await,
        "late complete",
    );
    not_held(store.release(&scope, holder.owner).await, "late release");
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::Claimed
    );
}

/// Polls until the record's lease has run out (within [`PATIENCE`]).
async fn wait_for_lease_to_run_out(store: &dyn IdempotencyStore, scope: &Scope) {
    let give_up = crate::clock::monotonic_after(PATIENCE);
    while !store.lookup(scope).await.unwrap().unwrap().lease_left.is_zero() {
        assert!(!crate::clock::passed(give_up), "the lease never ran out");
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// A holder's own `outcome_unknown` retires its token: no write with the retired token (which anyone can spell:
/// the nil UUID) changes that record, or any other.
pub async fn the_retired_token_writes_nothing(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let retired = OwnerToken::from_bytes([0; 16]);
    let scope = fresh_scope();
    let holder = request("{}", LONG);
    acquire(&*store, &scope, &holder).await;
    store.mark_dispatched(&scope, holder.owner).await.unwrap();
    store.mark_outcome_unknown(&scope, holder.owner).await.unwrap();
    not_held(
        store.complete(&scope, retired, &response(200, b"forged")).await,
        "complete",
    );
    not_held(store.release(&scope, retired).await, "release");
    not_held(store.renew(&scope, retired, LONG).await, "renew");
    not_held(store.mark_dispatched(&scope, retired).await, "mark_dispatched");
    not_held(
        store.mark_outcome_unknown(&scope, retired).await,
        "mark_outcome_unknown",
    );
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::OutcomeUnknown,
        "still final"
    );
}
