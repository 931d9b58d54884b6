//! The SQLite store's [`DeferredQueue`]: its table sits beside the records in the same file, and each method is
//! one operation of the store's write path (`batch.rs`) — one transaction on the one connection, at the store's
//! time — so an operation and its record change together, and two workers never take one operation (the
//! store's operations run one after another). The statements are `queue_sql.rs` (and `queue_expire.rs`, the end
//! of operations nobody works), the row's decoding `queue_row.rs`.

use std::sync::Arc;
use std::time::Duration;

use super::batch::Shared;
use super::{queue_expire, queue_sql};
use crate::clock::millis;
use crate::{
    DeferredQueue, Finish, NewOperation, Operation, OwnerToken, QueueDepth, Scope, StoreError,
    StoredResponse, Taken,
};

/// The queue of one [`SqliteStore`](super::SqliteStore): its connection, and the retention of its records, which
/// finished operations keep too.
pub(super) struct SqliteQueue {
    shared: Arc<Shared>,
    retention_ms: i64,
}

impl SqliteQueue {
    pub(super) fn new(shared: Arc<Shared>, retention_ms: i64) -> SqliteQueue {
        SqliteQueue { shared, retention_ms }
    }
}

impl std::fmt::Debug for SqliteQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteQueue")
            .field("retention_ms", &self.retention_ms)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl DeferredQueue for SqliteQueue {
    async fn defer(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        operation: &NewOperation,
    ) -> Result<Operation, StoreError> {
        let (scope, operation, retention) = (scope.clone(), operation.clone(), self.retention_ms);
        self.shared
            .run(move |connection, now| {
                queue_sql::defer(connection, &scope, owner, &operation, now, retention)
            })
            .await
    }

    async fn take(
        &self,
        tools: &[String],
        worker: OwnerToken,
        lease: Duration,
    ) -> Result<Option<Taken>, StoreError> {
        let (tools, lease) = (tools.to_vec(), millis(lease));
        self.shared
            .run(move |connection, now| queue_sql::take(connection, &tools, worker, lease, now))
            .await
    }

    async fn renew(&self, scope: &Scope, worker: OwnerToken, lease: Duration) -> Result<(), StoreError> {
        let (scope, lease) = (scope.clone(), millis(lease));
        self.shared
            .run(move |connection, now| queue_sql::renew(connection, &scope, worker, lease, now))
            .await
    }

    async fn begin_attempt(&self, scope: &Scope, worker: OwnerToken) -> Result<(), StoreError> {
        let scope = scope.clone();
        self.shared
            .run(move |connection, now| queue_sql::begin_attempt(connection, &scope, worker, now))
            .await
    }

    async fn reschedule(
        &self,
        scope: &Scope,
        worker: OwnerToken,
        due_in: Duration,
        attempted: bool,
        last: Option<&StoredResponse>,
    ) -> Result<(), StoreError> {
        let (scope, last) = (scope.clone(), last.cloned());
        self.shared
            .run(move |connection, now| {
                queue_sql::reschedule(connection, &scope, worker, due_in, attempted, last.as_ref(), now)
            })
            .await
    }

    async fn finish(
        &self,
        scope: &Scope,
        worker: OwnerToken,
        end: &Finish,
        attempted: bool,
    ) -> Result<(), StoreError> {
        let (scope, end, retention) = (scope.clone(), end.clone(), self.retention_ms);
        self.shared
            .run(move |connection, now| {
                queue_sql::finish(connection, &scope, worker, &end, attempted, now, retention)
            })
            .await
    }

    async fn lookup(&self, scope: &Scope) -> Result<Option<Operation>, StoreError> {
        let scope = scope.clone();
        self.shared
            .run(move |connection, now| queue_sql::lookup(connection, &scope, now))
            .await
    }

    async fn depth(&self) -> Result<Vec<QueueDepth>, StoreError> {
        self.shared.run(queue_sql::depth).await
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        let retention = self.retention_ms;
        self.shared
            .run(move |connection, now| queue_sql::reap(connection, now, retention))
            .await
    }

    async fn expire_abandoned(&self, grace: Duration) -> Result<u64, StoreError> {
        let (grace, retention) = (millis(grace), self.retention_ms);
        self.shared
            .run(move |connection, now| queue_expire::expire_abandoned(connection, now, grace, retention))
            .await
    }
}
