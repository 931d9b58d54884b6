//! [`DeferredQueue`] on Redis: each operation one Lua script on the server's clock, as the records' are, so an
//! operation and its record change together and two workers never hold one operation (Redis runs a script
//! alone).
//!
//! Layout, under `{base}defer:` (the base of the store's prefix, as the shared state's: `ballast:defer:` for the
//! default `ballast:idem:`, so the records' reap never scans these):
//! - `op:` + [`Scope::storage_key`] — one hash per operation: the scope's three parts, `tool`, `prio`, `state`,
//!   `attempts`, `max`, `request`, `deferred`, `due`, `expires` and `finished` (Unix ms on the server's clock),
//!   the last answer (`l_status`, `l_headers` in the crate's header codec, `l_body`), the record's `owner`, the
//!   holding `worker` and its lease end `wlease`, `sent` (an attempt begun), and the operation's `member` and
//!   `score` in the indexes below. An ended operation also has `keep`, the end of its retention, and the key
//!   expires then (`PEXPIREAT`), so Redis deletes ended operations itself and [`reap`](DeferredQueue::reap) finds
//!   only stragglers. Unfinished operations carry no expiry: nothing but their end may drop them (and the
//!   `volatile-*` eviction policies pass them by).
//! - `queued:` + tool — a sorted set of the tool's queued operations, scored `(255 - priority) · 2^43 + due ms`
//!   (class first, then due time, exact in a double); its member is the deferral's sequence number (16 digits)
//!   and the storage key, so equal scores go in the order they were deferred.
//! - `taken:` + tool — a sorted set of the tool's in-progress operations, scored by their worker's lease end: a
//!   take looks there for operations whose worker died.
//! - `all:` + tool — every unfinished operation of the tool, scored `(255 - priority) · 2^43 + deferral ms`, for
//!   [`depth`](DeferredQueue::depth): a class's size and its oldest in a few steps.
//! - `ends:` + tool — every unfinished operation of the tool, scored by its ttl's end (ms), for
//!   [`expire_abandoned`](DeferredQueue::expire_abandoned): those past their ttl and grace are its first
//!   members. It walks every tool in `tools`, handled or not (workers take only from the tools they handle, so
//!   nothing else ends the operations of a tool nobody handles any more).
//! - `tools` — the set of tools with unfinished operations; `seq` — the deferral counter.
//!
//! The scripts build the keys of the operation they pick (and the queues of an operation a deferral replaces)
//! from these prefixes: this store talks to one server, not Redis Cluster, as the shared state already
//! requires.
//!
//! A worker's late write is accepted while nobody took the operation over (its lease ran out and no take came),
//! as a record holder's late renewal is: the operation is still its own.

use std::time::Duration;

use redis::aio::ConnectionManager;

use super::deferred_scripts::{self, DeferredScripts};
use super::scripts::{applied, count};
use super::{MAX_SCRIPT_MS, glob_escape, reap_by_scan};
use crate::clock::millis;
use crate::deferred::ABANDONED_BATCH;
use crate::{
    DeferredQueue, Finish, NewOperation, Operation, OwnerToken, QueueDepth, RECORD_GRACE, Scope, StoreError,
    StoredResponse, Taken, encode_headers,
};

/// The Redis store's deferred queue (module docs). Shares the store's connection.
#[derive(Clone)]
pub(super) struct RedisDeferred {
    connection: ConnectionManager,
    scripts: DeferredScripts,
    /// The records' prefix (a record is this + the storage key).
    records: String,
    /// The queue's prefix, `{base}defer:`.
    queue: String,
    retention_ms: i64,
}

impl std::fmt::Debug for RedisDeferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisDeferred")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

/// Milliseconds a script may be given (see `MAX_SCRIPT_MS`).
fn ms(duration: Duration) -> i64 {
    millis(duration).min(MAX_SCRIPT_MS)
}

/// Adds an answer's status (`''` for none), headers and body to `invocation`.
fn answer_args(invocation: &mut redis::ScriptInvocation<'_>, answer: Option<&StoredResponse>) {
    match answer {
        Some(answer) => invocation
            .arg(answer.status.to_string())
            .arg(encode_headers(&answer.headers))
            .arg(&answer.body[..]),
        None => invocation.arg("").arg("").arg(""),
    };
}

impl RedisDeferred {
    pub(super) fn new(connection: ConnectionManager, records: &str, base: &str, retention_ms: i64) -> Self {
        RedisDeferred {
            connection,
            scripts: DeferredScripts::new(),
            records: records.to_owned(),
            queue: format!("{base}defer:"),
            retention_ms,
        }
    }

    /// The key of the operation of `scope` (for tests that look behind the store's back).
    #[cfg(test)]
    pub(super) fn op_key(&self, scope: &Scope) -> String {
        format!("{}op:{}", self.queue, scope.storage_key())
    }

    /// `script` invoked with the prefixes every queue script starts with (see `defer_common.lua`).
    fn invocation<'a>(&self, script: &'a redis::Script) -> redis::ScriptInvocation<'a> {
        let mut invocation = script.prepare_invoke();
        invocation.arg(&self.records).arg(&self.queue);
        invocation
    }

    /// Runs `invocation` on a handle of the shared connection.
    async fn run(&self, invocation: &redis::ScriptInvocation<'_>) -> Result<redis::Value, StoreError> {
        let mut connection = self.connection.clone();
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(deferred_scripts::driver_error)
    }

    /// A worker's write on the operation of `scope`: `script` with the storage key, the worker and `args`.
    async fn worker_write(
        &self,
        script: &redis::Script,
        scope: &Scope,
        worker: OwnerToken,
        args: impl FnOnce(&mut redis::ScriptInvocation<'_>),
    ) -> Result<(), StoreError> {
        let mut invocation = self.invocation(script);
        invocation.arg(scope.storage_key()).arg(worker.to_hex());
        args(&mut invocation);
        applied(self.run(&invocation).await?)
    }
}

#[async_trait::async_trait]
impl DeferredQueue for RedisDeferred {
    async fn defer(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        operation: &NewOperation,
    ) -> Result<Operation, StoreError> {
        let owner = owner.holding()?;
        let mut invocation = self.invocation(&self.scripts.defer);
        invocation
            .arg(scope.storage_key())
            .arg(owner.to_hex())
            .arg(ms(operation.ttl))
            .arg(ms(RECORD_GRACE))
            .arg(self.retention_ms)
            .arg(&operation.tool)
            .arg(operation.priority)
            .arg(operation.max_attempts)
            .arg(&operation.request[..])
            .arg(ms(operation.due_in))
            .arg(scope.principal())
            .arg(scope.route())
            .arg(scope.key().as_str());
        answer_args(&mut invocation, operation.last.as_ref());
        // The record's token from now on: the operation's own (see `DeferredQueue::defer`).
        invocation.arg(OwnerToken::random().to_hex());
        deferred_scripts::deferred(self.run(&invocation).await?)?.ok_or(StoreError::NotHeld)
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
        let mut invocation = self.invocation(&self.scripts.take);
        invocation.arg(worker.to_hex()).arg(ms(lease));
        for tool in tools {
            invocation.arg(tool);
        }
        let answer = deferred_scripts::answer(self.run(&invocation).await?)?;
        Ok(answer.map(|answer| Taken {
            operation: answer.operation,
            interrupted: answer.interrupted,
        }))
    }

    async fn renew(&self, scope: &Scope, worker: OwnerToken, lease: Duration) -> Result<(), StoreError> {
        self.worker_write(&self.scripts.renew, scope, worker, |invocation| {
            invocation.arg(ms(lease));
        })
        .await
    }

    async fn begin_attempt(&self, scope: &Scope, worker: OwnerToken) -> Result<(), StoreError> {
        self.worker_write(&self.scripts.begin, scope, worker, |_| {})
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
        self.worker_write(&self.scripts.reschedule, scope, worker, |invocation| {
            invocation.arg(ms(due_in)).arg(u8::from(attempted));
            answer_args(invocation, last);
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
        let record = match end {
            Finish::Completed(_) | Finish::Rejected(_) => "completed",
            Finish::GaveUp(_) | Finish::Expired => "release",
            Finish::OutcomeUnknown => "unknown",
        };
        self.worker_write(&self.scripts.finish, scope, worker, |invocation| {
            invocation
                .arg(end.state().as_str())
                .arg(u8::from(attempted))
                .arg(self.retention_ms)
                .arg(record);
            answer_args(invocation, end.last());
            invocation.arg(OwnerToken::RETIRED.to_hex());
        })
        .await
    }

    async fn lookup(&self, scope: &Scope) -> Result<Option<Operation>, StoreError> {
        let mut invocation = self.invocation(&self.scripts.lookup);
        invocation.arg(scope.storage_key());
        let answer = deferred_scripts::answer(self.run(&invocation).await?)?;
        Ok(answer
            .filter(|answer| !answer.past_retention)
            .map(|answer| answer.operation))
    }

    async fn depth(&self) -> Result<Vec<QueueDepth>, StoreError> {
        let invocation = self.invocation(&self.scripts.depth);
        deferred_scripts::depth(self.run(&invocation).await?)
    }

    async fn expire_abandoned(&self, grace: Duration) -> Result<u64, StoreError> {
        let mut invocation = self.invocation(&self.scripts.expire);
        invocation
            .arg(ms(grace))
            .arg(ABANDONED_BATCH)
            .arg(self.retention_ms)
            .arg(OwnerToken::RETIRED.to_hex());
        count(self.run(&invocation).await?)
    }

    /// Ended operations past their retention that lost their expiry, one `SCAN` step at a time (the records'
    /// reap's way); usually none, as Redis deletes ended operations itself.
    async fn reap(&self) -> Result<u64, StoreError> {
        let pattern = format!("{}op:*", glob_escape(&self.queue));
        let script = &self.scripts.reap;
        reap_by_scan(&self.connection, &pattern, script, deferred_scripts::driver_error).await
    }
}
