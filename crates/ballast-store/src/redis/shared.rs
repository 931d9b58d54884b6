//! [`SharedState`] on Redis: runs, account limits and live instances, each operation one Lua script on the
//! server's clock, as the records' are (`EVALSHA`; Redis runs a script alone, so every read-decide-write is
//! atomic across instances without locks or `WATCH` retries).
//!
//! Layout, under the base of the store's prefix (the prefix without a trailing `idem:`: `ballast:` for the
//! default `ballast:idem:`, so none of these is under the records' prefix and their reap never scans them; a
//! prefix without `idem:` is the base itself, and the records' reap passes these keys by, as no record starts
//! like them):
//! - `{base}run:` + [`RunKey::storage_key`] — one hash per run: `dl` (its deadline, Unix ms on the server's
//!   clock; absent until a call offers one), `calls`, `taken`. Every visit and take sets its expiry to the ttl
//!   it is given (`PEXPIRE`), so an idle run vanishes by itself and the next visit finds a fresh one.
//! - `{base}limit:` + [`Charge::key`] — one string per account limit: its GCRA TAT in µs on the server's clock
//!   (`%.17g`, exact for a double; absent = 0). Each write sets the key to expire
//!   [`LIMIT_KEEP`] past the TAT plus the tolerance (`PEXPIREAT`): an idle
//!   limit decides as an absent one, so it may go.
//! - `{base}instances` — one sorted set: each live instance scored with the Unix ms its liveness ends. A
//!   heartbeat adds or moves its member, removes the ended ones and moves the set's own expiry to its last
//!   member's end.
//!
//! Numbers: Lua counts in doubles, exact for integers below 2^53 (µs since 1970 are about 2^50), and Redis
//! turns a Lua number in a reply into an integer by truncating it, so a wait in µs comes back as text.
//!
//! A reservation names each limit once (a call's requests and tokens are two keys); a key named twice is
//! charged as the last of its charges.
//!
//! A reservation's script touches every limit it charges at once: on Redis Cluster those keys would have to
//! share a hash slot. This store talks to one server (or a primary with replicas), where any keys go together.
//!
//! Nothing here needs `reap`: every key carries an expiry. A key whose expiry an operator removed stays until
//! deleted by hand; the records' reap does not look for such keys.

use std::time::Duration;

use redis::aio::ConnectionManager;

use super::shared_scripts::{self, SharedScripts};
use crate::shared_wire::{LIMIT_KEEP, charge_parts, finite, micros, offset_ms, reservation, ttl_ms};
use crate::{AllowanceRule, Charge, Reservation, RetryTake, RunKey, RunState, SharedState, StoreError};

/// The largest count of calls added at once (Lua's exact integers end at 2^53).
const MAX_CALLS: u64 = 1 << 53;

/// The Redis store's shared state (module docs). Shares the store's connection.
#[derive(Clone)]
pub(super) struct RedisShared {
    connection: ConnectionManager,
    scripts: SharedScripts,
    base: String,
}

impl std::fmt::Debug for RedisShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisShared")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// The base of the shared keys for the records' `prefix` (module docs).
pub(super) fn shared_base(prefix: &str) -> &str {
    match prefix.strip_suffix("idem:") {
        Some(base) if !base.is_empty() => base,
        _ => prefix,
    }
}

impl RedisShared {
    pub(super) fn new(connection: ConnectionManager, prefix: &str) -> Self {
        RedisShared {
            connection,
            scripts: SharedScripts::new(),
            base: shared_base(prefix).to_owned(),
        }
    }

    pub(super) fn run_key(&self, run: &RunKey) -> String {
        format!("{}run:{}", self.base, run.storage_key())
    }

    pub(super) fn limit_key(&self, key: &str) -> String {
        format!("{}limit:{key}", self.base)
    }

    pub(super) fn instances_key(&self) -> String {
        format!("{}instances", self.base)
    }

    /// Runs `invocation` on a handle of the shared connection.
    async fn run(&self, invocation: &redis::ScriptInvocation<'_>) -> Result<redis::Value, StoreError> {
        let mut connection = self.connection.clone();
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(shared_scripts::driver_error)
    }
}

#[async_trait::async_trait]
impl SharedState for RedisShared {
    async fn visit_run(
        &self,
        run: &RunKey,
        offer: Option<Duration>,
        ttl: Duration,
    ) -> Result<RunState, StoreError> {
        let offer = offer.map(|offer| offset_ms(offer).to_string());
        let mut invocation = self.scripts.run_visit.prepare_invoke();
        invocation
            .key(self.run_key(run))
            .arg(offer.unwrap_or_default())
            .arg(ttl_ms(ttl));
        shared_scripts::run_state(self.run(&invocation).await?)
    }

    async fn take_run_retry(
        &self,
        run: &RunKey,
        calls: u64,
        rule: AllowanceRule,
        ttl: Duration,
    ) -> Result<RetryTake, StoreError> {
        let share = finite(rule.share());
        let mut invocation = self.scripts.run_take.prepare_invoke();
        invocation
            .key(self.run_key(run))
            .arg(calls.min(MAX_CALLS))
            .arg(rule.base)
            .arg(share.to_string())
            .arg(ttl_ms(ttl));
        let (taken, calls, taken_in_all) = shared_scripts::take(self.run(&invocation).await?)?;
        Ok(RetryTake {
            taken,
            left: rule.limit(calls).saturating_sub(taken_in_all),
        })
    }

    async fn give_back_run_retry(&self, run: &RunKey) -> Result<(), StoreError> {
        let mut invocation = self.scripts.run_give_back.prepare_invoke();
        invocation.key(self.run_key(run));
        self.run(&invocation).await.map(|_| ())
    }

    async fn reserve(&self, charges: &[Charge], max_wait: Duration) -> Result<Reservation, StoreError> {
        if charges.is_empty() {
            return Ok(Reservation::Granted(Duration::ZERO));
        }
        let mut invocation = self.scripts.limit_reserve.prepare_invoke();
        invocation
            .arg(micros(max_wait).to_string())
            .arg(micros(LIMIT_KEEP).to_string());
        for charge in charges {
            let (interval, tolerance, cost) = charge_parts(charge);
            invocation
                .key(self.limit_key(&charge.key))
                .arg(interval.to_string())
                .arg(tolerance.to_string())
                .arg(cost.to_string());
        }
        let (granted, wait_us) = shared_scripts::reserve(self.run(&invocation).await?)?;
        Ok(reservation(granted, wait_us))
    }

    async fn correct(&self, limit: &Charge, delta: f64) -> Result<(), StoreError> {
        let (interval, tolerance, _) = charge_parts(limit);
        let mut invocation = self.scripts.limit_correct.prepare_invoke();
        invocation
            .key(self.limit_key(&limit.key))
            .arg(interval.to_string())
            .arg(tolerance.to_string())
            .arg(finite(delta).to_string())
            .arg(micros(LIMIT_KEEP).to_string());
        self.run(&invocation).await.map(|_| ())
    }

    async fn heartbeat(&self, instance: &str, ttl: Duration) -> Result<u32, StoreError> {
        let mut invocation = self.scripts.heartbeat.prepare_invoke();
        invocation
            .key(self.instances_key())
            .arg(instance)
            .arg(ttl_ms(ttl));
        shared_scripts::instances(self.run(&invocation).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::shared_base;

    #[test]
    fn shared_keys_sit_beside_the_records_not_under_them() {
        assert_eq!(shared_base("ballast:idem:"), "ballast:");
        assert_eq!(shared_base("tenant-a:idem:"), "tenant-a:");
        assert_eq!(shared_base("ballast:test:1f:"), "ballast:test:1f:");
        assert_eq!(shared_base("idem:"), "idem:");
    }
}
