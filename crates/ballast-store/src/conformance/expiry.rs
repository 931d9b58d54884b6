//! The suite's cases where a lease or a retention runs out (real time: each waits about a short lease).

use super::{
    LONG, Opener, PATIENCE, SHORT, acquire, claim_after_lease, fresh_scope, open, request, response,
};
use crate::{ClaimOutcome, ClaimRequest, ExpiredDispatch, InFlight, RecordState, StoreError, StoreOptions};

/// Lease ran out while `claimed` (the holder crashed before sending): the next request takes it over and runs.
pub async fn an_expired_claim_is_taken_over(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    acquire(&*store, &scope, &request("{}", SHORT)).await;
    let taker = request("{}", LONG);
    let outcome = claim_after_lease(&*store, &scope, &taker).await;
    assert_eq!(
        outcome,
        ClaimOutcome::TookOver {
            was: InFlight::Claimed
        }
    );
    let record = store.lookup(&scope).await.unwrap().unwrap();
    assert_eq!(record.state, RecordState::Claimed);
    assert!(
        record.lease_left > SHORT,
        "the taker's own lease counts now: {:?}",
        record.lease_left
    );
    store.mark_dispatched(&scope, taker.owner).await.unwrap();
    store
        .complete(&scope, taker.owner, &response(200, b"ran once"))
        .await
        .unwrap();
}

/// The holder whose lease was taken over was only slow: every write it still makes is refused (compare-and-set
/// on the owner token), and the taker's record stands.
pub async fn a_displaced_owner_cannot_write(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let slow = request("{}", SHORT);
    acquire(&*store, &scope, &slow).await;
    let taker = request("{}", LONG);
    assert_eq!(
        claim_after_lease(&*store, &scope, &taker).await,
        ClaimOutcome::TookOver {
            was: InFlight::Claimed
        }
    );
    let refused = |result: Result<(), StoreError>, what: &str| {
        assert!(
            matches!(result, Err(StoreError::NotHeld)),
            "late {what}: expected NotHeld, got {result:?}"
        )
    };
    refused(store.mark_dispatched(&scope, slow.owner).await, "mark_dispatched");
    refused(
        store.complete(&scope, slow.owner, &response(200, b"late")).await,
        "complete",
    );
    refused(store.release(&scope, slow.owner).await, "release");
    store.mark_dispatched(&scope, taker.owner).await.unwrap();
    refused(
        store.mark_outcome_unknown(&scope, slow.owner).await,
        "mark_outcome_unknown",
    );
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::Dispatched
    );
}

/// Lease ran out while `dispatched` and the upstream does not deduplicate: the record becomes
/// `outcome_unknown` — the claimer is told so, later claims too, whatever they would do with an expired
/// dispatch. (Only the vanished holder's own late answer can still settle it: `lease.rs`.)
pub async fn an_expired_dispatch_becomes_outcome_unknown(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let holder = request("{}", SHORT);
    acquire(&*store, &scope, &holder).await;
    store.mark_dispatched(&scope, holder.owner).await.unwrap();
    let outcome = claim_after_lease(&*store, &scope, &request("{}", LONG)).await;
    assert_eq!(outcome, ClaimOutcome::OutcomeUnknown);
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::OutcomeUnknown
    );
    let keyed = ClaimRequest {
        expired_dispatch: ExpiredDispatch::TakeOver,
        ..request("{}", LONG)
    };
    assert_eq!(
        store.claim(&scope, &keyed).await.unwrap(),
        ClaimOutcome::OutcomeUnknown,
        "final"
    );
}

/// Lease ran out while `dispatched` and the upstream deduplicates by the key: the claimer takes the record over
/// and re-sends the same key; the vanished holder can no longer write.
pub async fn an_expired_dispatch_is_taken_over_when_the_upstream_deduplicates(opener: Opener) {
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
    let outcome = claim_after_lease(&*store, &scope, &taker).await;
    assert_eq!(
        outcome,
        ClaimOutcome::TookOver {
            was: InFlight::Dispatched
        }
    );
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::Claimed
    );
    let late = store
        .complete(&scope, holder.owner, &response(200, b"late"))
        .await;
    assert!(
        matches!(late, Err(StoreError::NotHeld)),
        "late complete: {late:?}"
    );
    store.mark_dispatched(&scope, taker.owner).await.unwrap();
    let stored = response(201, b"the upstream's first answer");
    store.complete(&scope, taker.owner, &stored).await.unwrap();
    assert_eq!(
        store.claim(&scope, &request("{}", LONG)).await.unwrap(),
        ClaimOutcome::Completed(stored)
    );
}

/// A finished record is replayed until its retention runs out, then counts as absent (checked on read): the
/// key runs again, even with another body.
pub async fn finished_records_expire_after_the_retention(opener: Opener) {
    let Some(store) = open(opener, StoreOptions { retention: SHORT }).await else {
        return;
    };
    for unknown in [false, true] {
        let scope = fresh_scope();
        let first = request("{}", LONG);
        acquire(&*store, &scope, &first).await;
        store.mark_dispatched(&scope, first.owner).await.unwrap();
        // Taken before the write: a lookup within the retention of this instant must still find the record.
        let within_retention = crate::clock::monotonic_after(SHORT - std::time::Duration::from_millis(5));
        if unknown {
            store.mark_outcome_unknown(&scope, first.owner).await.unwrap();
        } else {
            store
                .complete(&scope, first.owner, &response(200, b"kept a while"))
                .await
                .unwrap();
        }
        let kept = store.lookup(&scope).await.unwrap().is_some();
        // On a loaded machine the lookup may come after the short retention: only then may it find nothing.
        assert!(
            kept || crate::clock::passed(within_retention),
            "kept right after finishing"
        );
        wait_until_absent(&*store, &scope).await;
        acquire(&*store, &scope, &request(r#"{"new":1}"#, LONG)).await;
    }
}

/// `reap` deletes records past their retention and leaves live ones.
pub async fn reap_deletes_expired_records(opener: Opener) {
    let Some(short) = open(opener, StoreOptions { retention: SHORT }).await else {
        return;
    };
    let Some(long) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let (expiring, kept) = (fresh_scope(), fresh_scope());
    for (store, scope) in [(&short, &expiring), (&long, &kept)] {
        let claim = request("{}", LONG);
        acquire(&**store, scope, &claim).await;
        store.mark_dispatched(scope, claim.owner).await.unwrap();
        store
            .complete(scope, claim.owner, &response(200, b"x"))
            .await
            .unwrap();
    }
    wait_until_absent(&*short, &expiring).await;
    let reaped = short.reap().await.unwrap();
    // A backend that expires records itself (Redis) has most likely deleted this one already: reap may find
    // nothing to delete.
    assert!(
        reaped >= 1 || short.expires_records_itself(),
        "the expired record must be reaped, reap returned {reaped}"
    );
    assert!(
        long.lookup(&kept).await.unwrap().is_some(),
        "a live record must survive reap"
    );
}

async fn wait_until_absent(store: &dyn crate::IdempotencyStore, scope: &crate::Scope) {
    let give_up = crate::clock::monotonic_after(PATIENCE);
    while store.lookup(scope).await.unwrap().is_some() {
        assert!(
            !crate::clock::passed(give_up),
            "the record outlived its retention by {PATIENCE:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}
