//! Ballast's server-side idempotency records (Stripe semantics; IETF draft-ietf-httpapi-idempotency-key-header).
//!
//! A request with an `Idempotency-Key` claims the key before anything runs; the claim moves through
//! `claimed` (nothing sent yet) -> `dispatched` (sent upstream) -> `completed` (the upstream's answer, replayed
//! to every retry) or `outcome_unknown` (sent, and nobody knows whether it acted); or `claimed` -> released (a
//! local rejection: nothing is stored, a retry runs). DESIGN.md ("Idempotency, server side") has the table this
//! crate implements; `IdempotencyLayer` in the `ballast` crate turns it into HTTP answers.
//!
//! Why a lease and an owner token: a holder can crash at any moment. Its claim is held under a short lease (on
//! the store's clock) that the live holder renews while it runs ([`IdempotencyStore::renew`]); a crashed
//! holder's lease runs out within seconds, and the next request takes it over by compare-and-set on the owner
//! token — so the old holder, if it was only slow, can no longer write. A holder that vanished after it sent the
//! request leaves `outcome_unknown` behind, unless the upstream deduplicates by the key itself; then the taker
//! re-sends the same key ([`ExpiredDispatch`]). A holder that was only cut off from the store and comes back
//! before anyone took the key over still writes its true answer over that `outcome_unknown`; a holder's own
//! `outcome_unknown` is final.
//!
//! # Layout
//! - `types` — [`Scope`] (principal + route + key), [`OwnerToken`], [`ClaimRequest`], [`ClaimOutcome`],
//!   [`Record`], [`StoredResponse`], [`StoreOptions`].
//! - `error` — [`StoreError`].
//! - `shared` — [`SharedState`]: what many gateway instances share besides records (runs, account limits, live
//!   instances), with [`RunKey`], [`Charge`] and the answers.
//! - `deferred` — [`DeferredQueue`]: operations that wait for a later attempt, kept with their records
//!   ([`NewOperation`], [`Operation`], [`Taken`], [`Finish`], [`QueueDepth`]).
//! - `shared_wire` — what the Redis and PostgreSQL shared states send their servers (finite µs, whole ms, how
//!   long an idle limit is kept), written once.
//! - `codec` — the one binary form of stored headers.
//! - `decide` — what a claim does to the record it finds (shared by the SQL backends).
//! - `open` — [`open`]: a store from its URL (`sqlite://`, `sqlite::memory:`, `postgres://`, `redis://`).
//! - `sqlite`, `postgres`, `redis` — the backends, each behind the cargo feature of its name (all on by default).
//! - `postgres` — [`PostgresStore`]: single-statement claims and compare-and-set transitions on the server's
//!   clock, a pool, the schema migrated under an advisory lock.
//! - `redis` — [`RedisStore`]: one hash per record, every operation one Lua script on the server's clock, Redis
//!   key expiry at the retention end; a failover can lose a claim (see its docs).
//! - `conformance` — the one suite every backend runs (public with the `conformance` feature).

// The time helpers and the claim decision are shared by some backends and not others: a build without every
// backend leaves some of them unused.
#[cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "redis")),
    allow(dead_code)
)]
mod clock;
mod codec;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
#[cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "redis")),
    allow(dead_code)
)]
mod decide;
mod deferred;
mod error;
mod health;
mod open;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "redis")]
mod redis;
mod shared;
#[cfg(any(feature = "postgres", feature = "redis"))]
mod shared_wire;
#[cfg(feature = "sqlite")]
mod sqlite;
mod types;

use std::fmt::Debug;
use std::time::Duration;

pub use codec::{decode_headers, encode_headers};
pub use deferred::{
    DeferredQueue, Finish, NewOperation, Operation, OperationState, QueueDepth, RECORD_GRACE, Taken,
};
pub use error::{BoxError, StoreError};
pub use health::{CheckedStore, SLOW_PROBES, StoreHealth};
pub use open::open;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "redis")]
pub use redis::RedisStore;
pub use shared::{AllowanceRule, Charge, Reservation, RetryTake, RunKey, RunState, SharedState};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use types::{
    ClaimOutcome, ClaimRequest, DEFAULT_RETENTION, ExpiredDispatch, InFlight, OwnerToken, Record,
    RecordState, Scope, StoreOptions, StoredResponse,
};

/// Where idempotency records live. One implementation per backend; all of them pass the conformance suite (the
/// `conformance` module, public with the `conformance` feature).
///
/// Every method is atomic on the store: two requests racing on one key see one winner, whatever the number of
/// processes. Every state change names the [`OwnerToken`] of the claim and is applied only while the record
/// still carries it; otherwise it fails with [`StoreError::NotHeld`] and changes nothing. Times (leases,
/// retention) are counted on the store's own clock.
#[async_trait::async_trait]
pub trait IdempotencyStore: Send + Sync + Debug {
    /// Claims `scope` for `claim.owner`, atomically. A live record with another fingerprint gives
    /// [`ClaimOutcome::FingerprintMismatch`]. A live record in flight gives [`ClaimOutcome::InProgress`]; a
    /// finished one its outcome. A record whose lease ran out is taken over ([`ClaimOutcome::TookOver`]) — or, if
    /// it was dispatched and `claim.expired_dispatch` says so, it becomes `outcome_unknown` and that is the
    /// answer. A record past its retention counts as absent.
    async fn claim(&self, scope: &Scope, claim: &ClaimRequest) -> Result<ClaimOutcome, StoreError>;

    /// `claimed` -> `dispatched`: the request is about to leave for the upstream. Call it before sending.
    async fn mark_dispatched(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError>;

    /// `claimed` | `dispatched`: the holder is alive, its lease runs `lease` from now (on the store's clock, and
    /// never past the record's retention: that moves with it). A holder renews every third of its lease while its
    /// handler runs, so a live holder never loses its key to a retry and a crashed one blocks it for one short
    /// lease. `NotHeld` once another request took the record over.
    async fn renew(&self, scope: &Scope, owner: OwnerToken, lease: Duration) -> Result<(), StoreError>;

    /// `claimed` | `dispatched` -> `completed` with the upstream's response, kept for the retention. Also from an
    /// `outcome_unknown` the holder's expired lease left (a claim found it expired while `dispatched`): the
    /// holder was only late, and its true answer replaces the unknown. Never after a take-over (another owner).
    async fn complete(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        response: &StoredResponse,
    ) -> Result<(), StoreError>;

    /// `dispatched` -> `outcome_unknown`: the request was sent and its answer never came (kept for the
    /// retention, never run again automatically).
    async fn mark_outcome_unknown(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError>;

    /// `claimed` | `dispatched` -> deleted: the request was refused before the upstream could act (auth,
    /// validation, shed, breaker open, never sent), so a retry with the same key runs. Also from an
    /// `outcome_unknown` its expired lease left: nothing ran, and the record must not say otherwise.
    async fn release(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError>;

    /// The record of `scope`, if one is live (past-retention records count as absent).
    async fn lookup(&self, scope: &Scope) -> Result<Option<Record>, StoreError>;

    /// Deletes every record past its retention; returns how many went.
    async fn reap(&self) -> Result<u64, StoreError>;

    /// Whether the backend deletes records at their retention end by itself (Redis key expiry), so that
    /// [`reap`](IdempotencyStore::reap) finds only stragglers and usually returns 0. Default: no — the store
    /// keeps expired records (hidden from reads) until `reap` deletes them.
    fn expires_records_itself(&self) -> bool {
        false
    }

    /// The backend's name, for logs and metrics: `sqlite`, `postgres`, `redis`.
    fn backend(&self) -> &'static str;

    /// The state many instances share through this store — runs, account limits, live instances
    /// ([`SharedState`]) — for a backend that several processes use at once (Redis, PostgreSQL). Default: none
    /// (SQLite: one process holds the file, and its memory is the truth).
    fn shared_state(&self) -> Option<std::sync::Arc<dyn SharedState>> {
        None
    }

    /// The deferred-operation queue kept with this store's records ([`DeferredQueue`]), so that an operation
    /// and its record change in one transaction. Every built-in backend has one; default: none (a store of your
    /// own defers nothing).
    fn deferred(&self) -> Option<std::sync::Arc<dyn DeferredQueue>> {
        None
    }

    /// Whether the store works now: a probe that goes where a claim would (the server, the file), so that its
    /// health is checked, not assumed — a gateway refuses side effects while it fails and says why in its
    /// status. Default: a lookup of a key no request can use (a principal no name can be). SQLite writes a probe
    /// and checks that its file is still the one it opened, writable.
    async fn check(&self) -> Result<(), StoreError> {
        let key = ballast_core::IdempotencyKey::parse("probe").expect("a valid key");
        self.lookup(&Scope::new("", "ballast health probe", key))
            .await
            .map(|_| ())
    }
}
