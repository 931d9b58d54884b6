//! The claim script against `decide.rs`: every combination of a record's state, fingerprint, lease, retention
//! and the claimer's `ExpiredDispatch`, planted behind the store's back, gets the answer `claim_step` gives and
//! leaves the record `claim_step` says.

use super::*;
use crate::ExpiredDispatch;
use crate::decide::state_name;

/// The server's clock in Unix ms.
async fn server_now(raw: &mut ConnectionManager) -> i64 {
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(raw).await.unwrap();
    seconds * 1000 + micros / 1000
}

/// Writes `stored` as the store keeps it (no Redis expiry, so even a record past its retention stays to be read).
async fn plant(raw: &mut ConnectionManager, key: &str, stored: &Stored) {
    let (lease, exp) = (stored.lease_until.to_string(), stored.expires_at.to_string());
    let owner = stored.owner.to_hex();
    let mut fields: Vec<(&str, Vec<u8>)> = vec![
        ("state", state_name(&stored.state).as_bytes().to_vec()),
        ("fp", stored.fingerprint.as_bytes().to_vec()),
        ("owner", owner.into_bytes()),
        ("lease", lease.into_bytes()),
        ("exp", exp.into_bytes()),
    ];
    if let RecordState::Completed(response) = &stored.state {
        fields.push(("status", response.status.to_string().into_bytes()));
        fields.push(("headers", encode_headers(&response.headers)));
        fields.push(("body", response.body.to_vec()));
    }
    let _: () = raw.hset_multiple(key, &fields).await.unwrap();
}

/// The state a record is in after `step` was applied to `stored`.
fn state_after(step: &ClaimStep, stored: &Stored) -> RecordState {
    match step {
        ClaimStep::Insert | ClaimStep::TakeOver { .. } => RecordState::Claimed,
        ClaimStep::MarkUnknown { .. } => RecordState::OutcomeUnknown,
        ClaimStep::Answer(_) => stored.state.clone(),
    }
}

fn expected_outcome(step: ClaimStep) -> ClaimOutcome {
    match step {
        ClaimStep::Insert => ClaimOutcome::Acquired,
        ClaimStep::TakeOver { was, .. } => ClaimOutcome::TookOver { was },
        ClaimStep::MarkUnknown { .. } => ClaimOutcome::OutcomeUnknown,
        ClaimStep::Answer(outcome) => outcome,
    }
}

/// Equal outcomes; an in-progress lease left may differ by the few ms between planting and claiming.
fn same_outcome(got: &ClaimOutcome, want: &ClaimOutcome) -> bool {
    match (got, want) {
        (
            ClaimOutcome::InProgress { state, lease_left },
            ClaimOutcome::InProgress {
                state: want_state,
                lease_left: want_left,
            },
        ) => state == want_state && want_left.abs_diff(*lease_left) < Duration::from_secs(5),
        _ => got == want,
    }
}

fn states() -> [RecordState; 4] {
    [
        RecordState::Claimed,
        RecordState::Dispatched,
        RecordState::Completed(crate::conformance::response(201, b"stored")),
        RecordState::OutcomeUnknown,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_script_decides_as_decide_rs_does() {
    let Some(store) = connect(&private_prefix(), StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let mut checked = 0;
    for state in states() {
        for same_print in [true, false] {
            for lease_live in [true, false] {
                for retained in [true, false] {
                    for expired_dispatch in [ExpiredDispatch::OutcomeUnknown, ExpiredDispatch::TakeOver] {
                        let case = format!(
                            "{} same_print={same_print} lease_live={lease_live} retained={retained} {expired_dispatch:?}",
                            state_name(&state)
                        );
                        let now = server_now(&mut raw).await;
                        let stored = Stored {
                            state: state.clone(),
                            fingerprint: print(if same_print { "{}" } else { r#"{"other":1}"# }),
                            owner: OwnerToken::random(),
                            lease_until: now + if lease_live { 30_000 } else { -30_000 },
                            expires_at: now + if retained { 60_000 } else { -1_000 },
                        };
                        let claim = ClaimRequest {
                            expired_dispatch,
                            ..request("{}", LONG)
                        };
                        let scope = fresh_scope();
                        let key = store.key(&scope);
                        plant(&mut raw, &key, &stored).await;
                        let step = claim_step(Some(&stored), &claim, now);
                        let after = state_after(&step, &stored);
                        let want = expected_outcome(step);
                        let got = store.claim(&scope, &claim).await.unwrap();
                        assert!(
                            same_outcome(&got, &want),
                            "{case}: got {got:?}, decide.rs says {want:?}"
                        );
                        let record = store.lookup(&scope).await.unwrap().expect("a live record");
                        assert_eq!(record.state, after, "{case}: state after the claim");
                        if matches!(got, ClaimOutcome::Acquired | ClaimOutcome::TookOver { .. }) {
                            let stale = store.mark_dispatched(&scope, stored.owner).await;
                            assert!(matches!(stale, Err(StoreError::NotHeld)), "{case}: the old owner");
                            store.mark_dispatched(&scope, claim.owner).await.unwrap();
                        }
                        let _: () = raw.del(&key).await.unwrap();
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 64);
}
