//! What many gateway instances share through one store besides idempotency records (DESIGN.md, "Many
//! instances"): each run's deadline and retry allowance, each account limit's state, and which instances are
//! alive.
//!
//! Why in the store: with two instances behind a load balancer, the calls of one run land on both, and a
//! provider's account limit is spent by both. What one instance keeps in memory the other never sees — the run's
//! deadline would be forgotten, its allowance would start again, and the limit would be N times the configured
//! one. Redis and PostgreSQL implement [`SharedState`] (every operation one atomic step on the store's own clock,
//! so instances' clocks may drift apart); SQLite does not (one process holds it: its memory is the truth).
//!
//! Times cross this interface as durations from the store's now, never as timestamps of a gateway's clock.

use std::fmt::Debug;
use std::time::Duration;

use ballast_core::Gcra;

use crate::StoreError;

/// A run, as the store keys it: its owner (the gateway's principal; empty without one) and the caller's run id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunKey {
    /// The principal that named the run: two principals' runs of one id are two runs.
    pub owner: String,
    /// The caller's `ballast-run-id`.
    pub id: String,
}

impl RunKey {
    /// The run `id` of `owner`.
    pub fn new(owner: impl Into<String>, id: impl Into<String>) -> Self {
        RunKey {
            owner: owner.into(),
            id: id.into(),
        }
    }

    /// One string for both parts, kept apart by the owner's length (no owner or id can forge another pair).
    pub fn storage_key(&self) -> String {
        format!("{}:{}:{}", self.owner.len(), self.owner, self.id)
    }
}

/// A run as the store holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunState {
    /// Time left to the run's deadline, in ms on the store's clock (negative: it passed); `None` when no call
    /// gave the run a deadline yet.
    pub deadline_in_ms: Option<i64>,
    /// Calls of the run counted so far (by every instance, as each reported them).
    pub calls: u64,
    /// Retries the run took so far.
    pub taken: u64,
}

/// The rule of a run's retry allowance: `base + floor(share x calls)` retries (ballast-core's `RunAllowance`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllowanceRule {
    /// Retries whatever the run's size.
    pub base: u32,
    /// Retries added per call of the run.
    pub share: f64,
}

impl AllowanceRule {
    /// The share as every backend reads it: one that is not positive (or NaN) adds nothing.
    pub fn share(&self) -> f64 {
        if self.share > 0.0 { self.share } else { 0.0 }
    }

    /// The retries a run of `calls` calls may make in all.
    pub fn limit(&self, calls: u64) -> u64 {
        u64::from(self.base).saturating_add((self.share() * calls as f64).floor() as u64)
    }
}

/// What [`SharedState::take_run_retry`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryTake {
    /// Whether the retry was taken.
    pub taken: bool,
    /// Retries left to the run after this decision.
    pub left: u64,
}

/// One limit charged by a reservation: the limit's key (the same on every instance: the deployment's account
/// and what is counted), its rate, and the units charged.
#[derive(Clone, Debug, PartialEq)]
pub struct Charge {
    /// The limit's key, e.g. `rpm|https://api.openai.com/v1|gpt-4.1|env:OPENAI_API_KEY`.
    pub key: String,
    /// Its rate and tolerance.
    pub rate: Gcra,
    /// Units charged (1 for a request; a call's estimated tokens).
    pub cost: f64,
}

/// What [`SharedState::reserve`] decided for all its charges together.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reservation {
    /// Booked: send after this wait (zero: at once).
    Granted(Duration),
    /// Nothing booked: the charges could go after this wait, longer than the caller may wait.
    Refused(Duration),
}

/// The state many instances share (module docs). Implemented by the Redis and PostgreSQL stores; every method is
/// one atomic step on the store, whatever the number of instances calling it.
#[async_trait::async_trait]
pub trait SharedState: Send + Sync + Debug {
    /// Visits `run`: when `offer` is given (a deadline that far from now), the run keeps the earlier of it and
    /// the deadline it has; the run is kept for `ttl` from now. Returns the run as it is after the visit.
    async fn visit_run(
        &self,
        run: &RunKey,
        offer: Option<Duration>,
        ttl: Duration,
    ) -> Result<RunState, StoreError>;

    /// Adds `calls` (this instance's calls of the run not reported yet) to the run's count, then takes one retry
    /// if the run has one left under `rule`; the run is kept for `ttl` from now.
    async fn take_run_retry(
        &self,
        run: &RunKey,
        calls: u64,
        rule: AllowanceRule,
        ttl: Duration,
    ) -> Result<RetryTake, StoreError>;

    /// Gives back one retry taken by [`take_run_retry`](SharedState::take_run_retry) that never went out (never
    /// below zero).
    async fn give_back_run_retry(&self, run: &RunKey) -> Result<(), StoreError>;

    /// Charges every limit of `charges` together, or none (ballast-core's `reserve_all`, on the store's clock):
    /// granted when the latest send time any of them needs is within `max_wait`.
    async fn reserve(&self, charges: &[Charge], max_wait: Duration) -> Result<Reservation, StoreError>;

    /// Corrects a granted charge of `limit` by `delta` units (what the call used minus what was booked; negative
    /// gives back, never into the past: ballast-core's `Gcra::correct`).
    async fn correct(&self, limit: &Charge, delta: f64) -> Result<(), StoreError>;

    /// Says that `instance` is alive for `ttl` from now; returns how many instances are alive (this one
    /// included): the count an instance divides a limit by when it loses the store.
    async fn heartbeat(&self, instance: &str, ttl: Duration) -> Result<u32, StoreError>;
}
