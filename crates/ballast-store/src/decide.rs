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
