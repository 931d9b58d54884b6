//! The PostgreSQL schema and its migration, run by every [`PostgresStore::open`](super::PostgresStore::open).
//!
//! Several gateway processes may start at once against one database, so the migration runs in one transaction
//! under a transaction-scoped advisory lock: the first process creates or upgrades the schema, the others wait
//! for the lock and then find it done. `CREATE TABLE IF NOT EXISTS` alone is not enough: two sessions creating
//! the same table at once can both pass the check and one fails on the catalog's unique index. The version of
//! each component's schema lives in `ballast_schema`, so a later build knows which steps are left and a build
//! older than the database refuses to write to it.

use tokio_postgres::Client;

use crate::StoreError;

use super::unavailable;

/// The advisory lock every migrating process takes (an arbitrary constant: "ballast" + "idem" in ASCII, kept
/// within a signed 64-bit integer).
const MIGRATION_LOCK: i64 = 0x6261_6c6c_6173_7401;

/// The component name of this store's row in `ballast_schema`.
const COMPONENT: &str = "idempotency";

/// Each migration step, in order: step `i` takes the schema from version `i` to `i + 1`. Never edit a step that
/// shipped; append one.
const STEPS: &[&str] = &["
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

/// The schema version this build writes.
pub(super) const SCHEMA_VERSION: i32 = STEPS.len() as i32;

/// Creates or upgrades the schema to [`SCHEMA_VERSION`]; refuses a database written by a newer version.
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
    let version: i32 = transaction
        .query_opt(
            "SELECT version FROM ballast_schema WHERE component = $1",
            &[&COMPONENT],
        )
        .await
        .map_err(unavailable)?
        .map_or(0, |row| row.get(0));
    if version > SCHEMA_VERSION {
        return Err(StoreError::Corrupt(format!(
            "the database has idempotency schema version {version}; this build knows up to {SCHEMA_VERSION} \
             (upgrade Ballast)"
        )));
    }
    let done = usize::try_from(version).unwrap_or(0);
    for step in &STEPS[done..] {
        transaction.batch_execute(step).await.map_err(unavailable)?;
    }
    if version < SCHEMA_VERSION {
        transaction
            .execute(
                "INSERT INTO ballast_schema (component, version) VALUES ($1, $2) \
                 ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version",
                &[&COMPONENT, &SCHEMA_VERSION],
            )
            .await
            .map_err(unavailable)?;
    }
    transaction.commit().await.map_err(unavailable)
}
