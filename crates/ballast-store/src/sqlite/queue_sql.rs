//! The deferred queue's statements (`crate::deferred`; the table is `schema::QUEUE`). Each function is one
//! operation of the store's write path (`batch.rs`): it runs inside a transaction, reads and writes as if alone,
//! and is undone alone when it fails — so an operation's row and its record change together or not at all.
//!
//! A worker's writes name its token and the state `in_progress` in their `WHERE` (none changed: `NotHeld`). The
//! record's writes are the records' own transitions (`sql.rs`), named by the token the row keeps and applied only
//! while the record still carries it in `claimed` or `dispatched`, live; the row changes either way. Two workers
//! never take one row: the store has one connection, and its operations run one after another.

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, ToSql, params};

use super::queue_row::{last_columns, pk, read};
use super::sql::{self, PK, changed, run, unavailable};
use crate::clock::{from_millis, millis};
use crate::{
    Finish, NewOperation, Operation, OwnerToken, QueueDepth, RECORD_GRACE, RecordState, Scope, StoreError,
    StoredResponse, Taken,
};

/// The states in which an operation's record is its own (`claimed` while it waits, `dispatched` while an attempt
/// runs).
const HELD: [&RecordState; 2] = [&RecordState::Claimed, &RecordState::Dispatched];

/// Queues `new` for the record `owner` holds (else `NotHeld`, nothing written), replacing any operation of the
/// scope; the operation as stored.
pub(super) fn defer(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    new: &NewOperation,
    now: i64,
    retention: i64,
) -> Result<Operation, StoreError> {
    let expires_at = now.saturating_add(millis(new.ttl));
    // The record's lease covers the operation's life and the grace of its last end; its retention moves with it
    // (as a renewal's does).
    let lease_until = expires_at.saturating_add(millis(RECORD_GRACE));
    let record_expires = lease_until.saturating_add(retention);
    // The record's token from now on: the operation's own (see `DeferredQueue::defer`).
    let fresh = OwnerToken::random();
    let fresh_bytes = &fresh.as_bytes()[..];
    changed(sql::transition_rows(
        connection,
        scope,
        owner,
        now,
        &HELD,
        "state = 'claimed', lease_until = ?6, expires_at = MAX(expires_at, ?7), owner = ?8",
        &[&lease_until, &record_expires, &fresh_bytes],
    ))?;
    let due_at = now.saturating_add(millis(new.due_in)).min(expires_at);
    let (status, headers, body) = last_columns(new.last.as_ref());
    let [principal, route, key] = pk(scope);
    run(
        connection,
        "INSERT OR REPLACE INTO ballast_deferred (principal, route, key, tool, priority, state, \
         attempts, max_attempts, request, last_status, last_headers, last_body, deferred_at, due_at, \
         expires_at, owner, sent) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', 0, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 0)",
        params![
            principal,
            route,
            key,
            new.tool,
            new.priority,
            new.max_attempts.max(1),
            &new.request[..],
            status,
            headers,
            body,
            now,
            due_at,
            expires_at,
            &fresh.as_bytes()[..],
        ],
    )?;
    read(connection, pk(scope), now)?
        .ok_or_else(|| StoreError::Corrupt("a deferred operation vanished as it was written".to_owned()))
}

/// The statement of [`take`] for `tools` queues (`?2`.. their names, `?1` now): the first due operation, or
/// one whose worker's lease ran out, by class, then due time, then when it was deferred (the rowid where those
/// fall in one millisecond). The first `WHERE` term is the waiting index's own condition, so that SQLite reads
/// that index.
fn take_sql(tools: usize) -> String {
    let names = (0..tools)
        .map(|n| format!("?{}", n + 2))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT principal, route, key, sent FROM ballast_deferred \
         WHERE (state = 'queued' OR state = 'in_progress') AND tool IN ({names}) \
         AND ((state = 'queued' AND due_at <= ?1) OR (state = 'in_progress' AND worker_until <= ?1)) \
         ORDER BY priority DESC, due_at, deferred_at, rowid LIMIT 1"
    )
}

/// The first due operation of `tools` (or one whose worker's lease ran out), now `worker`'s for `lease` ms.
pub(super) fn take(
    connection: &Connection,
    tools: &[String],
    worker: OwnerToken,
    lease: i64,
    now: i64,
) -> Result<Option<Taken>, StoreError> {
    if tools.is_empty() {
        return Ok(None);
    }
    let mut values: Vec<&dyn ToSql> = vec![&now];
    values.extend(tools.iter().map(|tool| tool as &dyn ToSql));
    let found = connection
        .prepare_cached(&take_sql(tools.len()))
        .map_err(unavailable)?
        .query_row(&*values, |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, bool>(3)?,
            ))
        })
        .optional()
        .map_err(unavailable)?;
    let Some((principal, route, key, interrupted)) = found else {
        return Ok(None);
    };
    // An attempt its last worker began and never ended counts: it may have acted.
    let sql = format!(
        "UPDATE ballast_deferred SET state = 'in_progress', worker = ?4, worker_until = ?5, \
         attempts = attempts + sent, sent = 0 WHERE {PK}"
    );
    let worker_until = now.saturating_add(lease);
    run(
        connection,
        &sql,
        params![principal, route, key, &worker.as_bytes()[..], worker_until],
    )?;
    let operation = read(connection, [&principal, &route, &key], now)?
        .ok_or_else(|| StoreError::Corrupt("a deferred operation vanished as it was taken".to_owned()))?;
    Ok(Some(Taken {
        operation,
        interrupted,
    }))
}

/// `set` (its values from `?5`) on the operation of `scope` while `worker` holds it; the token its record
/// carries. `NotHeld`, nothing changed, when the worker does not hold it (another took it, or it is no longer
/// in progress).
fn worker_write(
    connection: &Connection,
    scope: &Scope,
    worker: OwnerToken,
    set: &str,
    values: &[&dyn ToSql],
) -> Result<OwnerToken, StoreError> {
    let sql = format!(
        "UPDATE ballast_deferred SET {set} WHERE {PK} AND worker = ?4 AND state = 'in_progress' RETURNING owner"
    );
    let [principal, route, key] = pk(scope);
    let worker = &worker.as_bytes()[..];
    let mut row: Vec<&dyn ToSql> = vec![&principal, &route, &key, &worker];
    row.extend_from_slice(values);
    let owner: Vec<u8> = connection
        .prepare_cached(&sql)
        .map_err(unavailable)?
        .query_row(&*row, |row| row.get(0))
        .optional()
        .map_err(unavailable)?
        .ok_or(StoreError::NotHeld)?;
    let owner = owner.try_into().map_err(|_| {
        StoreError::Corrupt(format!(
            "the deferred operation's owner of {:?}",
            scope.storage_key()
        ))
    })?;
    Ok(OwnerToken::from_bytes(owner))
}

/// The worker's lease runs `lease` ms from now.
pub(super) fn renew(
    connection: &Connection,
    scope: &Scope,
    worker: OwnerToken,
    lease: i64,
    now: i64,
) -> Result<(), StoreError> {
    let worker_until = now.saturating_add(lease);
    worker_write(connection, scope, worker, "worker_until = ?5", &[&worker_until]).map(|_| ())
}

/// An attempt is about to leave: the row says so (a worker that dies now leaves it interrupted), and the
/// record becomes `dispatched`.
pub(super) fn begin_attempt(
    connection: &Connection,
    scope: &Scope,
    worker: OwnerToken,
    now: i64,
) -> Result<(), StoreError> {
    let owner = worker_write(connection, scope, worker, "sent = 1", &[])?;
    let claimed = [&RecordState::Claimed];
    sql::transition_rows(
        connection,
        scope,
        owner,
        now,
        &claimed,
        "state = 'dispatched'",
        &[],
    )?;
    Ok(())
}

/// Back to `queued`, due `due_in` from now (never past the ttl), the attempt counted if `attempted`, `last`
/// kept when given; the record back to `claimed`.
pub(super) fn reschedule(
    connection: &Connection,
    scope: &Scope,
    worker: OwnerToken,
    due_in: Duration,
    attempted: bool,
    last: Option<&StoredResponse>,
    now: i64,
) -> Result<(), StoreError> {
    let due_at = now.saturating_add(millis(due_in));
    let (status, headers, body) = last_columns(last);
    let set = "state = 'queued', due_at = MIN(?5, expires_at), worker = NULL, worker_until = NULL, sent = 0, \
        attempts = attempts + ?6, last_status = COALESCE(?7, last_status), \
        last_headers = CASE WHEN ?7 IS NULL THEN last_headers ELSE ?8 END, \
        last_body = CASE WHEN ?7 IS NULL THEN last_body ELSE ?9 END";
    let values: [&dyn ToSql; 5] = [&due_at, &i64::from(attempted), &status, &headers, &body];
    let owner = worker_write(connection, scope, worker, set, &values)?;
    sql::transition_rows(connection, scope, owner, now, &HELD, "state = 'claimed'", &[])?;
    Ok(())
}

/// Ends the operation as `end` says, and its record with it.
pub(super) fn finish(
    connection: &Connection,
    scope: &Scope,
    worker: OwnerToken,
    end: &Finish,
    attempted: bool,
    now: i64,
    retention: i64,
) -> Result<(), StoreError> {
    let (status, headers, body) = last_columns(end.last());
    let set = "state = ?5, finished_at = ?6, attempts = attempts + ?7, worker = NULL, worker_until = NULL, \
        sent = 0, last_status = ?8, last_headers = ?9, last_body = ?10";
    let state = end.state().as_str();
    let values: [&dyn ToSql; 6] = [&state, &now, &i64::from(attempted), &status, &headers, &body];
    let owner = worker_write(connection, scope, worker, set, &values)?;
    end_record(connection, scope, owner, end, now, retention)
}

/// The record of an operation that ended as `end` says, if it still carries the operation's token `owner` in
/// `claimed` or `dispatched`: as the records' own calls leave it (`complete`, `release`, `mark_outcome_unknown`).
pub(super) fn end_record(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    end: &Finish,
    now: i64,
    retention: i64,
) -> Result<(), StoreError> {
    match end {
        Finish::Completed(response) | Finish::Rejected(response) => {
            sql::completed_rows(connection, scope, owner, response, now, retention, &HELD)
        }
        Finish::GaveUp(_) | Finish::Expired => sql::released_rows(connection, scope, owner, now, &HELD),
        Finish::OutcomeUnknown => sql::outcome_unknown_rows(connection, scope, owner, now, retention, &HELD),
    }?;
    Ok(())
}

/// The operation of `scope`, finished or not.
pub(super) fn lookup(
    connection: &Connection,
    scope: &Scope,
    now: i64,
) -> Result<Option<Operation>, StoreError> {
    read(connection, pk(scope), now)
}

/// Unfinished operations per queue and class, with the oldest one's age.
pub(super) fn depth(connection: &Connection, now: i64) -> Result<Vec<QueueDepth>, StoreError> {
    let mut statement = connection
        .prepare_cached(
            "SELECT tool, priority, SUM(state = 'queued'), SUM(state = 'in_progress'), MIN(deferred_at) \
             FROM ballast_deferred WHERE state = 'queued' OR state = 'in_progress' GROUP BY tool, priority",
        )
        .map_err(unavailable)?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, i64>(4)?,
            ))
        })
        .map_err(unavailable)?;
    let mut depth = Vec::new();
    for row in rows {
        let (tool, priority, queued, in_progress, oldest) = row.map_err(unavailable)?;
        let corrupt = || StoreError::Corrupt(format!("a deferred operation's priority in queue {tool:?}"));
        depth.push(QueueDepth {
            priority: u8::try_from(priority).map_err(|_| corrupt())?,
            tool,
            queued: u64::try_from(queued).unwrap_or(0),
            in_progress: u64::try_from(in_progress).unwrap_or(0),
            oldest: from_millis(now.saturating_sub(oldest)),
        });
    }
    Ok(depth)
}

/// Deletes the operations that ended at least `retention` ms ago.
pub(super) fn reap(connection: &Connection, now: i64, retention: i64) -> Result<u64, StoreError> {
    let deleted = run(
        connection,
        "DELETE FROM ballast_deferred WHERE finished_at IS NOT NULL AND finished_at <= ?1",
        params![now.saturating_sub(retention)],
    )?;
    Ok(u64::try_from(deleted).unwrap_or(u64::MAX))
}
