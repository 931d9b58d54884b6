//! The suite's cases that need no lease to run out.

use std::sync::Arc;

use super::{LONG, Opener, acquire, fresh_scope, open, print, request, response};
use crate::{
    ClaimOutcome, IdempotencyStore, InFlight, OwnerToken, RecordState, Scope, StoreError, StoreOptions,
};

fn not_held(result: Result<(), StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::NotHeld)),
        "{what}: expected NotHeld, got {result:?}"
    );
}

/// A first claim holds the key: state `claimed`, the claimer's fingerprint, a lease no longer than asked.
pub async fn claim_acquires_a_new_key(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let claim = request(r#"{"order":1}"#, LONG);
    acquire(&*store, &scope, &claim).await;
    let record = store.lookup(&scope).await.unwrap().expect("the claimed record");
    assert_eq!(record.state, RecordState::Claimed);
    assert_eq!(record.fingerprint, claim.fingerprint);
    assert!(
        !record.lease_left.is_zero() && record.lease_left <= LONG,
        "lease_left {:?}",
        record.lease_left
    );
}

/// A key nobody used has no record.
pub async fn lookup_of_an_unknown_key_is_none(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    assert_eq!(store.lookup(&fresh_scope()).await.unwrap(), None);
}

/// Same key while `claimed`: in progress (409), with the holder's lease left as the hint.
pub async fn same_key_while_claimed_is_in_progress(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    acquire(&*store, &scope, &request("{}", LONG)).await;
    match store.claim(&scope, &request("{}", LONG)).await.unwrap() {
        ClaimOutcome::InProgress {
            state: InFlight::Claimed,
            lease_left,
        } => {
            assert!(
                !lease_left.is_zero() && lease_left <= LONG,
                "lease_left {lease_left:?}"
            )
        }
        other => panic!("expected in progress (claimed), got {other:?}"),
    }
}

/// Same key while `dispatched`: in progress (409).
pub async fn same_key_while_dispatched_is_in_progress(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let first = request("{}", LONG);
    acquire(&*store, &scope, &first).await;
    store.mark_dispatched(&scope, first.owner).await.unwrap();
    let outcome = store.claim(&scope, &request("{}", LONG)).await.unwrap();
    assert!(
        matches!(
            outcome,
            ClaimOutcome::InProgress {
                state: InFlight::Dispatched,
                ..
            }
        ),
        "expected in progress (dispatched), got {outcome:?}"
    );
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::Dispatched
    );
}

/// Same key, another fingerprint: a mismatch (422) whatever the record's state, and the record is untouched.
pub async fn another_fingerprint_is_a_mismatch_in_every_state(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    for step in 0..4 {
        let scope = fresh_scope();
        let first = request(r#"{"amount":10}"#, LONG);
        acquire(&*store, &scope, &first).await;
        if step >= 1 {
            store.mark_dispatched(&scope, first.owner).await.unwrap();
        }
        match step {
            2 => store
                .complete(&scope, first.owner, &response(200, b"ok"))
                .await
                .unwrap(),
            3 => store.mark_outcome_unknown(&scope, first.owner).await.unwrap(),
            _ => {}
        }
        let before = store.lookup(&scope).await.unwrap();
        let outcome = store
            .claim(&scope, &request(r#"{"amount":99}"#, LONG))
            .await
            .unwrap();
        assert_eq!(
            outcome,
            ClaimOutcome::FingerprintMismatch,
            "state {:?}",
            before.as_ref().map(|r| &r.state)
        );
        let after = store.lookup(&scope).await.unwrap();
        assert_eq!(
            after.map(|r| (r.state, r.fingerprint)),
            before.map(|r| (r.state, r.fingerprint))
        );
    }
}

/// Same key after completion: the stored status, headers and body come back byte for byte — for 2xx, 4xx and
/// 5xx alike (each is what the upstream itself said).
pub async fn completed_responses_replay_exactly(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let bodies: [(u16, &'static [u8]); 4] = [
        (201, br#"{"refund":"r_1"}"#),
        (404, b"no such order"),
        (503, &[0, 159, 146, 150]),
        (204, b""),
    ];
    for (status, body) in bodies {
        let scope = fresh_scope();
        let first = request("{}", LONG);
        acquire(&*store, &scope, &first).await;
        store.mark_dispatched(&scope, first.owner).await.unwrap();
        let stored = response(status, body);
        store.complete(&scope, first.owner, &stored).await.unwrap();
        let again = store.claim(&scope, &request("{}", LONG)).await.unwrap();
        assert_eq!(again, ClaimOutcome::Completed(stored.clone()), "status {status}");
        let record = store.lookup(&scope).await.unwrap().unwrap();
        assert_eq!(record.state, RecordState::Completed(stored));
        assert!(record.lease_left.is_zero(), "a finished record holds no lease");
    }
}

/// A claim released before the upstream could act (local rejection, never sent) leaves nothing: a retry with
/// the same key — even another body — runs. Released from `claimed` and from `dispatched` alike.
pub async fn released_claims_leave_nothing_behind(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    for dispatched in [false, true] {
        let scope = fresh_scope();
        let first = request("{}", LONG);
        acquire(&*store, &scope, &first).await;
        if dispatched {
            store.mark_dispatched(&scope, first.owner).await.unwrap();
        }
        store.release(&scope, first.owner).await.unwrap();
        assert_eq!(store.lookup(&scope).await.unwrap(), None);
        acquire(&*store, &scope, &request(r#"{"other":true}"#, LONG)).await;
        not_held(store.release(&scope, first.owner).await, "the released owner");
    }
}

/// `outcome_unknown` is final: every later claim is told so (never re-run automatically), and even the holder
/// cannot write it any more.
pub async fn outcome_unknown_is_final(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let first = request("{}", LONG);
    acquire(&*store, &scope, &first).await;
    store.mark_dispatched(&scope, first.owner).await.unwrap();
    store.mark_outcome_unknown(&scope, first.owner).await.unwrap();
    for expired_dispatch in [
        crate::ExpiredDispatch::OutcomeUnknown,
        crate::ExpiredDispatch::TakeOver,
    ] {
        let claim = crate::ClaimRequest {
            expired_dispatch,
            ..request("{}", LONG)
        };
        assert_eq!(
            store.claim(&scope, &claim).await.unwrap(),
            ClaimOutcome::OutcomeUnknown
        );
    }
    let record = store.lookup(&scope).await.unwrap().unwrap();
    assert_eq!(record.state, RecordState::OutcomeUnknown);
    assert!(record.lease_left.is_zero());
    not_held(
        store.complete(&scope, first.owner, &response(200, b"late")).await,
        "complete",
    );
    not_held(store.release(&scope, first.owner).await, "release");
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::OutcomeUnknown
    );
}

/// Only the holder's token changes a record: another token's every write is refused and changes nothing.
pub async fn writes_by_another_owner_are_rejected(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let first = request("{}", LONG);
    acquire(&*store, &scope, &first).await;
    let stranger = OwnerToken::random();
    not_held(store.mark_dispatched(&scope, stranger).await, "mark_dispatched");
    not_held(
        store.complete(&scope, stranger, &response(200, b"x")).await,
        "complete",
    );
    not_held(store.release(&scope, stranger).await, "release");
    store.mark_dispatched(&scope, first.owner).await.unwrap();
    not_held(
        store.mark_outcome_unknown(&scope, stranger).await,
        "mark_outcome_unknown",
    );
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::Dispatched
    );
    // And nobody writes a record that does not exist.
    let absent = fresh_scope();
    not_held(
        store.mark_dispatched(&absent, first.owner).await,
        "absent mark_dispatched",
    );
    not_held(
        store.complete(&absent, first.owner, &response(200, b"x")).await,
        "absent complete",
    );
    assert_eq!(
        store.lookup(&absent).await.unwrap(),
        None,
        "a refused write must not create a record"
    );
}

/// The holder cannot skip or repeat a step: `outcome_unknown` before `dispatched`, a second `dispatched`, a
/// second completion, a release after completion.
pub async fn transitions_out_of_order_are_rejected(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = fresh_scope();
    let first = request("{}", LONG);
    acquire(&*store, &scope, &first).await;
    not_held(
        store.mark_outcome_unknown(&scope, first.owner).await,
        "outcome_unknown while claimed",
    );
    store.mark_dispatched(&scope, first.owner).await.unwrap();
    not_held(
        store.mark_dispatched(&scope, first.owner).await,
        "dispatched twice",
    );
    let stored = response(200, b"first");
    store.complete(&scope, first.owner, &stored).await.unwrap();
    not_held(
        store
            .complete(&scope, first.owner, &response(500, b"second"))
            .await,
        "completed twice",
    );
    not_held(
        store.release(&scope, first.owner).await,
        "release after completion",
    );
    not_held(
        store.mark_outcome_unknown(&scope, first.owner).await,
        "outcome_unknown after completion",
    );
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::Completed(stored)
    );
}

/// One principal never sees another's record under the same route and key: its own claim runs, its lookup
/// finds nothing of the other's.
pub async fn principals_are_isolated(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let mine = fresh_scope();
    let theirs = Scope::new(
        format!("{}-other", mine.principal()),
        mine.route(),
        mine.key().clone(),
    );
    isolated(&*store, &mine, &theirs).await;
}

/// The same principal and key on two routes are two operations.
pub async fn routes_are_isolated(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let mine = fresh_scope();
    let other = Scope::new(mine.principal(), "POST /v1/tools/charge", mine.key().clone());
    isolated(&*store, &mine, &other).await;
}

async fn isolated(store: &dyn IdempotencyStore, first: &Scope, second: &Scope) {
    let claim = request("{}", LONG);
    acquire(store, first, &claim).await;
    store.mark_dispatched(first, claim.owner).await.unwrap();
    store
        .complete(first, claim.owner, &response(200, b"secret"))
        .await
        .unwrap();
    assert_eq!(store.lookup(second).await.unwrap(), None);
    // Another body under the other scope is no mismatch: it is another operation.
    acquire(store, second, &request(r#"{"x":1}"#, LONG)).await;
    assert_eq!(
        store.lookup(second).await.unwrap().unwrap().state,
        RecordState::Claimed
    );
}

/// 64 requests racing with one key: exactly one holds it, every other is told it is in progress.
pub async fn concurrent_claims_have_one_winner(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    let scope = Arc::new(fresh_scope());
    let racers: Vec<_> = (0..64)
        .map(|_| {
            let (store, scope) = (Arc::clone(&store), Arc::clone(&scope));
            tokio::spawn(async move { store.claim(&scope, &request("{}", LONG)).await.unwrap() })
        })
        .collect();
    let mut acquired = 0;
    for racer in racers {
        match racer.await.unwrap() {
            ClaimOutcome::Acquired => acquired += 1,
            ClaimOutcome::InProgress {
                state: InFlight::Claimed,
                ..
            } => {}
            other => panic!("a racer got {other:?}"),
        }
    }
    assert_eq!(acquired, 1, "exactly one racer may hold the key");
    assert_eq!(
        store.lookup(&scope).await.unwrap().unwrap().fingerprint,
        print("{}")
    );
}

/// A store that works passes its health check, and the check leaves no record a request could meet.
pub async fn a_working_store_passes_its_check(opener: Opener) {
    let Some(store) = open(opener, StoreOptions::default()).await else {
        return;
    };
    store.check().await.expect("a working store passes its check");
    store.check().await.expect("and again");
    let scope = fresh_scope();
    acquire(&*store, &scope, &request("{}", LONG)).await;
    store.check().await.expect("beside records in flight");
    assert!(store.lookup(&scope).await.unwrap().is_some());
}
