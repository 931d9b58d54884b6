//! What a new holder of the file settles at start-up (DESIGN.md, "SQLite store"): one process holds the file, so
//! whatever it holds in flight was left by a previous run of this store, and nobody is still working on it.
//!
//! A record left `claimed` is released (nothing was sent), and the lease of one left `dispatched` ends now — so
//! the next request with such a key settles it at once (`outcome_unknown`, or a re-send of the same key for an
//! upstream that deduplicates) instead of answering 409 for a lease nobody holds. Except a record an unfinished
//! deferred operation holds (`crate::deferred`): that one is `claimed` by design while the operation waits, or
//! `dispatched` while an attempt of it runs, and the operation still owns it — its workers end it, on this run.
//! So the operations' side is settled instead: the worker leases of those left `in_progress` end now, and the
//! restarted gateway's workers take them at once (as interrupted where an attempt had begun), rather than after
//! leases that belonged to workers of the previous run.

use rusqlite::{Connection, params};

use super::sql::run;
use crate::StoreError;

/// The record (of the statement's `ballast_idempotency` row) is held by an unfinished operation of its scope:
/// the operation keeps the token the record carries.
const HELD_BY_AN_OPERATION: &str = "EXISTS (SELECT 1 FROM ballast_deferred AS operation \
    WHERE operation.principal = ballast_idempotency.principal AND operation.route = ballast_idempotency.route \
    AND operation.key = ballast_idempotency.key AND operation.owner = ballast_idempotency.owner \
    AND (operation.state = 'queued' OR operation.state = 'in_progress'))";

/// What the start-up pass settled, for its log line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Settled {
    /// Records left `claimed`, released.
    pub(super) released: usize,
    /// Records left `dispatched` whose lease ended.
    pub(super) dispatched: usize,
    /// Deferred operations left `in_progress` whose worker's lease ended.
    pub(super) taken_back: usize,
}

/// Settles what the previous holder of the file left in flight, at `now`.
pub(super) fn settle_previous_run(connection: &Connection, now: i64) -> Result<Settled, StoreError> {
    let released = run(
        connection,
        &format!(
            "DELETE FROM ballast_idempotency WHERE state = 'claimed' AND expires_at > ?1 \
             AND NOT {HELD_BY_AN_OPERATION}"
        ),
        params![now],
    )?;
    let dispatched = run(
        connection,
        &format!(
            "UPDATE ballast_idempotency SET lease_until = ?1 \
             WHERE state = 'dispatched' AND lease_until > ?1 AND expires_at > ?1 AND NOT {HELD_BY_AN_OPERATION}"
        ),
        params![now],
    )?;
    let taken_back = run(
        connection,
        "UPDATE ballast_deferred SET worker_until = ?1 WHERE state = 'in_progress' AND worker_until > ?1",
        params![now],
    )?;
    Ok(Settled {
        released,
        dispatched,
        taken_back,
    })
}
