//! Redis: the fast store, for deployments that already run Redis (`redis://HOST[:PORT][/DB]`).
//!
//! Why scripts: every operation is one Lua script (`EVALSHA`, loaded on first use), and Redis runs a script
//! alone, so a claim's read-decide-write and every compare-and-set transition (owner token + allowed states +
//! liveness, then the write) are atomic without locks or `WATCH` retries. The claim script makes the decision of
//! `decide.rs` (the SQL backends' `claim_step`) line by line; a test checks it gives the same answers.
//!
//! Why the server's clock: each script reads `TIME` on the Redis server, so leases and retention are counted on
//! one clock, whatever the skew between gateways. (Redis 5 or later: a script that reads `TIME` and then writes
//! must replicate its effects, the default since 5.)
//!
//! Layout: one hash per record, keyed `ballast:idem:` + [`Scope::storage_key`] (principal, route and key kept
//! apart by their lengths), fields `state`, `fp` (fingerprint bytes), `owner` (hex), `lease` and `exp` (Unix ms
//! on the server's clock), and for `completed` `status`, `headers` (the crate's header codec) and `body`.
//!
//! Retention: every write that sets a record's retention end also sets the key's expiry to it (`PEXPIREAT`, in
//! the same script), so Redis deletes finished records itself and [`reap`](IdempotencyStore::reap) has nothing
//! to do in normal operation. `reap` scans the prefix (`SCAN`, in batches) for stragglers — records past their
//! retention that lost their expiry (an operator's `PERSIST`, a restore without TTLs) — deletes them and returns
//! how many. That is usually 0: a record Redis expired itself is not counted, since `reap` did not delete it
//! ([`expires_records_itself`](IdempotencyStore::expires_records_itself) is `true`, so a caller can reap
//! rarely). Reads check the retention themselves, so a record between its retention end and Redis's deletion
//! counts as absent. The scan walks every key under the prefix: cheap in batches, but not free on a large
//! database.
//!
//! Durability — read before using Redis for payments: Redis acknowledges a write before it reaches a replica
//! (replication is asynchronous), so a **failover can lose a claim** that was already answered: the promoted
//! replica has no record, and a retry with the same key runs the request a second time. Without AOF
//! (`appendonly yes`, `appendfsync everysec` loses up to a second) a restart loses every record since the last
//! snapshot. An eviction policy other than `noeviction` lets Redis drop records under memory pressure — every
//! record carries an expiry, so `volatile-*` policies evict them too; [`RedisStore::open`] logs a warning when it
//! can read such a policy. Side effects that must never run twice across instances belong in PostgreSQL.
//!
//! Shared state: the store is also the [`SharedState`] of the gateway instances that use it (runs, account
//! limits, live instances), in keys beside the records' (`shared`, which documents their layout).
//!
//! Deferred operations: the store is also the [`DeferredQueue`] of its records, in keys beside them
//! (`deferred`, which documents their layout); each of its scripts changes an operation and its record together.
//!
//! TLS (`rediss://`) needs the `redis` crate's TLS support, which this build does not compile in; such URLs are
//! refused as [`StoreError::UnsupportedUrl`].

mod deferred;
mod deferred_scripts;
mod scripts;
mod shared;
mod shared_scripts;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::clock::millis;
use crate::open::without_password;
use crate::{
    ClaimOutcome, ClaimRequest, DeferredQueue, ExpiredDispatch, IdempotencyStore, OwnerToken, Record, Scope,
    SharedState, StoreError, StoreOptions, StoredResponse, encode_headers,
};
use deferred::RedisDeferred;
use scripts::Scripts;
use shared::{RedisShared, shared_base};

/// How long one connection attempt may take before the store counts as unreachable.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one script may take to answer before the store counts as unavailable (a request's claim must fail
/// closed rather than wait without end; the scripts themselves take microseconds).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Reconnection attempts per failed connection, with exponential backoff from 100 ms.
const CONNECTION_RETRIES: usize = 3;
/// Keys per `SCAN` step (and per reap script) while reaping.
const REAP_BATCH: usize = 500;

/// The keys matching `pattern`, one `SCAN` step of [`REAP_BATCH`] at a time, each batch handed to `script` (which
/// deletes those past their retention and returns how many): the records' reap and the deferred queue's.
async fn reap_by_scan(
    connection: &ConnectionManager,
    pattern: &str,
    script: &redis::Script,
    driver_error: fn(redis::RedisError) -> StoreError,
) -> Result<u64, StoreError> {
    let mut connection = connection.clone();
    let (mut cursor, mut deleted) = (0_u64, 0_u64);
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(REAP_BATCH)
            .query_async(&mut connection)
            .await
            .map_err(driver_error)?;
        if !keys.is_empty() {
            let mut invocation = script.prepare_invoke();
            for key in &keys {
                invocation.key(key.as_slice());
            }
            let reaped = invocation
                .invoke_async(&mut connection)
                .await
                .map_err(driver_error)?;
            deleted += scripts::count(reaped)?;
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}
/// The largest lease or retention passed to a script, in ms (about 31,000 years): Redis's Lua counts in
/// doubles, exact for integers below 2^53, and the sum of the clock, a lease and a retention stays below.
const MAX_SCRIPT_MS: i64 = 1_000_000_000_000_000;

/// The Redis idempotency store (`redis://`). Cloning shares the connection.
#[derive(Clone)]
pub struct RedisStore {
    connection: ConnectionManager,
    scripts: Scripts,
    prefix: String,
    retention_ms: i64,
    url: String,
    shared: Arc<RedisShared>,
    deferred: Arc<RedisDeferred>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// The key prefix of the records (so other data in the same database is never touched).
    pub const DEFAULT_PREFIX: &'static str = "ballast:idem:";

    /// Connects to the Redis server `url` names (`redis://[user:password@]host[:port][/db]`), keeping records
    /// under [`DEFAULT_PREFIX`](RedisStore::DEFAULT_PREFIX). Fails with [`StoreError::Unavailable`] when the server cannot be reached.
    pub async fn open(url: &str, options: StoreOptions) -> Result<Self, StoreError> {
        Self::open_with_prefix(url, Self::DEFAULT_PREFIX, options).await
    }

    /// [`open`](RedisStore::open) with records under `prefix`, for deployments that share one database and must
    /// keep their records (and their reaps) apart.
    pub async fn open_with_prefix(
        url: &str,
        prefix: &str,
        options: StoreOptions,
    ) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(|_| StoreError::UnsupportedUrl {
            url: without_password(url),
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECTION_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(CONNECTION_RETRIES);
        let mut connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(StoreError::unavailable)?;
        warn_about_eviction(&mut connection).await;
        let retention_ms = millis(options.retention).min(MAX_SCRIPT_MS);
        Ok(RedisStore {
            shared: Arc::new(RedisShared::new(connection.clone(), prefix)),
            deferred: Arc::new(RedisDeferred::new(
                connection.clone(),
                prefix,
                shared_base(prefix),
                retention_ms,
            )),
            connection,
            scripts: Scripts::new(),
            prefix: prefix.to_owned(),
            retention_ms,
            url: without_password(url),
        })
    }

    fn key(&self, scope: &Scope) -> String {
        format!("{}{}", self.prefix, scope.storage_key())
    }

    /// Runs `invocation` on a handle of the shared connection (multiplexed: clones pipeline on one socket).
    async fn run(&self, invocation: &redis::ScriptInvocation<'_>) -> Result<redis::Value, StoreError> {
        let mut connection = self.connection.clone();
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(scripts::driver_error)
    }

    /// A holder's compare-and-set transition (see `transition.lua`): `Ok` when applied, `NotHeld` otherwise.
    async fn transition(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        from: &str,
        to: &str,
        finishes: bool,
        fields: &[(&str, &[u8])],
    ) -> Result<(), StoreError> {
        let owner = owner.holding()?;
        let retention = if finishes {
            self.retention_ms.to_string()
        } else {
            String::new()
        };
        let mut invocation = self.scripts.transition.prepare_invoke();
        invocation
            .key(self.key(scope))
            .arg(owner.to_hex())
            .arg(from)
            .arg(to)
            .arg(retention);
        for (name, value) in fields {
            invocation.arg(*name).arg(*value);
        }
        scripts::applied(self.run(&invocation).await?)
    }

    /// Keys under the prefix, one `SCAN` step at a time, each batch handed to the reap script.
    async fn reap_stragglers(&self) -> Result<u64, StoreError> {
        let pattern = format!("{}*", glob_escape(&self.prefix));
        reap_by_scan(
            &self.connection,
            &pattern,
            &self.scripts.reap,
            scripts::driver_error,
        )
        .await
    }
}

/// `text` with the `SCAN MATCH` glob characters escaped, so a prefix matches only itself.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether Redis may drop keys with an expiry under memory pressure with this `maxmemory-policy`: every
/// policy but `noeviction` may (`allkeys-*` evict any key, `volatile-*` keys with an expiry, as every record has).
fn policy_may_evict_records(policy: &str) -> bool {
    policy != "noeviction"
}

/// Logs a warning when the server's eviction policy can drop records (a dropped claim runs twice). Servers that
/// refuse `CONFIG GET` (managed services rename it) are not checked.
async fn warn_about_eviction(connection: &mut ConnectionManager) {
    let policy: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(connection)
        .await;
    if let Ok([_, policy]) = policy.as_deref()
        && policy_may_evict_records(policy)
    {
        tracing::warn!(
            maxmemory_policy = %policy,
            "Redis may evict idempotency records under memory pressure, and an evicted claim runs again: \
             set maxmemory-policy to noeviction"
        );
    }
}

#[async_trait::async_trait]
impl IdempotencyStore for RedisStore {
    async fn claim(&self, scope: &Scope, claim: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
        let expired_dispatch = match claim.expired_dispatch {
            ExpiredDispatch::OutcomeUnknown => "unknown",
            ExpiredDispatch::TakeOver => "takeover",
        };
        let mut invocation = self.scripts.claim.prepare_invoke();
        invocation
            .key(self.key(scope))
            .arg(&claim.fingerprint.as_bytes()[..])
            .arg(claim.owner.to_hex())
            .arg(millis(claim.lease).min(MAX_SCRIPT_MS))
            .arg(self.retention_ms)
            .arg(expired_dispatch);
        scripts::claim_outcome(self.run(&invocation).await?)
    }

    async fn mark_dispatched(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        self.transition(scope, owner, "claimed", "dispatched", false, &[])
            .await
    }

    async fn renew(&self, scope: &Scope, owner: OwnerToken, lease: Duration) -> Result<(), StoreError> {
        let owner = owner.holding()?;
        let mut invocation = self.scripts.renew.prepare_invoke();
        invocation
            .key(self.key(scope))
            .arg(owner.to_hex())
            .arg(millis(lease).min(MAX_SCRIPT_MS))
            .arg(self.retention_ms);
        scripts::applied(self.run(&invocation).await?)
    }

    async fn complete(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        let status = response.status.to_string();
        let headers = encode_headers(&response.headers);
        let fields: [(&str, &[u8]); 3] = [
            ("status", status.as_bytes()),
            ("headers", &headers),
            ("body", &response.body),
        ];
        // From an `outcome_unknown` a claim made of this holder's expired lease too (it carries the holder's token).
        let from = "claimed,dispatched,outcome_unknown";
        self.transition(scope, owner, from, "completed", true, &fields)
            .await
    }

    async fn mark_outcome_unknown(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        let retired = OwnerToken::RETIRED.to_hex();
        let fields: [(&str, &[u8]); 1] = [("owner", retired.as_bytes())];
        self.transition(scope, owner, "dispatched", "outcome_unknown", true, &fields)
            .await
    }

    async fn release(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        self.transition(scope, owner, "claimed,dispatched,outcome_unknown", "", false, &[])
            .await
    }

    async fn lookup(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
        let mut invocation = self.scripts.lookup.prepare_invoke();
        invocation.key(self.key(scope));
        scripts::record(self.run(&invocation).await?, &scope.storage_key())
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        self.reap_stragglers().await
    }

    fn backend(&self) -> &'static str {
        "redis"
    }

    fn expires_records_itself(&self) -> bool {
        true
    }

    fn shared_state(&self) -> Option<Arc<dyn SharedState>> {
        Some(Arc::clone(&self.shared) as Arc<dyn SharedState>)
    }

    fn deferred(&self) -> Option<Arc<dyn DeferredQueue>> {
        Some(Arc::clone(&self.deferred) as Arc<dyn DeferredQueue>)
    }
}

#[cfg(test)]
mod tests;
