//! What a claim does to the record it finds — one decision for every backend that reads the record and then
//! writes it inside one transaction (SQLite, PostgreSQL). Redis makes the same decision in its script.

use ballast_core::Fingerprint;

use crate::clock::from_millis;
use crate::{ClaimOutcome, ClaimRequest, ExpiredDispatch, InFlight, OwnerToken, Record, RecordState};

/// A record as a backend keeps it: times in milliseconds on the store's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) state: RecordState,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) owner: OwnerToken,
    /// When the holder's lease runs out.
    pub(crate) lease_until: i64,
    /// When the record counts as absent (retention).
    pub(crate) expires_at: i64,
}

/// What the claim must write, or answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ClaimStep {
    /// No live record: write a new `claimed` one (replacing an expired one), answer `Acquired`.
    Insert,
    /// An expired in-flight record: give it to the claimer if it still carries `old` (compare-and-set), as
    /// `claimed`, answer `TookOver { was }`.
    TakeOver { old: OwnerToken, was: InFlight },
    /// An expired dispatch the upstream cannot deduplicate: make it `outcome_unknown` if it still carries `old`,
    /// answer `OutcomeUnknown`.
    MarkUnknown { old: OwnerToken },
    /// Nothing to write.
    Answer(ClaimOutcome),
}

/// The step for `claim` on `existing` at `now`.
pub(crate) fn claim_step(existing: Option<&Stored>, claim: &ClaimRequest, now: i64) -> ClaimStep {
    let Some(existing) = existing.filter(|stored| stored.expires_at > now) else {
        return ClaimStep::Insert;
    };
    if existing.fingerprint != claim.fingerprint {
        return ClaimStep::Answer(ClaimOutcome::FingerprintMismatch);
    }
    let in_flight = match &existing.state {
        RecordState::Completed(response) => {
            return ClaimStep::Answer(ClaimOutcome::Completed(response.clone()));
        }
        RecordState::OutcomeUnknown => return ClaimStep::Answer(ClaimOutcome::OutcomeUnknown),
        RecordState::Claimed => InFlight::Claimed,
        RecordState::Dispatched => InFlight::Dispatched,
    };
    if existing.lease_until > now {
        let lease_left = from_millis(existing.lease_until - now);
        return ClaimStep::Answer(ClaimOutcome::InProgress {
            state: in_flight,
            lease_left,
        });
    }
    match (in_flight, claim.expired_dispatch) {
        (InFlight::Dispatched, ExpiredDispatch::OutcomeUnknown) => {
            ClaimStep::MarkUnknown { old: existing.owner }
        }
        (was, _) => ClaimStep::TakeOver {
            old: existing.owner,
            was,
        },
    }
}

/// The record as `lookup` reports it at `now`: absent once past its retention.
pub(crate) fn visible(stored: Stored, now: i64) -> Option<Record> {
    if stored.expires_at <= now {
        return None;
    }
    let lease_left = match stored.state {
        RecordState::Claimed | RecordState::Dispatched => from_millis(stored.lease_until - now),
        RecordState::Completed(_) | RecordState::OutcomeUnknown => std::time::Duration::ZERO,
    };
    Some(Record {
        state: stored.state,
        fingerprint: stored.fingerprint,
        lease_left,
    })
}

/// The stored name of a state (a text column, readable by an operator).
pub(crate) fn state_name(state: &RecordState) -> &'static str {
    match state {
        RecordState::Claimed => "claimed",
        RecordState::Dispatched => "dispatched",
        RecordState::Completed(_) => "completed",
        RecordState::OutcomeUnknown => "outcome_unknown",
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ballast_core::fingerprint;

    use super::*;
    use crate::StoredResponse;

    fn claim(expired_dispatch: ExpiredDispatch) -> ClaimRequest {
        ClaimRequest {
            fingerprint: fingerprint("POST", "/r", None, b"a").unwrap(),
            owner: OwnerToken::random(),
            lease: Duration::from_secs(1),
            expired_dispatch,
        }
    }

    fn stored(state: RecordState, lease_until: i64, expires_at: i64) -> Stored {
        Stored {
            state,
            fingerprint: fingerprint("POST", "/r", None, b"a").unwrap(),
            owner: OwnerToken::from_bytes([7; 16]),
            lease_until,
            expires_at,
        }
    }

    #[test]
    fn absent_or_past_retention_is_a_fresh_claim() {
        let request = claim(ExpiredDispatch::OutcomeUnknown);
        assert_eq!(claim_step(None, &request, 100), ClaimStep::Insert);
        let old = stored(RecordState::OutcomeUnknown, 0, 100);
        assert_eq!(
            claim_step(Some(&old), &request, 100),
            ClaimStep::Insert,
            "expires_at is exclusive"
        );
        assert_eq!(visible(old, 100), None);
    }

    #[test]
    fn a_live_lease_is_in_progress_with_the_time_left() {
        let live = stored(RecordState::Dispatched, 1_500, 10_000);
        let step = claim_step(Some(&live), &claim(ExpiredDispatch::TakeOver), 1_000);
        let lease_left = Duration::from_millis(500);
        assert_eq!(
            step,
            ClaimStep::Answer(ClaimOutcome::InProgress {
                state: InFlight::Dispatched,
                lease_left
            })
        );
    }

    #[test]
    fn an_expired_lease_is_taken_over_or_left_unknown() {
        let owner = OwnerToken::from_bytes([7; 16]);
        let claimed = stored(RecordState::Claimed, 1_000, 10_000);
        let dispatched = stored(RecordState::Dispatched, 1_000, 10_000);
        for mode in [ExpiredDispatch::OutcomeUnknown, ExpiredDispatch::TakeOver] {
            let step = claim_step(Some(&claimed), &claim(mode), 1_000);
            assert_eq!(
                step,
                ClaimStep::TakeOver {
                    old: owner,
                    was: InFlight::Claimed
                },
                "lease_until is exclusive"
            );
        }
        let unknown = claim_step(Some(&dispatched), &claim(ExpiredDispatch::OutcomeUnknown), 1_000);
        assert_eq!(unknown, ClaimStep::MarkUnknown { old: owner });
        let resend = claim_step(Some(&dispatched), &claim(ExpiredDispatch::TakeOver), 1_000);
        assert_eq!(
            resend,
            ClaimStep::TakeOver {
                old: owner,
                was: InFlight::Dispatched
            }
        );
    }

    #[test]
    fn a_mismatch_wins_over_every_state() {
        let mut other = claim(ExpiredDispatch::TakeOver);
        other.fingerprint = fingerprint("POST", "/r", None, b"b").unwrap();
        let response = StoredResponse {
            status: 200,
            headers: vec![],
            body: Default::default(),
        };
        for state in [
            RecordState::Claimed,
            RecordState::Dispatched,
            RecordState::Completed(response),
        ] {
            for lease_until in [0, 5_000] {
                let record = stored(state.clone(), lease_until, 10_000);
                let step = claim_step(Some(&record), &other, 1_000);
                assert_eq!(step, ClaimStep::Answer(ClaimOutcome::FingerprintMismatch));
            }
        }
    }

    #[test]
    fn finished_records_hold_no_lease() {
        let record = visible(stored(RecordState::OutcomeUnknown, 5_000, 10_000), 1_000).unwrap();
        assert_eq!(record.lease_left, Duration::ZERO);
        let record = visible(stored(RecordState::Claimed, 900, 10_000), 1_000).unwrap();
        assert_eq!(
            record.lease_left,
            Duration::ZERO,
            "an expired lease reads as zero, not negative"
        );
    }
}
