//! The end of deferred operations nobody works (`DeferredQueue::expire_abandoned`; `crate::deferred`, "Operations
//! nobody works"): one operation of the store's write path (`batch.rs`), so each operation and its record end
//! together, and no worker's take or end can come between the choice of an operation and its end (the store's
//! operations run one after another).

use ballast_core::IdempotencyKey;
use rusqlite::{Connection, params};

use super::queue_sql::end_record;
use super::sql::{run, unavailable};
use crate::deferred::ABANDONED_BATCH;
use crate::{Finish, OwnerToken, Scope, StoreError};

/// An operation [`expire_abandoned`] ends: its rowid, scope, record token, and whether an attempt had begun.
type Abandoned = (i64, String, String, String, Vec<u8>, bool);

/// Ends up to [`ABANDONED_BATCH`] unfinished operations whose ttl ended `grace` ms ago or more and that no worker
/// holds (queued, or in progress with the worker's lease run out), whatever their tool
/// (`DeferredQueue::expire_abandoned`): `outcome_unknown`, the attempt counted, where one had begun, else
/// `expired`; each record as `queue_sql::finish` leaves it. How many ended. The first `WHERE` term is the waiting
/// index's condition, so that SQLite reads that index (the unfinished operations) rather than the table.
pub(super) fn expire_abandoned(
    connection: &Connection,
    now: i64,
    grace: i64,
    retention: i64,
) -> Result<u64, StoreError> {
    let batch = i64::try_from(ABANDONED_BATCH).unwrap_or(i64::MAX);
    let found: Vec<Abandoned> = connection
        .prepare_cached(
            "SELECT rowid, principal, route, key, owner, state = 'in_progress' AND sent FROM ballast_deferred \
             WHERE (state = 'queued' OR state = 'in_progress') AND expires_at <= ?1 \
             AND (state = 'queued' OR worker_until <= ?2) LIMIT ?3",
        )
        .map_err(unavailable)?
        .query_map(
            params![now.saturating_sub(grace), now, batch],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                ))
            },
        )
        .map_err(unavailable)?
        .collect::<Result<_, _>>()
        .map_err(unavailable)?;
    let ended = found.len();
    for (rowid, principal, route, key, owner, sent) in found {
        let corrupt = |what: &str| {
            StoreError::Corrupt(format!(
                "the deferred operation's {what} of {principal}/{route}/{key}"
            ))
        };
        let scope_key = IdempotencyKey::parse(&key).map_err(|_| corrupt("key"))?;
        let owner = OwnerToken::from_bytes(owner.try_into().map_err(|_| corrupt("owner"))?);
        let end = if sent {
            Finish::OutcomeUnknown
        } else {
            Finish::Expired
        };
        run(
            connection,
            "UPDATE ballast_deferred SET state = ?2, finished_at = ?3, attempts = attempts + ?4, worker = NULL, \
             worker_until = NULL, sent = 0, last_status = NULL, last_headers = NULL, last_body = NULL \
             WHERE rowid = ?1",
            params![rowid, end.state().as_str(), now, i64::from(sent)],
        )?;
        let scope = Scope::new(principal, route, scope_key);
        end_record(connection, &scope, owner, &end, now, retention)?;
    }
    Ok(u64::try_from(ended).unwrap_or(u64::MAX))
}
