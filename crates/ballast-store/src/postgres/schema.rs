//! The PostgreSQL schema and its migration, run by every [`PostgresStore::open`](super::PostgresStore::open).
//!
//! Several gateway processes may start at once against one database, so the migration runs in one transaction
//! under a transaction-scoped advisory lock: the first process creates or upgrades the schema, the others wait
//! for the lock and then find it done. `CREATE TABLE IF NOT EXISTS` alone is not enough: two sessions creating
//! the same table at once can both pass the check and one fails on the catalog's unique index. The version of
//! each component's schema lives in `ballast_schema`, so a later build knows which steps are left and a build
//! older than the database refuses to write to it.
//!
//! Three components: `idempotency` (the records), `shared_state` (runs, account limits, live instances: the
//! [`SharedState`](crate::SharedState) of many instances) and `deferred` (the
//! [`DeferredQueue`](crate::DeferredQueue)'s operations). Why three and not later steps of one: a build
//! refuses a database whose version of a component it knows is newer than its own, and the shared and queue
//! tables change nothing about the records — so a build from before them still opens a database that has them,
//! and a rolling upgrade never stops the old instances that restart while it runs.

use tokio_postgres::{Client, Transaction};

use crate::StoreError;

use super::unavailable;

/// The advisory lock every migrating process takes (an arbitrary constant: "ballast" + "idem" in ASCII, kept
/// within a signed 64-bit integer).
const MIGRATION_LOCK: i64 = 0x6261_6c6c_6173_7401;

/// Each component: its name in `ballast_schema` and its migration steps, in order: step `i` takes the
/// component from version `i` to `i + 1`. Never edit a step that shipped; append one.
pub(super) const COMPONENTS: [(&str, &[&str]); 3] = [
    ("idempotency", IDEMPOTENCY),
    ("shared_state", SHARED_STATE),
    ("deferred", DEFERRED),
];

/// The records.
const IDEMPOTENCY: &[&str] = &["
CREATE TABLE ballast_idempotency (
    principal   text        NOT NULL,
    route       text        NOT NULL,
    key         text        NOT NULL,
    state       text        NOT NULL
                CHECK (state IN ('claimed', 'dispatched', 'completed', 'outcome_unknown')),
    fingerprint bytea       NOT NULL,
    owner       uuid        NOT NULL,
    lease_until timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    status      integer,
    headers     bytea,
    body        bytea,
    PRIMARY KEY (principal, route, key)
);
CREATE INDEX ballast_idempotency_expires ON ballast_idempotency (expires_at);
COMMENT ON TABLE ballast_idempotency IS
    'Ballast idempotency records (ballast-store). Times are the database server''s clock.';
"];

/// Runs, account limits and live instances (`shared`). Every row carries `expires_at` on the server's clock:
/// reads treat a row past it as absent, and `reap` deletes it. `ballast_runs.took` holds what the last take
/// decided, for the take's own `RETURNING` (which sees only the new row).
const SHARED_STATE: &[&str] = &["
CREATE TABLE ballast_runs (
    owner       text        NOT NULL,
    id          text        NOT NULL,
    deadline_at timestamptz,
    calls       bigint      NOT NULL DEFAULT 0,
    taken       bigint      NOT NULL DEFAULT 0,
    took        boolean     NOT NULL DEFAULT false,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (owner, id)
);
CREATE INDEX ballast_runs_expires ON ballast_runs (expires_at);
CREATE TABLE ballast_limits (
    key        text             PRIMARY KEY,
    tat        double precision NOT NULL,
    expires_at timestamptz      NOT NULL
);
CREATE TABLE ballast_instances (
    id         text        PRIMARY KEY,
    seen_at    timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
COMMENT ON TABLE ballast_runs IS
    'Ballast runs shared by gateway instances (ballast-store): deadline, calls, retries taken.';
COMMENT ON TABLE ballast_limits IS
    'Ballast account limits shared by gateway instances: the GCRA TAT in microseconds on the server''s clock.';
COMMENT ON TABLE ballast_instances IS 'Ballast gateway instances alive until expires_at.';
"];

/// The deferred operations (`deferred`), one per record at most (the record's primary key). `owner` is the
/// record's token, so any worker writes the record; `worker` and `lease_until` are the holding worker's, set only
/// while `in_progress`; `sent` says its attempt began. The last answer is `status`, `headers`, `body` (null
/// status: none).
///
/// The indexes are what `take` walks (`deferred_sql::TAKE`): `queued` finds, per tool, the classes present (one
/// probe each) and in a class the first due operation at once, so a take costs a few probes however deep the
/// queue and however much of it is not yet due; `held` finds the operations whose worker's lease ran out without
/// reading the live ones; `finished` is `reap`'s.
const DEFERRED: &[&str] = &["
CREATE TABLE ballast_deferred (
    principal    text        NOT NULL,
    route        text        NOT NULL,
    key          text        NOT NULL,
    tool         text        NOT NULL,
    priority     smallint    NOT NULL CHECK (priority BETWEEN 0 AND 255),
    state        text        NOT NULL CHECK (state IN
                 ('queued', 'in_progress', 'completed', 'failed', 'expired', 'outcome_unknown')),
    attempts     bigint      NOT NULL,
    max_attempts bigint      NOT NULL,
    request      bytea       NOT NULL,
    status       integer,
    headers      bytea,
    body         bytea,
    owner        uuid        NOT NULL,
    worker       uuid,
    lease_until  timestamptz,
    sent         boolean     NOT NULL,
    deferred_at  timestamptz NOT NULL,
    due_at       timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    PRIMARY KEY (principal, route, key)
);
CREATE INDEX ballast_deferred_queued ON ballast_deferred (tool, priority DESC, due_at, deferred_at)
    WHERE state = 'queued';
CREATE INDEX ballast_deferred_held ON ballast_deferred (tool, lease_until) WHERE state = 'in_progress';
CREATE INDEX ballast_deferred_finished ON ballast_deferred (finished_at) WHERE finished_at IS NOT NULL;
COMMENT ON TABLE ballast_deferred IS
    'Ballast deferred operations, each with its idempotency record. Times are the database server''s clock.';
"];

/// Creates or upgrades every component to this build's version; refuses a database where one is newer.
pub(super) async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let transaction = client.transaction().await.map_err(unavailable)?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(unavailable)?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS ballast_schema (component text PRIMARY KEY, version integer NOT NULL)",
        )
        .await
        .map_err(unavailable)?;
    for (component, steps) in COMPONENTS {
        upgrade(&transaction, component, steps).await?;
    }
    transaction.commit().await.map_err(unavailable)
}

/// Applies the steps of `component` the database does not have yet, in the migration's transaction.
async fn upgrade(transaction: &Transaction<'_>, component: &str, steps: &[&str]) -> Result<(), StoreError> {
    let latest = steps.len() as i32;
    let version: i32 = transaction
        .query_opt(
            "SELECT version FROM ballast_schema WHERE component = $1",
            &[&component],
        )
        .await
        .map_err(unavailable)?
        .map_or(0, |row| row.get(0));
    if version > latest {
        return Err(StoreError::Corrupt(format!(
            "the database has {component} schema version {version}; this build knows up to {latest} \
             (upgrade Ballast)"
        )));
    }
    let done = usize::try_from(version).unwrap_or(0);
    for step in &steps[done..] {
        transaction.batch_execute(step).await.map_err(unavailable)?;
    }
    if version < latest {
        transaction
            .execute(
                "INSERT INTO ballast_schema (component, version) VALUES ($1, $2) \
                 ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
                &[&component, &latest],
            )
            .await
            .map_err(unavailable)?;
    }
    Ok(())
}
