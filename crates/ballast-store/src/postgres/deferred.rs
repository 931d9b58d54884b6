//! [`DeferredQueue`] on PostgreSQL: one row per operation in `ballast_deferred` (`schema`'s `deferred`
//! component), keyed like its record, every method one statement on the server's clock (`deferred_sql` has
//! them).
//!
//! Why one statement each: a statement is its own transaction, so the operation's row and its record change
//! together — a data-modifying `WITH` writes the row and then the record with the token the row keeps — with
//! no transaction held open between round trips and no lock held while a client waits on the network.
//!
//! Why two workers never hold one operation: a take locks the operation it picks (`FOR UPDATE SKIP LOCKED`)
//! before it writes it, passes over any operation another take holds locked, and re-checks under the lock that
//! the operation is still due (READ COMMITTED reads a row changed since the statement began as committed). A
//! take may pass over an operation another take only looked at and did not take; it finds it on its next call.
//! The end of operations nobody works (`expire_abandoned`) locks what it ends the same way, so it never waits on
//! a take, and a take never hands out an operation it is ending.

use std::time::Duration;

use ballast_core::IdempotencyKey;
use bytes::Bytes;
use tokio_postgres::Row;

use super::{Param, PostgresStore, deferred_sql as sql, sql::key, sql::uuid, unavailable};
use crate::clock::millis;
use crate::deferred::ABANDONED_BATCH;
use crate::{
    DeferredQueue, Finish, NewOperation, Operation, OperationState, OwnerToken, QueueDepth, RECORD_GRACE,
    Scope, StoreError, StoredResponse, Taken, decode_headers, encode_headers,
};

/// The PostgreSQL store's deferred queue (module docs): the store's pool, timeout and retention.
#[derive(Clone, Debug)]
pub(super) struct PostgresDeferred(pub(super) PostgresStore);

/// A column of an operation's row, or `Corrupt` saying which.
fn column<'a, T>(row: &'a Row, index: usize) -> Result<T, StoreError>
where
    T: tokio_postgres::types::FromSql<'a>,
{
    row.try_get(index)
        .map_err(|error| StoreError::Corrupt(format!("a column of a deferred operation: {error}")))
}

/// A count of attempts the store keeps as `bigint` and the trait as `u32`.
fn count(row: &Row, index: usize) -> Result<u32, StoreError> {
    u32::try_from(column::<i64>(row, index)?)
        .map_err(|_| StoreError::Corrupt("a deferred operation's attempts out of range".to_owned()))
}

/// Microseconds from the server's clock as a duration (negative: zero, a time already passed).
fn micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

/// An answer's columns: status, encoded headers, body (all null for none).
fn answer(last: Option<&StoredResponse>) -> (Option<i32>, Option<Vec<u8>>, Option<&[u8]>) {
    match last {
        Some(response) => (
            Some(i32::from(response.status)),
            Some(encode_headers(&response.headers)),
            Some(&response.body[..]),
        ),
        None => (None, None, None),
    }
}

/// An operation as the statements' `operation!` columns give it (times from the server's clock).
fn operation(row: &Row) -> Result<Operation, StoreError> {
    let key: &str = column(row, 2)?;
    let key = IdempotencyKey::parse(key)
        .map_err(|_| StoreError::Corrupt(format!("a deferred operation's key {key:?}")))?;
    let scope = Scope::new(column::<String>(row, 0)?, column::<String>(row, 1)?, key);
    let state: &str = column(row, 5)?;
    let state = OperationState::parse(state)
        .ok_or_else(|| StoreError::Corrupt(format!("a deferred operation's state {state:?}")))?;
    let last = match column::<Option<i32>>(row, 9)? {
        Some(status) => Some(StoredResponse {
            status: u16::try_from(status)
                .map_err(|_| StoreError::Corrupt(format!("a deferred operation's status {status}")))?,
            headers: decode_headers(column::<Option<&[u8]>>(row, 10)?.unwrap_or_default())?,
            body: Bytes::copy_from_slice(column::<Option<&[u8]>>(row, 11)?.unwrap_or_default()),
        }),
        None => None,
    };
    Ok(Operation {
        scope,
        tool: column(row, 3)?,
        priority: u8::try_from(column::<i16>(row, 4)?)
            .map_err(|_| StoreError::Corrupt("a deferred operation's priority".to_owned()))?,
        state,
        attempts: count(row, 6)?,
        max_attempts: count(row, 7)?,
        request: Bytes::copy_from_slice(column::<&[u8]>(row, 8)?),
        last,
        age: micros(column(row, 12)?),
        due_in: micros(column(row, 13)?),
        expires_in: micros(column(row, 14)?),
        took: column::<Option<i64>>(row, 15)?.map(micros),
    })
}

impl PostgresDeferred {
    /// The rows `statement` returns with `params`.
    async fn query(&self, statement: &str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
        let store = &self.0;
        store
            .bounded(async {
                let client = store.client().await?;
                let prepared = client.prepare_cached(statement).await.map_err(unavailable)?;
                client.query(&prepared, params).await.map_err(unavailable)
            })
            .await
    }

    /// The row `statement` returns with `params`, if any.
    async fn query_opt(&self, statement: &str, params: &[Param<'_>]) -> Result<Option<Row>, StoreError> {
        Ok(self.query(statement, params).await?.into_iter().next())
    }
}

#[async_trait::async_trait]
impl DeferredQueue for PostgresDeferred {
    async fn defer(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        operation: &NewOperation,
    ) -> Result<Operation, StoreError> {
        let owner = uuid(owner.holding()?);
        let [p, r, k] = key(scope);
        let priority = i16::from(operation.priority);
        let max_attempts = i64::from(operation.max_attempts);
        let request = &operation.request[..];
        let (status, headers, body) = answer(operation.last.as_ref());
        let (due, ttl) = (millis(operation.due_in), millis(operation.ttl));
        let (grace, retention) = (millis(RECORD_GRACE), self.0.retention_ms);
        // The record's token from now on: the operation's own (see `DeferredQueue::defer`).
        let fresh = uuid(OwnerToken::random());
        let params: [Param<'_>; 16] = [
            &p,
            &r,
            &k,
            &owner,
            &operation.tool,
            &priority,
            &max_attempts,
            &request,
            &status,
            &headers,
            &body,
            &due,
            &ttl,
            &grace,
            &retention,
            &fresh,
        ];
        match self.query_opt(sql::DEFER, &params).await? {
            Some(row) => self::operation(&row),
            None => Err(StoreError::NotHeld),
        }
    }

    async fn take(
        &self,
        tools: &[String],
        worker: OwnerToken,
        lease: Duration,
    ) -> Result<Option<Taken>, StoreError> {
        if tools.is_empty() {
            return Ok(None);
        }
        let (worker, lease) = (uuid(worker), millis(lease));
        let Some(row) = self.query_opt(sql::TAKE, &[&tools, &worker, &lease]).await? else {
            return Ok(None);
        };
        Ok(Some(Taken {
            operation: operation(&row)?,
            interrupted: column(&row, 16)?,
        }))
    }

    async fn renew(&self, scope: &Scope, worker: OwnerToken, lease: Duration) -> Result<(), StoreError> {
        let [p, r, k] = key(scope);
        let params: [Param<'_>; 5] = [&p, &r, &k, &uuid(worker), &millis(lease)];
        self.0.change(sql::RENEW, &params).await
    }

    async fn begin_attempt(&self, scope: &Scope, worker: OwnerToken) -> Result<(), StoreError> {
        let [p, r, k] = key(scope);
        self.0
            .change(sql::BEGIN_ATTEMPT, &[&p, &r, &k, &uuid(worker)])
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
        let [p, r, k] = key(scope);
        let (due, attempts, replace) = (millis(due_in), i64::from(attempted), last.is_some());
        let (status, headers, body) = answer(last);
        let params: [Param<'_>; 10] = [
            &p,
            &r,
            &k,
            &uuid(worker),
            &due,
            &attempts,
            &replace,
            &status,
            &headers,
            &body,
        ];
        self.0.change(sql::RESCHEDULE, &params).await
    }

    async fn finish(
        &self,
        scope: &Scope,
        worker: OwnerToken,
        end: &Finish,
        attempted: bool,
    ) -> Result<(), StoreError> {
        let [p, r, k] = key(scope);
        let (worker, state, attempts) = (uuid(worker), end.state().as_str(), i64::from(attempted));
        let (status, headers, body) = answer(end.last());
        let retention = self.0.retention_ms;
        let mut params: Vec<Param<'_>> =
            vec![&p, &r, &k, &worker, &state, &status, &headers, &body, &attempts];
        // What the record becomes; the release alone needs no retention.
        let statement = match end {
            Finish::Completed(_) | Finish::Rejected(_) => sql::FINISH_REPLAY,
            Finish::GaveUp(_) | Finish::Expired => sql::FINISH_RELEASE,
            Finish::OutcomeUnknown => sql::FINISH_UNKNOWN,
        };
        if !matches!(end, Finish::GaveUp(_) | Finish::Expired) {
            params.push(&retention);
        }
        self.0.change(statement, &params).await
    }

    async fn lookup(&self, scope: &Scope) -> Result<Option<Operation>, StoreError> {
        let [p, r, k] = key(scope);
        let row = self.query_opt(sql::LOOKUP, &[&p, &r, &k]).await?;
        row.as_ref().map(operation).transpose()
    }

    async fn depth(&self) -> Result<Vec<QueueDepth>, StoreError> {
        let rows = self.query(sql::DEPTH, &[]).await?;
        let number = |row: &Row, index| {
            u64::try_from(column::<i64>(row, index)?)
                .map_err(|_| StoreError::Corrupt("a negative count of deferred operations".to_owned()))
        };
        rows.iter()
            .map(|row| {
                Ok(QueueDepth {
                    tool: column(row, 0)?,
                    priority: u8::try_from(column::<i16>(row, 1)?)
                        .map_err(|_| StoreError::Corrupt("a deferred operation's priority".to_owned()))?,
                    queued: number(row, 2)?,
                    in_progress: number(row, 3)?,
                    oldest: micros(column(row, 4)?),
                })
            })
            .collect()
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        let store = &self.0;
        store
            .bounded(async {
                let client = store.client().await?;
                let prepared = client.prepare_cached(sql::REAP).await.map_err(unavailable)?;
                client
                    .execute(&prepared, &[&store.retention_ms])
                    .await
                    .map_err(unavailable)
            })
            .await
    }

    async fn expire_abandoned(&self, grace: Duration) -> Result<u64, StoreError> {
        let (grace, retention) = (millis(grace), self.0.retention_ms);
        let batch = i64::try_from(ABANDONED_BATCH).unwrap_or(i64::MAX);
        let row = self
            .query_opt(sql::EXPIRE_ABANDONED, &[&grace, &retention, &batch])
            .await?;
        let ended = row.as_ref().map(|row| column::<i64>(row, 0)).transpose()?;
        Ok(u64::try_from(ended.unwrap_or(0)).unwrap_or(0))
    }
}
