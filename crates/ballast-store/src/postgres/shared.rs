//! [`SharedState`] on PostgreSQL: runs, account limits and live instances in three tables (`schema`'s
//! `shared_state` component), every operation on the server's clock (`clock_timestamp()`).
//!
//! Why one statement each: a run's visit and take, a give-back, a correction and a heartbeat are each one
//! `INSERT ... ON CONFLICT DO UPDATE` or `UPDATE`, which locks the row, re-reads it if a concurrent statement
//! changed it, and decides from that latest version — so any number of instances agree without a transaction
//! held between round trips (`shared_sql` has the statements).
//!
//! A reservation over several limits is one statement too, and not a transaction (lock, read, decide in Rust,
//! write, commit): a limit shared by every instance is a hot row, and each reservation holds its lock only for
//! one statement and its commit instead of four round trips, so more of them go through per second. The
//! statement locks every row it charges (`SELECT ... FOR UPDATE`, keys in byte order), decides with
//! ballast-core's `reserve_all` arithmetic in SQL (the same doubles, in the same order), and writes the new
//! TATs only if granted (`shared_sql::RESERVE` says why nothing can come between). What one statement cannot
//! do is lock a row that does not exist: for a limit seen for the first time it writes nothing and says so, and
//! the store inserts the missing rows (idle, `ON CONFLICT DO NOTHING`) and asks again.
//!
//! One limit's reservations take turns on its row, each holding the lock until its commit is flushed: a hot
//! limit takes about one reservation per commit latency (some 700 per second on the 2-core test machine, 1,800
//! with the flush off), whatever the number of callers. Redis decides in memory and takes about 45,000.
//!
//! A reservation names each limit once (a call's requests and tokens are two keys); a key named twice is
//! charged as one of its charges.
//!
//! Expired rows are read as absent (a run starts over; a limit is idle; an instance is not counted) and deleted
//! by [`reap`](crate::IdempotencyStore::reap), with the expired records.

use std::time::Duration;

use super::{Param, PostgresStore, shared_sql as sql, unavailable};
use crate::shared_wire::{
    LIMIT_KEEP, charge_parts, finite, lock_order, micros, offset_ms, reservation, ttl_ms,
};
use crate::{AllowanceRule, Charge, Reservation, RetryTake, RunKey, RunState, SharedState, StoreError};

/// How many times a reservation creates missing limit rows and asks again before it gives up. Rows go missing
/// between the two only when `reap` deletes an expired one in that instant, so a second round all but always
/// suffices.
const RESERVE_ROUNDS: usize = 4;

/// The PostgreSQL store's shared state (module docs): the store's pool and timeout.
#[derive(Clone, Debug)]
pub(super) struct PostgresShared(pub(super) PostgresStore);

fn column<T>(row: &tokio_postgres::Row, index: usize) -> Result<T, StoreError>
where
    T: for<'a> tokio_postgres::types::FromSql<'a>,
{
    row.try_get(index)
        .map_err(|error| StoreError::Corrupt(format!("a column of the shared state: {error}")))
}

/// A count the store keeps as `bigint`, never negative.
fn count(row: &tokio_postgres::Row, index: usize) -> Result<u64, StoreError> {
    u64::try_from(column::<i64>(row, index)?)
        .map_err(|_| StoreError::Corrupt("a negative count in the shared state".to_owned()))
}

impl PostgresShared {
    /// The one row `statement` returns with `params`.
    async fn query_one(
        &self,
        statement: &str,
        params: &[Param<'_>],
    ) -> Result<tokio_postgres::Row, StoreError> {
        let store = &self.0;
        store
            .bounded(async {
                let client = store.client().await?;
                let prepared = client.prepare_cached(statement).await.map_err(unavailable)?;
                client.query_one(&prepared, params).await.map_err(unavailable)
            })
            .await
    }

    /// Runs `statement` with `params`; how many rows it changed.
    async fn execute(&self, statement: &str, params: &[Param<'_>]) -> Result<u64, StoreError> {
        let store = &self.0;
        store
            .bounded(async {
                let client = store.client().await?;
                let prepared = client.prepare_cached(statement).await.map_err(unavailable)?;
                client.execute(&prepared, params).await.map_err(unavailable)
            })
            .await
    }
}

#[async_trait::async_trait]
impl SharedState for PostgresShared {
    async fn visit_run(
        &self,
        run: &RunKey,
        offer: Option<Duration>,
        ttl: Duration,
    ) -> Result<RunState, StoreError> {
        let (offer, ttl) = (offer.map(offset_ms), ttl_ms(ttl));
        let row = self
            .query_one(sql::VISIT_RUN, &[&run.owner, &run.id, &offer, &ttl])
            .await?;
        Ok(RunState {
            deadline_in_ms: column(&row, 0)?,
            calls: count(&row, 1)?,
            taken: count(&row, 2)?,
        })
    }

    async fn take_run_retry(
        &self,
        run: &RunKey,
        calls: u64,
        rule: AllowanceRule,
        ttl: Duration,
    ) -> Result<RetryTake, StoreError> {
        let share = finite(rule.share());
        let (calls, base, ttl) = (
            i64::try_from(calls.min(1 << 53)).unwrap_or(0),
            i64::from(rule.base),
            ttl_ms(ttl),
        );
        let params: [Param<'_>; 6] = [&run.owner, &run.id, &calls, &base, &share, &ttl];
        let row = self.query_one(sql::TAKE_RUN_RETRY, &params).await?;
        let (taken, calls, taken_in_all) = (column::<bool>(&row, 0)?, count(&row, 1)?, count(&row, 2)?);
        Ok(RetryTake {
            taken,
            left: rule.limit(calls).saturating_sub(taken_in_all),
        })
    }

    async fn give_back_run_retry(&self, run: &RunKey) -> Result<(), StoreError> {
        self.execute(sql::GIVE_BACK_RUN_RETRY, &[&run.owner, &run.id])
            .await
            .map(|_| ())
    }

    async fn reserve(&self, charges: &[Charge], max_wait: Duration) -> Result<Reservation, StoreError> {
        if charges.is_empty() {
            return Ok(Reservation::Granted(Duration::ZERO));
        }
        let keys: Vec<&str> = charges.iter().map(|c| c.key.as_str()).collect();
        let parts: Vec<(f64, f64, f64)> = charges.iter().map(charge_parts).collect();
        let intervals: Vec<f64> = parts.iter().map(|p| p.0).collect();
        let tolerances: Vec<f64> = parts.iter().map(|p| p.1).collect();
        let costs: Vec<f64> = parts.iter().map(|p| p.2).collect();
        let (max_wait, keep) = (micros(max_wait), micros(LIMIT_KEEP));
        let params: [Param<'_>; 6] = [&keys, &intervals, &tolerances, &costs, &max_wait, &keep];
        for _ in 0..RESERVE_ROUNDS {
            let row = self.query_one(sql::RESERVE, &params).await?;
            if column::<bool>(&row, 2)? {
                return Ok(reservation(column(&row, 1)?, column(&row, 0)?));
            }
            let missing = lock_order(charges);
            self.execute(sql::ENSURE_LIMITS, &[&missing, &keep]).await?;
        }
        Err(unavailable(format!(
            "the rows of limits {keys:?} vanished under {RESERVE_ROUNDS} reservations in a row"
        )))
    }

    async fn correct(&self, limit: &Charge, delta: f64) -> Result<(), StoreError> {
        let (interval, tolerance, _) = charge_parts(limit);
        let (delta, keep) = (finite(delta), micros(LIMIT_KEEP));
        let params: [Param<'_>; 5] = [&limit.key, &interval, &tolerance, &delta, &keep];
        self.execute(sql::CORRECT, &params).await.map(|_| ())
    }

    async fn heartbeat(&self, instance: &str, ttl: Duration) -> Result<u32, StoreError> {
        let ttl = ttl_ms(ttl);
        let row = self.query_one(sql::HEARTBEAT, &[&instance, &ttl]).await?;
        Ok(u32::try_from(count(&row, 0)?).unwrap_or(u32::MAX))
    }
}
