//! The SQLite schema, versioned by `PRAGMA user_version`, and its migrations: a file written by an older build
//! is brought up to this one's version when it is opened, its rows kept; one written by a newer build is refused.

use rusqlite::Connection;

use crate::StoreError;

/// The schema version this build writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 3;

/// The records' table as versions 2 and 3 have it. Why the state check is a chain of `=` and not
/// `state IN (...)`: SQLite evaluates a CHECK on every insert and update, and an `IN` list of constants is built
/// into a temporary b-tree each time it runs — measured, a fifth of the instructions of each of the idempotent
/// path's three writes.
pub(super) const TABLE: &str = "
CREATE TABLE IF NOT EXISTS ballast_idempotency (
    principal   TEXT    NOT NULL,
    route       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state = 'claimed' OR state = 'dispatched' OR state = 'completed'
                                        OR state = 'outcome_unknown'),
    fingerprint BLOB    NOT NULL,
    owner       BLOB    NOT NULL,
    lease_until INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    status      INTEGER,
    headers     BLOB,
    body        BLOB,
    PRIMARY KEY (principal, route, key)
) WITHOUT ROWID;
";

pub(super) const INDEX: &str =
    "CREATE INDEX IF NOT EXISTS ballast_idempotency_expires ON ballast_idempotency (expires_at);";

/// Version 1 to 2: the table rebuilt with the state check of version 2 (SQLite cannot alter a CHECK), its rows
/// copied as they are.
const FROM_V1: &str = "
ALTER TABLE ballast_idempotency RENAME TO ballast_idempotency_v1;
DROP INDEX ballast_idempotency_expires;
{TABLE}
INSERT INTO ballast_idempotency SELECT * FROM ballast_idempotency_v1;
DROP TABLE ballast_idempotency_v1;
{INDEX}
";

/// Version 3 adds the deferred operations (`crate::deferred`), one row per scope, beside the record it holds.
/// Times are the store's clock in Unix milliseconds; `owner` is the token the record carries while the operation
/// holds it, `worker` and `worker_until` the lease of the worker that holds the operation, `sent` whether that
/// worker began an attempt. A table with a rowid (unlike the records'): of operations of one class deferred in
/// the same millisecond, the rowid says which came first (a replaced row gets a new, larger one). Its indexes are
/// partial: the waiting ones (what `take` and `depth` read), and the finished ones by their end (what `reap`
/// deletes).
pub(super) const QUEUE: &str = "
CREATE TABLE IF NOT EXISTS ballast_deferred (
    principal    TEXT    NOT NULL,
    route        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    priority     INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state = 'queued' OR state = 'in_progress' OR state = 'completed'
                                         OR state = 'failed' OR state = 'expired' OR state = 'outcome_unknown'),
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    request      BLOB    NOT NULL,
    last_status  INTEGER,
    last_headers BLOB,
    last_body    BLOB,
    deferred_at  INTEGER NOT NULL,
    due_at       INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    owner        BLOB    NOT NULL,
    worker       BLOB,
    worker_until INTEGER,
    sent         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (principal, route, key)
);
CREATE INDEX IF NOT EXISTS ballast_deferred_waiting ON ballast_deferred (tool, priority DESC, due_at, deferred_at)
    WHERE state = 'queued' OR state = 'in_progress';
CREATE INDEX IF NOT EXISTS ballast_deferred_finished ON ballast_deferred (finished_at)
    WHERE finished_at IS NOT NULL;
";

/// Creates the schema on a new database, or brings an older one up to this version (in one transaction);
/// refuses one written by a newer version.
pub(super) fn migrate(connection: &Connection) -> Result<(), StoreError> {
    let version: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(StoreError::unavailable)?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Corrupt(format!(
            "the database has schema version {version}; this build knows up to {SCHEMA_VERSION} (upgrade Ballast)"
        )));
    }
    let steps = match version {
        SCHEMA_VERSION => return Ok(()),
        0 => format!("{TABLE} {INDEX} {QUEUE}"),
        1 => format!(
            "{} {QUEUE}",
            FROM_V1.replace("{TABLE}", TABLE).replace("{INDEX}", INDEX)
        ),
        2 => QUEUE.to_owned(),
        _ => return Err(StoreError::Corrupt(format!("unknown schema version {version}"))),
    };
    connection
        .execute_batch(&format!(
            "BEGIN; {steps} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        ))
        .map_err(StoreError::unavailable)
}
