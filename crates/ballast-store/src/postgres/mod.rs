//! The strict backend: PostgreSQL (`postgres://...`), shared by every gateway instance — the store for
//! payments and other side effects that must happen once across instances.
//!
//! Why it is safe with many processes:
//! - **Atomicity in single statements.** A claim is one statement: `INSERT ... ON CONFLICT DO NOTHING`, and the
//!   record that was there if the insert did nothing. Of any number of racers the unique primary key lets one
//!   insert; the others get the record and apply the shared decision ([`decide`](crate::decide)) to it. A
//!   replay is therefore one read-only round trip. The rare writes the decision asks for — replacing a record
//!   past its retention, taking over an expired lease, an expired dispatch becoming `outcome_unknown` — are
//!   compare-and-set: one `UPDATE` whose `WHERE` repeats what the decision read (the old owner token, its state,
//!   "the lease has run out"). If it changes no row, someone else moved the record first and the claim starts
//!   over. No transaction stays open between round trips, so no lock is held while a client waits on the
//!   network.
//! - **Every state change checks ownership in the same statement**: `UPDATE ... WHERE owner = $4 AND state IN
//!   (...) AND expires_at > now`, so a displaced holder's late write changes nothing ([`StoreError::NotHeld`]).
//! - **One clock: the server's.** Leases and retention are `clock_timestamp()` plus a duration, compared with
//!   `clock_timestamp()` inside the statement; gateway clocks may drift apart without moving a lease.
//! - **Durability is the server's.** A claim returns once its statement committed; with PostgreSQL's default
//!   `synchronous_commit = on` that is after the WAL reached disk (and the synchronous standbys, if any), so a
//!   claim survives a crash or a failover to a synchronous standby. Do not turn `synchronous_commit` off for this
//!   database: a crash could then forget a claim and let a retry run the side effect twice.
//! - **Schema created and migrated on start**, under an advisory lock, with a version table (see `schema`).
//! - **Shared state too**: the store is the [`SharedState`] of the gateway instances that use it (runs, account
//!   limits, live instances; `shared` says how), in tables beside the records'.
//! - **And the deferred queue**: operations that wait for a later attempt ([`DeferredQueue`]; `deferred` says
//!   how), in a table beside the records, each change of an operation and its record one statement.
//!
//! The URL is tokio-postgres's (`postgres://user:password@host:port/db?options=...`); tables go to the
//! connection's `search_path` (`?options=-c%20search_path%3Dballast` picks a schema). Connections are pooled
//! (deadpool-postgres); TLS is not compiled in (`sslmode=require` fails to connect). Every operation is bounded
//! (10 s, waiting for a connection included) and fails as [`StoreError::Unavailable`] past it.

mod deferred;
mod deferred_sql;
mod schema;
mod shared;
mod shared_sql;
mod sql;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use crate::clock::millis;
use crate::decide::{ClaimStep, claim_step, state_name, visible};
use crate::open::without_password;
use crate::{
    ClaimOutcome, ClaimRequest, DeferredQueue, IdempotencyStore, OwnerToken, Record, Scope, SharedState,
    StoreError, StoreOptions, StoredResponse, encode_headers,
};

/// Connections per store. Every state change waits for its commit's WAL flush, and commits waiting at once
/// share one flush (group commit), so more connections carry more claims per second: 32 against 16 took
/// claim + dispatch + complete at 32 callers from about 1.5k to 2.2k/s on a 2-core test machine. Three instances
/// stay within PostgreSQL's default `max_connections` (100); raise it, or put PgBouncer in front, for more.
const POOL_SIZE: usize = 32;
/// How long connecting may take when the URL sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest any operation (waiting for a connection included) may take before it fails as unavailable: a
/// hung server must fail a request closed, not hold it.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times a claim reads and retries when another request moved the record between its read and its
/// compare-and-set. Each retry means someone else made progress; this many in a row does not happen in practice.
const CLAIM_ROUNDS: usize = 8;

/// The PostgreSQL idempotency store (`postgres://...`, `postgresql://...`).
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    retention_ms: i64,
    target: Arc<str>,
    timeout: Duration,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// A statement parameter.
type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

fn unavailable(error: impl Into<crate::BoxError>) -> StoreError {
    StoreError::unavailable(error)
}

impl PostgresStore {
    /// Connects to the database `url` names and creates or migrates the schema (safe when several processes
    /// start at once). A URL tokio-postgres cannot parse is [`StoreError::UnsupportedUrl`]; a server that cannot
    /// be reached is [`StoreError::Unavailable`]; a schema newer than this build is [`StoreError::Corrupt`].
    pub async fn open(url: &str, options: StoreOptions) -> Result<Self, StoreError> {
        Self::open_bounded(url, options, OPERATION_TIMEOUT).await
    }

    /// [`open`](Self::open) with every operation bounded by `timeout`.
    async fn open_bounded(url: &str, options: StoreOptions, timeout: Duration) -> Result<Self, StoreError> {
        let target: Arc<str> = without_password(url).into();
        let mut config: tokio_postgres::Config = url.parse().map_err(|_| StoreError::UnsupportedUrl {
            url: target.to_string(),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .build()
            .map_err(unavailable)?;
        let store = PostgresStore {
            pool,
            retention_ms: millis(options.retention),
            target,
            timeout,
        };
        store
            .bounded(async {
                let mut client = store.client().await?;
                schema::migrate(&mut client).await
            })
            .await?;
        Ok(store)
    }

    async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(unavailable)
    }

    /// `work`, failing as unavailable past the store's timeout.
    async fn bounded<T>(&self, work: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        tokio::time::timeout(self.timeout, work)
            .await
            .unwrap_or_else(|_| {
                Err(unavailable(format!(
                    "PostgreSQL at {} did not answer within {:?}",
                    self.target, self.timeout
                )))
            })
    }

    /// Runs `statement` with `params`; `NotHeld` unless it changed a row.
    async fn change(&self, statement: &str, params: &[Param<'_>]) -> Result<(), StoreError> {
        self.bounded(async {
            let client = self.client().await?;
            let prepared = client.prepare_cached(statement).await.map_err(unavailable)?;
            match client.execute(&prepared, params).await.map_err(unavailable)? {
                0 => Err(StoreError::NotHeld),
                _ => Ok(()),
            }
        })
        .await
    }

    /// One claim attempt: `None` when the record moved between this attempt's read and its compare-and-set (or
    /// is not yet visible to it), so the caller tries again.
    async fn claim_once(
        &self,
        client: &Object,
        scope: &Scope,
        claim: &ClaimRequest,
    ) -> Result<Option<ClaimOutcome>, StoreError> {
        let [p, r, k] = sql::key(scope);
        let owner = sql::uuid(claim.owner);
        let (lease, retention) = (millis(claim.lease), self.retention_ms);
        let fingerprint = &claim.fingerprint.as_bytes()[..];
        let fresh: [Param<'_>; 7] = [&p, &r, &k, &fingerprint, &owner, &lease, &retention];
        let prepared = client.prepare_cached(sql::CLAIM).await.map_err(unavailable)?;
        let row = client.query_opt(&prepared, &fresh).await.map_err(unavailable)?;
        let existing = match row {
            Some(row) if row.try_get::<_, bool>(8).map_err(unavailable)? => {
                return Ok(Some(ClaimOutcome::Acquired));
            }
            Some(row) => Some(sql::stored(&row, scope)?),
            None => None,
        };
        // Declared here so the parameters can borrow them past the match.
        let (old, from): (uuid::Uuid, &str);
        let (statement, params, outcome) = match claim_step(existing.as_ref(), claim, 0) {
            ClaimStep::Answer(outcome) => return Ok(Some(outcome)),
            // Committed by a concurrent claim after this statement's snapshot: read again.
            ClaimStep::Insert if existing.is_none() => return Ok(None),
            ClaimStep::Insert => (sql::REPLACE_EXPIRED, fresh.to_vec(), ClaimOutcome::Acquired),
            ClaimStep::TakeOver { old: holder, was } => {
                (old, from) = (sql::uuid(holder), state_name(&in_flight_state(was)));
                let params: Vec<Param<'_>> = vec![&p, &r, &k, &old, &owner, &lease, &retention, &from];
                (sql::TAKE_OVER, params, ClaimOutcome::TookOver { was })
            }
            ClaimStep::MarkUnknown { old: holder } => {
                old = sql::uuid(holder);
                let params: Vec<Param<'_>> = vec![&p, &r, &k, &old, &retention];
                (sql::MARK_UNKNOWN_EXPIRED, params, ClaimOutcome::OutcomeUnknown)
            }
        };
        let prepared = client.prepare_cached(statement).await.map_err(unavailable)?;
        let changed = client.execute(&prepared, &params).await.map_err(unavailable)?;
        Ok((changed == 1).then_some(outcome))
    }
}

async fn read(client: &Object, scope: &Scope) -> Result<Option<crate::decide::Stored>, StoreError> {
    let [p, r, k] = sql::key(scope);
    let prepared = client.prepare_cached(sql::READ).await.map_err(unavailable)?;
    let row = client
        .query_opt(&prepared, &[&p, &r, &k])
        .await
        .map_err(unavailable)?;
    row.map(|row| sql::stored(&row, scope)).transpose()
}

#[async_trait::async_trait]
impl IdempotencyStore for PostgresStore {
    async fn claim(&self, scope: &Scope, claim: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
        self.bounded(async {
            let client = self.client().await?;
            for _ in 0..CLAIM_ROUNDS {
                if let Some(outcome) = self.claim_once(&client, scope, claim).await? {
                    return Ok(outcome);
                }
            }
            Err(unavailable(format!(
                "the record of {:?} changed under {CLAIM_ROUNDS} claim attempts in a row",
                scope.storage_key()
            )))
        })
        .await
    }

    async fn mark_dispatched(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        let owner = owner.holding()?;
        let [p, r, k] = sql::key(scope);
        self.change(sql::MARK_DISPATCHED, &[&p, &r, &k, &sql::uuid(owner)])
            .await
    }

    async fn renew(&self, scope: &Scope, owner: OwnerToken, lease: Duration) -> Result<(), StoreError> {
        let owner = owner.holding()?;
        let [p, r, k] = sql::key(scope);
        let params: [Param<'_>; 6] = [&p, &r, &k, &sql::uuid(owner), &millis(lease), &self.retention_ms];
        self.change(sql::RENEW, &params).await
    }

    async fn complete(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let owner = owner.holding()?;
        let [p, r, k] = sql::key(scope);
        let (status, headers) = (i32::from(response.status), encode_headers(&response.headers));
        let body = &response.body[..];
        let params: [Param<'_>; 8] = [
            &p,
            &r,
            &k,
            &sql::uuid(owner),
            &status,
            &headers,
            &body,
            &self.retention_ms,
        ];
        self.change(sql::COMPLETE, &params).await
    }

    async fn mark_outcome_unknown(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        let owner = owner.holding()?;
        let [p, r, k] = sql::key(scope);
        let params: [Param<'_>; 5] = [&p, &r, &k, &sql::uuid(owner), &self.retention_ms];
        self.change(sql::MARK_OUTCOME_UNKNOWN, &params).await
    }

    async fn release(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        let owner = owner.holding()?;
        let [p, r, k] = sql::key(scope);
        self.change(sql::RELEASE, &[&p, &r, &k, &sql::uuid(owner)]).await
    }

    async fn lookup(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
        self.bounded(async {
            let client = self.client().await?;
            Ok(read(&client, scope).await?.and_then(|stored| visible(stored, 0)))
        })
        .await
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        self.bounded(async {
            let client = self.client().await?;
            let prepared = client.prepare_cached(sql::REAP).await.map_err(unavailable)?;
            client.execute(&prepared, &[]).await.map_err(unavailable)
        })
        .await
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn shared_state(&self) -> Option<Arc<dyn SharedState>> {
        Some(Arc::new(shared::PostgresShared(self.clone())))
    }

    fn deferred(&self) -> Option<Arc<dyn DeferredQueue>> {
        Some(Arc::new(deferred::PostgresDeferred(self.clone())))
    }
}

fn in_flight_state(was: crate::InFlight) -> crate::RecordState {
    match was {
        crate::InFlight::Claimed => crate::RecordState::Claimed,
        crate::InFlight::Dispatched => crate::RecordState::Dispatched,
    }
}

#[cfg(test)]
mod tests;
