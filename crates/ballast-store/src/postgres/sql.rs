//! The PostgreSQL statements. Every statement reads the server's clock itself (`clock_timestamp()`, once per
//! statement through the one-row `c`), and every state change names the owner token and the states it applies
//! to in its `WHERE`, so a displaced owner's write changes no row and reports `NotHeld`.

use ballast_core::Fingerprint;
use bytes::Bytes;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::decide::Stored;
use crate::{OwnerToken, RecordState, Scope, StoreError, StoredResponse, decode_headers};

/// The server's clock, read once for the statement.
macro_rules! now {
    () => {
        "(SELECT clock_timestamp() AS now) c"
    };
}

/// The primary key: `$1` principal, `$2` route, `$3` key.
macro_rules! pk {
    () => {
        "principal = $1 AND route = $2 AND key = $3"
    };
}

/// The record with its times relative to the server's clock: milliseconds left, rounded up, so that a time
/// still ahead by any fraction of a millisecond reads as positive — the same verdict the statements' own
/// `> now` comparisons give.
pub(super) const READ: &str = concat!(
    "SELECT state, fingerprint, owner, ",
    "ceil(extract(epoch FROM lease_until - c.now) * 1000)::bigint, ",
    "ceil(extract(epoch FROM expires_at - c.now) * 1000)::bigint, ",
    "status, headers, body FROM ballast_idempotency, ",
    now!(),
    " WHERE ",
    pk!()
);

/// The claim's first and usually only round trip: a new `claimed` record if no record holds the key, else the
/// record as [`READ`] returns it. `ON CONFLICT DO NOTHING` writes nothing when a record exists, so a replay is a
/// read (no row lock, no transaction id, no WAL flush). The read sees the statement's snapshot: a record that a
/// concurrent claim committed while this one waited on it is not in it (no row comes back; the claim reads
/// again). `$4` fingerprint, `$5` owner, `$6` lease ms, `$7` retention ms; the last column says "inserted".
pub(super) const CLAIM: &str = concat!(
    "WITH c AS (SELECT clock_timestamp() AS now), inserted AS (",
    "INSERT INTO ballast_idempotency ",
    "(principal, route, key, state, fingerprint, owner, lease_until, expires_at) ",
    "SELECT $1, $2, $3, 'claimed', $4, $5, c.now + $6::bigint * interval '1 millisecond', ",
    "c.now + ($6::bigint + $7::bigint) * interval '1 millisecond' FROM c ",
    "ON CONFLICT (principal, route, key) DO NOTHING RETURNING 1) ",
    "SELECT NULL::text, NULL::bytea, NULL::uuid, NULL::bigint, NULL::bigint, NULL::integer, NULL::bytea, ",
    "NULL::bytea, true FROM inserted UNION ALL ",
    "SELECT state, fingerprint, owner, ",
    "ceil(extract(epoch FROM lease_until - c.now) * 1000)::bigint, ",
    "ceil(extract(epoch FROM expires_at - c.now) * 1000)::bigint, ",
    "status, headers, body, false FROM ballast_idempotency, c WHERE ",
    pk!(),
    " AND NOT EXISTS (SELECT FROM inserted)"
);

/// A new `claimed` record in place of one past its retention (which counts as absent). Of racers that all saw
/// it expired, the first changes it and the others, re-checking the `WHERE` on the changed row, change nothing.
/// Parameters as [`CLAIM`]'s.
pub(super) const REPLACE_EXPIRED: &str = concat!(
    "UPDATE ballast_idempotency SET state = 'claimed', fingerprint = $4, owner = $5, ",
    "lease_until = c.now + $6::bigint * interval '1 millisecond', ",
    "expires_at = c.now + ($6::bigint + $7::bigint) * interval '1 millisecond', ",
    "status = NULL, headers = NULL, body = NULL FROM ",
    now!(),
    " WHERE ",
    pk!(),
    " AND expires_at <= c.now"
);

/// Takes over a live record whose lease ran out, if it still carries the old owner `$4` in state `$8`.
/// `$5` new owner, `$6` lease ms, `$7` retention ms.
pub(super) const TAKE_OVER: &str = concat!(
    "UPDATE ballast_idempotency SET state = 'claimed', owner = $5, ",
    "lease_until = c.now + $6::bigint * interval '1 millisecond', ",
    "expires_at = c.now + ($6::bigint + $7::bigint) * interval '1 millisecond' FROM ",
    now!(),
    " WHERE ",
    pk!(),
    " AND owner = $4 AND state = $8 AND lease_until <= c.now AND expires_at > c.now"
);

/// An expired dispatch becomes `outcome_unknown`, if it still carries the old owner `$4`. `$5` retention ms.
pub(super) const MARK_UNKNOWN_EXPIRED: &str = concat!(
    "UPDATE ballast_idempotency SET state = 'outcome_unknown', lease_until = c.now, ",
    "expires_at = c.now + $5::bigint * interval '1 millisecond' FROM ",
    now!(),
    " WHERE ",
    pk!(),
    " AND owner = $4 AND state = 'dispatched' AND lease_until <= c.now AND expires_at > c.now"
);

/// The holder's own changes: `$4` owner, the record live and in the named states.
macro_rules! held {
    ($states:literal) => {
        concat!(
            " FROM ",
            now!(),
            " WHERE ",
            pk!(),
            " AND owner = $4 AND expires_at > c.now AND state IN (",
            $states,
            ")"
        )
    };
}

/// `claimed` -> `dispatched`.
pub(super) const MARK_DISPATCHED: &str = concat!(
    "UPDATE ballast_idempotency SET state = 'dispatched'",
    held!("'claimed'")
);

/// `claimed` | `dispatched`: the lease runs `$5` ms from now, and the retention `$6` ms never ends before it.
pub(super) const RENEW: &str = concat!(
    "UPDATE ballast_idempotency SET lease_until = c.now + $5::bigint * interval '1 millisecond', ",
    "expires_at = GREATEST(expires_at, c.now + ($5::bigint + $6::bigint) * interval '1 millisecond')",
    held!("'claimed', 'dispatched'")
);

/// `claimed` | `dispatched` | an expiry-made `outcome_unknown` (it still carries the holder's token) ->
/// `completed`. `$5` status, `$6` headers, `$7` body, `$8` retention ms.
pub(super) const COMPLETE: &str = concat!(
    "UPDATE ballast_idempotency SET state = 'completed', status = $5, headers = $6, body = $7, ",
    "lease_until = c.now, expires_at = c.now + $8::bigint * interval '1 millisecond'",
    held!("'claimed', 'dispatched', 'outcome_unknown'")
);

/// `dispatched` -> `outcome_unknown`, the holder's token retired (the nil UUID, which no random token is): its
/// own verdict is final for it too. `$5` retention ms.
pub(super) const MARK_OUTCOME_UNKNOWN: &str = concat!(
    "UPDATE ballast_idempotency SET state = 'outcome_unknown', owner = '00000000-0000-0000-0000-000000000000', ",
    "lease_until = c.now, expires_at = c.now + $5::bigint * interval '1 millisecond'",
    held!("'dispatched'")
);

/// `claimed` | `dispatched` | an expiry-made `outcome_unknown` -> deleted.
pub(super) const RELEASE: &str = concat!(
    "DELETE FROM ballast_idempotency USING ",
    now!(),
    " WHERE ",
    pk!(),
    " AND owner = $4 AND expires_at > c.now AND state IN ('claimed', 'dispatched', 'outcome_unknown')"
);

/// Every record past its retention, and every shared row (runs, limits, instances) past its `expires_at`, in one
/// statement; counts the records. `now()` (the statement's start on the server's clock) rather than
/// `clock_timestamp()`: a stable value lets the planner use the `expires_at` indexes.
pub(super) const REAP: &str = "WITH runs AS (DELETE FROM ballast_runs WHERE expires_at <= now()), \
     limits AS (DELETE FROM ballast_limits WHERE expires_at <= now()), \
     instances AS (DELETE FROM ballast_instances WHERE expires_at <= now()) \
     DELETE FROM ballast_idempotency WHERE expires_at <= now()";

/// The primary key's parameters.
pub(super) fn key(scope: &Scope) -> [&str; 3] {
    [scope.principal(), scope.route(), scope.key().as_str()]
}

/// The owner token as the `uuid` column holds it.
pub(super) fn uuid(owner: OwnerToken) -> Uuid {
    Uuid::from_bytes(*owner.as_bytes())
}

/// A row of [`READ`] (or [`CLAIM`]) as the shared claim decision sees it, with the server's clock at 0.
pub(super) fn stored(row: &Row, scope: &Scope) -> Result<Stored, StoreError> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("{what} of {:?}", scope.storage_key()));
    let column = |error: tokio_postgres::Error| {
        StoreError::Corrupt(format!("a column of {:?}: {error}", scope.storage_key()))
    };
    let state: &str = row.try_get(0).map_err(column)?;
    let fingerprint: &[u8] = row.try_get(1).map_err(column)?;
    let owner: Uuid = row.try_get(2).map_err(column)?;
    let state = match state {
        "claimed" => RecordState::Claimed,
        "dispatched" => RecordState::Dispatched,
        "outcome_unknown" => RecordState::OutcomeUnknown,
        "completed" => RecordState::Completed(StoredResponse {
            status: row
                .try_get::<_, Option<i32>>(5)
                .map_err(column)?
                .and_then(|s| u16::try_from(s).ok())
                .ok_or_else(|| corrupt("status"))?,
            headers: decode_headers(
                row.try_get::<_, Option<&[u8]>>(6)
                    .map_err(column)?
                    .unwrap_or_default(),
            )?,
            body: Bytes::copy_from_slice(
                row.try_get::<_, Option<&[u8]>>(7)
                    .map_err(column)?
                    .unwrap_or_default(),
            ),
        }),
        _ => return Err(corrupt("state")),
    };
    Ok(Stored {
        state,
        fingerprint: Fingerprint::from_bytes(fingerprint.try_into().map_err(|_| corrupt("fingerprint"))?),
        owner: OwnerToken::from_bytes(owner.into_bytes()),
        lease_until: row.try_get(3).map_err(column)?,
        expires_at: row.try_get(4).map_err(column)?,
    })
}
