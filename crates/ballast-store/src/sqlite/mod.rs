//! The embedded default: SQLite, compiled in (`rusqlite`, bundled), in a file or in memory.
//!
//! Why these settings: WAL lets readers run beside the one writer, and `synchronous = NORMAL` in WAL mode makes
//! a commit durable against a crash of this process (what a gateway restart or an OOM kill is) without an fsync
//! per commit; a power loss can lose the last commits before a checkpoint. A deployment that must survive power
//! loss on one machine sets `?synchronous=full` on the URL, or uses PostgreSQL. Operations run on one connection
//! off the async runtime (`spawn_blocking`), so SQLite's blocking I/O never stalls other requests; those that
//! arrive together share a transaction, each inside a savepoint, and are answered once it commits (`batch.rs`).
//!
//! One process holds the file (`locking_mode = EXCLUSIVE`, from the store's first write until it is dropped): a
//! second one fails to open it, saying so. So at start-up the store knows that whatever the file holds in flight
//! was left by a previous run of its own, and settles it (DESIGN.md, "SQLite store"): records left `claimed`
//! are released (nothing was sent), the leases of those left `dispatched` end at once, and the next request
//! with such a key settles it without waiting out a lease — except the records of unfinished deferred
//! operations, which the operations still own: the leases of their workers end instead (`settle.rs`). Times are
//! this process's wall clock in Unix milliseconds (the store's clock: one machine owns the file).

mod batch;
mod file;
mod queue;
mod queue_expire;
mod queue_row;
mod queue_sql;
mod schema;
mod settle;
mod sql;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;

use crate::clock::{millis, unix_millis};
use crate::{
    ClaimOutcome, ClaimRequest, DeferredQueue, IdempotencyStore, OwnerToken, Record, Scope, StoreError,
    StoreOptions, StoredResponse,
};
use batch::Shared;

/// How long opening waits for another process's lock on the file (a previous holder still closing) before it
/// fails as held elsewhere. Once open, the store holds the lock and nobody else contends for it.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// The SQLite idempotency store (`sqlite://PATH`, `sqlite::memory:`).
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
    retention_ms: i64,
    location: Arc<str>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// Where a `sqlite:` URL points.
#[derive(Debug, PartialEq, Eq)]
enum Location {
    Memory,
    File { path: PathBuf, synchronous_full: bool },
}

fn parse_url(url: &str) -> Result<Location, StoreError> {
    if url == "sqlite::memory:" {
        return Ok(Location::Memory);
    }
    let unsupported = || StoreError::UnsupportedUrl { url: url.to_owned() };
    let rest = url.strip_prefix("sqlite://").ok_or_else(unsupported)?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let synchronous_full = match query {
        "" | "synchronous=normal" => false,
        "synchronous=full" => true,
        _ => return Err(unsupported()),
    };
    if path.is_empty() {
        return Err(unsupported());
    }
    Ok(Location::File {
        path: PathBuf::from(path),
        synchronous_full,
    })
}

impl SqliteStore {
    /// Opens (creating if needed) the database `url` names and migrates its schema. `sqlite://ballast.db` is
    /// relative to the working directory, `sqlite:///var/lib/ballast.db` absolute; `?synchronous=full` fsyncs
    /// every commit. The file's directory must exist.
    pub async fn open(url: &str, options: StoreOptions) -> Result<Self, StoreError> {
        let location = parse_url(url)?;
        let (connection, file) = tokio::task::spawn_blocking(move || {
            let connection = connect(&location)?;
            let file = match &location {
                Location::File { path, .. } => Some(file::Identity::of(path)?),
                Location::Memory => None,
            };
            Ok::<_, StoreError>((connection, file))
        })
        .await
        .map_err(StoreError::unavailable)??;
        Ok(SqliteStore {
            shared: Shared::new(connection, file),
            retention_ms: millis(options.retention),
            location: url.into(),
        })
    }

    /// Runs `work` on the connection, off the async runtime, inside a transaction; its result once that
    /// transaction is committed.
    async fn with<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection, i64) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.shared.run(work).await
    }
}

fn connect(location: &Location) -> Result<Connection, StoreError> {
    let connection = match location {
        Location::Memory => Connection::open_in_memory(),
        Location::File { path, .. } => Connection::open(path),
    }
    .map_err(StoreError::unavailable)?;
    connection
        .busy_timeout(BUSY_TIMEOUT)
        .map_err(StoreError::unavailable)?;
    if let Location::File {
        path,
        synchronous_full,
    } = location
    {
        let synchronous = if *synchronous_full { "FULL" } else { "NORMAL" };
        // One process holds the file: the lock is taken by the first write below and kept until the store is
        // dropped. (WAL needs no shared memory then.)
        connection
            .execute_batch(&format!(
                "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous};"
            ))
            .map_err(|error| held_elsewhere(path, error))?;
    }
    schema::migrate(&connection).map_err(|error| match (location, error) {
        (Location::File { path, .. }, StoreError::Unavailable(error)) => held_elsewhere(path, error),
        (_, error) => error,
    })?;
    let settled =
        settle::settle_previous_run(&connection, unix_millis()).map_err(|error| match (location, error) {
            (Location::File { path, .. }, StoreError::Unavailable(error)) => held_elsewhere(path, error),
            (_, error) => error,
        })?;
    if settled != settle::Settled::default() {
        tracing::info!(
            released = settled.released,
            dispatched = settled.dispatched,
            deferred_taken_back = settled.taken_back,
            "settled what the previous holder of the SQLite store left in flight"
        );
    }
    Ok(connection)
}

/// The error of a file another process holds (or cannot be opened), saying which.
fn held_elsewhere(path: &std::path::Path, error: impl std::fmt::Display) -> StoreError {
    StoreError::unavailable(format!(
        "cannot take the SQLite store {}: {error} (one process holds a SQLite store: is another gateway running \
         on it? use PostgreSQL or Redis for several)",
        path.display()
    ))
}

#[async_trait::async_trait]
impl IdempotencyStore for SqliteStore {
    async fn claim(&self, scope: &Scope, claim: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
        let (scope, claim, retention) = (scope.clone(), claim.clone(), self.retention_ms);
        self.with(move |connection, now| sql::claim(connection, &scope, &claim, now, retention))
            .await
    }

    async fn mark_dispatched(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        let scope = scope.clone();
        self.with(move |connection, now| sql::mark_dispatched(connection, &scope, owner, now))
            .await
    }

    async fn renew(&self, scope: &Scope, owner: OwnerToken, lease: Duration) -> Result<(), StoreError> {
        let (scope, lease, retention) = (scope.clone(), millis(lease), self.retention_ms);
        self.with(move |connection, now| sql::renew(connection, &scope, owner, lease, now, retention))
            .await
    }

    async fn complete(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let (scope, response, retention) = (scope.clone(), response.clone(), self.retention_ms);
        self.with(move |connection, now| sql::complete(connection, &scope, owner, &response, now, retention))
            .await
    }

    async fn mark_outcome_unknown(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        let (scope, retention) = (scope.clone(), self.retention_ms);
        self.with(move |connection, now| sql::mark_outcome_unknown(connection, &scope, owner, now, retention))
            .await
    }

    async fn release(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        let scope = scope.clone();
        self.with(move |connection, now| sql::release(connection, &scope, owner, now))
            .await
    }

    async fn lookup(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
        let scope = scope.clone();
        self.with(move |connection, now| sql::lookup(connection, &scope, now))
            .await
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        self.with(sql::reap).await
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn deferred(&self) -> Option<Arc<dyn DeferredQueue>> {
        Some(Arc::new(queue::SqliteQueue::new(
            Arc::clone(&self.shared),
            self.retention_ms,
        )))
    }

    async fn check(&self) -> Result<(), StoreError> {
        // Through the queue like any operation: the file's identity is checked before its transaction.
        self.with(|connection, _| sql::probe(connection)).await
    }
}

#[cfg(test)]
mod tests;
