//! The SQLite statements of the records (the schema is `schema.rs`). Every state change names the owner token
//! and the states it applies to in its `WHERE`, so a displaced owner's write changes no row and reports
//! `NotHeld`. The operations run inside the transaction their batch is committed in (`batch.rs`): each one reads
//! and writes as if alone, and is undone alone when it fails.

use ballast_core::Fingerprint;
use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension, params};

use crate::decide::{ClaimStep, Stored, claim_step, state_name, visible};
use crate::{
    ClaimOutcome, ClaimRequest, OwnerToken, Record, RecordState, Scope, StoreError, StoredResponse,
    decode_headers, encode_headers,
};

pub(super) fn unavailable(error: rusqlite::Error) -> StoreError {
    StoreError::unavailable(error)
}

/// A write that leaves nothing behind: a row no request can name (principal `""`) inserted and deleted in the
/// transaction of the probe, so the probe fails as a claim would (a full disk, an I/O error, a read-only file).
pub(super) fn probe(connection: &Connection) -> Result<(), StoreError> {
    connection
        .prepare_cached(
            "INSERT OR REPLACE INTO ballast_idempotency \
             (principal, route, key, state, fingerprint, owner, lease_until, expires_at) \
             VALUES ('', 'ballast health probe', 'probe', 'claimed', x'', x'', 0, 0)",
        )
        .and_then(|mut statement| statement.execute([]))
        .and_then(|_| {
            connection
                .prepare_cached(
                    "DELETE FROM ballast_idempotency \
                     WHERE principal = '' AND route = 'ballast health probe' AND key = 'probe'",
                )?
                .execute([])
        })
        .map(|_| ())
        .map_err(unavailable)
}

/// The row of `?1`..`?3`: a scope's principal, route and key (both tables' primary key).
pub(super) const PK: &str = "principal = ?1 AND route = ?2 AND key = ?3";

fn read(connection: &Connection, scope: &Scope) -> Result<Option<Stored>, StoreError> {
    let sql = format!(
        "SELECT state, fingerprint, owner, lease_until, expires_at, status, headers, body \
         FROM ballast_idempotency WHERE {PK}"
    );
    let mut statement = connection.prepare_cached(&sql).map_err(unavailable)?;
    let row = statement
        .query_row(
            params![scope.principal(), scope.route(), scope.key().as_str()],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Vec<u8>>(1)?,
                    row.get::<_, Vec<u8>>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, i64>(4)?,
                    row.get::<_, Option<i64>>(5)?,
                    row.get::<_, Option<Vec<u8>>>(6)?,
                    row.get::<_, Option<Vec<u8>>>(7)?,
                ))
            },
        )
        .optional()
        .map_err(unavailable)?;
    let Some((state, fingerprint, owner, lease_until, expires_at, status, headers, body)) = row else {
        return Ok(None);
    };
    let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of {:?}", scope.storage_key()));
    let state = match state.as_str() {
        "claimed" => RecordState::Claimed,
        "dispatched" => RecordState::Dispatched,
        "outcome_unknown" => RecordState::OutcomeUnknown,
        "completed" => RecordState::Completed(StoredResponse {
            status: status
                .and_then(|s| u16::try_from(s).ok())
                .ok_or_else(|| corrupt("status"))?,
            headers: decode_headers(&headers.unwrap_or_default())?,
            body: Bytes::from(body.unwrap_or_default()),
        }),
        _ => return Err(corrupt("state")),
    };
    Ok(Some(Stored {
        state,
        fingerprint: Fingerprint::from_bytes(fingerprint.try_into().map_err(|_| corrupt("fingerprint"))?),
        owner: OwnerToken::from_bytes(owner.try_into().map_err(|_| corrupt("owner"))?),
        lease_until,
        expires_at,
    }))
}

/// A claim of a key nobody holds.
pub(super) const CLAIM: &str = "INSERT INTO ballast_idempotency \
    (principal, route, key, state, fingerprint, owner, lease_until, expires_at) \
    VALUES (?1, ?2, ?3, 'claimed', ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING";

pub(super) fn claim(
    connection: &Connection,
    scope: &Scope,
    claim: &ClaimRequest,
    now: i64,
    retention: i64,
) -> Result<ClaimOutcome, StoreError> {
    let lease_until = now.saturating_add(crate::clock::millis(claim.lease));
    let expires_at = lease_until.saturating_add(retention);
    let (p, r, k) = (scope.principal(), scope.route(), scope.key().as_str());
    let (fingerprint, owner) = (&claim.fingerprint.as_bytes()[..], &claim.owner.as_bytes()[..]);
    // The common case, a key nobody holds, is one statement; only a key with a record is read.
    let insert = CLAIM;
    if run(
        connection,
        insert,
        params![p, r, k, fingerprint, owner, lease_until, expires_at],
    )? == 1
    {
        return Ok(ClaimOutcome::Acquired);
    }
    let existing = read(connection, scope)?;
    let outcome = match claim_step(existing.as_ref(), claim, now) {
        ClaimStep::Insert => {
            // The record expired (retention): a new claim replaces it.
            let replace = insert
                .replace("INSERT INTO", "INSERT OR REPLACE INTO")
                .replace(" ON CONFLICT DO NOTHING", "");
            run(
                connection,
                &replace,
                params![p, r, k, fingerprint, owner, lease_until, expires_at],
            )?;
            ClaimOutcome::Acquired
        }
        ClaimStep::TakeOver { old, was } => {
            let sql = format!(
                "UPDATE ballast_idempotency SET state = 'claimed', owner = ?5, lease_until = ?6, \
                 expires_at = ?7 WHERE {PK} AND owner = ?4"
            );
            let old = &old.as_bytes()[..];
            changed(run(
                connection,
                &sql,
                params![p, r, k, old, owner, lease_until, expires_at],
            ))?;
            ClaimOutcome::TookOver { was }
        }
        ClaimStep::MarkUnknown { old } => {
            let sql = format!(
                "UPDATE ballast_idempotency SET state = 'outcome_unknown', expires_at = ?5 \
                 WHERE {PK} AND owner = ?4"
            );
            let (old, until) = (&old.as_bytes()[..], now.saturating_add(retention));
            changed(run(connection, &sql, params![p, r, k, old, until]))?;
            ClaimOutcome::OutcomeUnknown
        }
        ClaimStep::Answer(outcome) => outcome,
    };
    Ok(outcome)
}

/// Runs one statement (cached), returning the number of rows it changed.
pub(super) fn run(
    connection: &Connection,
    sql: &str,
    row: &[&dyn rusqlite::ToSql],
) -> Result<usize, StoreError> {
    connection
        .prepare_cached(sql)
        .map_err(unavailable)?
        .execute(row)
        .map_err(unavailable)
}

/// The statement of [`transition`]: `set` on the row of `?1`..`?3` held by `?4`, live at `?5`, in one of `from`.
pub(super) fn transition_sql(set: &str, from: &[&RecordState]) -> String {
    format!(
        "UPDATE ballast_idempotency SET {set} WHERE {PK} AND owner = ?4 AND expires_at > ?5 AND ({})",
        one_of(from)
    )
}

/// `state` is one of `states`, as a chain of `=`: an `IN` list of constants is built into a temporary b-tree on
/// every execution (see `schema::TABLE`).
fn one_of(states: &[&RecordState]) -> String {
    states
        .iter()
        .map(|state| format!("state = '{}'", state_name(state)))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// One row changed, or the caller does not hold the record.
pub(super) fn changed(result: Result<usize, StoreError>) -> Result<(), StoreError> {
    match result? {
        0 => Err(StoreError::NotHeld),
        _ => Ok(()),
    }
}

/// A state change of the holder's record, applied only in `from` states while the record is live.
fn transition(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    now: i64,
    from: &[&RecordState],
    set: &str,
    values: &[&dyn rusqlite::ToSql],
) -> Result<(), StoreError> {
    changed(transition_rows(connection, scope, owner, now, from, set, values))
}

/// [`transition`], answering how many rows it changed (none: the record is not `owner`'s in `from`, or not
/// live) — for a deferred operation's write of its record, which its row's change does not wait on.
pub(super) fn transition_rows(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    now: i64,
    from: &[&RecordState],
    set: &str,
    values: &[&dyn rusqlite::ToSql],
) -> Result<usize, StoreError> {
    let owner = owner.holding()?;
    let sql = transition_sql(set, from);
    let (principal, route, key, owner) = (
        scope.principal(),
        scope.route(),
        scope.key().as_str(),
        &owner.as_bytes()[..],
    );
    let mut row: Vec<&dyn rusqlite::ToSql> = vec![&principal, &route, &key, &owner, &now];
    row.extend_from_slice(values);
    run(connection, &sql, &row)
}

pub(super) fn mark_dispatched(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    now: i64,
) -> Result<(), StoreError> {
    transition(
        connection,
        scope,
        owner,
        now,
        &[&RecordState::Claimed],
        "state = 'dispatched'",
        &[],
    )
}

pub(super) fn renew(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    lease: i64,
    now: i64,
    retention: i64,
) -> Result<(), StoreError> {
    let lease_until = now.saturating_add(lease);
    let expires_at = lease_until.saturating_add(retention);
    transition(
        connection,
        scope,
        owner,
        now,
        &[&RecordState::Claimed, &RecordState::Dispatched],
        "lease_until = ?6, expires_at = MAX(expires_at, ?7)",
        &[&lease_until, &expires_at],
    )
}

pub(super) fn complete(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    response: &StoredResponse,
    now: i64,
    retention: i64,
) -> Result<(), StoreError> {
    // From `outcome_unknown` too: one an expired lease left (the owner is the holder's still) gets the answer.
    let from = [
        &RecordState::Claimed,
        &RecordState::Dispatched,
        &RecordState::OutcomeUnknown,
    ];
    changed(completed_rows(
        connection, scope, owner, response, now, retention, &from,
    ))
}

/// What [`complete`] writes, from `from` states; how many rows it changed.
pub(super) fn completed_rows(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    response: &StoredResponse,
    now: i64,
    retention: i64,
    from: &[&RecordState],
) -> Result<usize, StoreError> {
    let set = "state = 'completed', status = ?6, headers = ?7, body = ?8, lease_until = ?5, expires_at = ?9";
    let (status, headers) = (i64::from(response.status), encode_headers(&response.headers));
    let (body, expires_at) = (&response.body[..], now.saturating_add(retention));
    transition_rows(
        connection,
        scope,
        owner,
        now,
        from,
        set,
        &[&status, &headers, &body, &expires_at],
    )
}

pub(super) fn mark_outcome_unknown(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    now: i64,
    retention: i64,
) -> Result<(), StoreError> {
    changed(outcome_unknown_rows(
        connection,
        scope,
        owner,
        now,
        retention,
        &[&RecordState::Dispatched],
    ))
}

/// What [`mark_outcome_unknown`] writes (the owner retired: nobody writes the record again), from `from`
/// states; how many rows it changed.
pub(super) fn outcome_unknown_rows(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    now: i64,
    retention: i64,
    from: &[&RecordState],
) -> Result<usize, StoreError> {
    let set = "state = 'outcome_unknown', lease_until = ?5, expires_at = ?6, owner = ?7";
    let (expires_at, retired) = (now.saturating_add(retention), &OwnerToken::RETIRED.as_bytes()[..]);
    transition_rows(connection, scope, owner, now, from, set, &[&expires_at, &retired])
}

pub(super) fn release(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    now: i64,
) -> Result<(), StoreError> {
    let from = [
        &RecordState::Claimed,
        &RecordState::Dispatched,
        &RecordState::OutcomeUnknown,
    ];
    changed(released_rows(connection, scope, owner, now, &from))
}

/// What [`release`] does (the record deleted), from `from` states; how many rows went.
pub(super) fn released_rows(
    connection: &Connection,
    scope: &Scope,
    owner: OwnerToken,
    now: i64,
    from: &[&RecordState],
) -> Result<usize, StoreError> {
    let owner = owner.holding()?;
    let sql = format!(
        "DELETE FROM ballast_idempotency WHERE {PK} AND owner = ?4 AND expires_at > ?5 AND ({})",
        one_of(from)
    );
    let row = params![
        scope.principal(),
        scope.route(),
        scope.key().as_str(),
        &owner.as_bytes()[..],
        now
    ];
    run(connection, &sql, row)
}

pub(super) fn lookup(connection: &Connection, scope: &Scope, now: i64) -> Result<Option<Record>, StoreError> {
    Ok(read(connection, scope)?.and_then(|stored| visible(stored, now)))
}

pub(super) fn reap(connection: &Connection, now: i64) -> Result<u64, StoreError> {
    let deleted = run(
        connection,
        "DELETE FROM ballast_idempotency WHERE expires_at <= ?1",
        params![now],
    )?;
    Ok(u64::try_from(deleted).unwrap_or(u64::MAX))
}
