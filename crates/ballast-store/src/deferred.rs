//! The deferred-operation queue (DESIGN.md, "Deferred operations"; reference/000's batch retry queue): a
//! side-effecting call that could not be served now, and whose caller can wait, is kept with its idempotency
//! record and worked later — in priority order, by leased workers of any instance on the store, until it
//! succeeds, fails, runs out of attempts or expires.
//!
//! # The record and the operation
//! An operation is born from a claimed idempotency record ([`DeferredQueue::defer`]): in one transaction the
//! queue row is written and the record is kept `claimed` by the same [`OwnerToken`], its lease stretched to the
//! operation's whole life (its ttl plus [`RECORD_GRACE`]). So a live retry of the key gets 409 in-progress
//! while the operation waits, never a second execution; and whichever worker finishes the operation writes the
//! record with the token the row keeps ([`Finish`]), in the same transaction as the row.
//!
//! # Workers and leases
//! A worker takes one due operation at a time ([`DeferredQueue::take`]) under a lease of its own (a fresh token
//! per take), renews it while the attempt runs, and gives the operation back ([`DeferredQueue::reschedule`]) or
//! ends it ([`DeferredQueue::finish`]). Before it sends an attempt it says so ([`DeferredQueue::begin_attempt`]:
//! the record becomes `dispatched`); a worker killed after that leaves an operation whose lease runs out, and
//! the next take hands it over as [`Taken::interrupted`] — re-sent with the same key only where the upstream
//! deduplicates, `outcome_unknown` otherwise.
//!
//! # Operations nobody works
//! Workers take only from the tools they handle, so an operation of a tool no running gateway handles any more
//! (renamed, or removed from the config) is never taken: nothing would end it, and it would wait, and count in
//! the depth, forever. [`DeferredQueue::expire_abandoned`] ends those, whatever their tool: every unfinished
//! operation whose ttl ended more than a grace ago ([`RECORD_GRACE`] in a gateway) and that no worker holds —
//! `expired` with its record released, or `outcome_unknown` where an attempt of it may have acted — exactly as
//! its worker would have ended it. Ended, it is kept for the retention and then deleted by
//! [`DeferredQueue::reap`], as every ended operation is.
//!
//! Times cross this interface as durations from the store's now, never as timestamps of a gateway's clock.

use std::time::Duration;

use bytes::Bytes;

use crate::{OwnerToken, Scope, StoreError, StoredResponse};

/// How much longer than its operation a deferred record's lease runs: time for a worker whose attempt ends at
/// the ttl to write the end. A live request with the key takes the record over only after that (the whole
/// cluster was down past the operation's life); a worker's late end then leaves the record as that request made
/// it.
pub const RECORD_GRACE: Duration = Duration::from_secs(60);

/// At most how many operations one [`DeferredQueue::expire_abandoned`] ends: one call's work stays bounded (on
/// Redis it is one script, which the server runs alone).
pub(crate) const ABANDONED_BATCH: usize = 1000;

/// What a deferred operation is when it is queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOperation {
    /// The queue it waits in (the tool's name): workers take from named queues, each under its own concurrency
    /// limit.
    pub tool: String,
    /// Its class: higher first (ballast-core's `Priority` as a rank: `sheddable` 0 … `critical_plus` 3).
    pub priority: u8,
    /// What a worker needs to send it again (opaque to the store: the deferring layer's encoding).
    pub request: Bytes,
    /// Attempts it may make, the first included; at least 1.
    pub max_attempts: u32,
    /// How long it may wait and be tried, counted from now: after that it ends `expired`.
    pub ttl: Duration,
    /// When its first attempt is due, from now (capped at the ttl): a refusal's `Retry-After`, or zero.
    pub due_in: Duration,
    /// The answer that made the call wait, if the upstream gave one (a 429 or 503): shown as its last answer.
    pub last: Option<StoredResponse>,
}

/// Where an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperationState {
    /// Waiting for its next attempt.
    Queued,
    /// A worker holds it (an attempt runs, or is about to).
    InProgress,
    /// The upstream answered with success; the record replays it.
    Completed,
    /// It ended without success: the upstream refused it for good (the record replays that answer), or it made
    /// `max_attempts` attempts that acted on nothing (the record is released).
    Failed,
    /// Its ttl ended before an attempt succeeded; nothing acted (the record is released).
    Expired,
    /// An attempt was sent and its answer lost, on an upstream that does not deduplicate: it is never sent again.
    OutcomeUnknown,
}

impl OperationState {
    /// The state's name in answers and metrics: `queued`, `in_progress`, `completed`, `failed`, `expired`,
    /// `outcome_unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationState::Queued => "queued",
            OperationState::InProgress => "in_progress",
            OperationState::Completed => "completed",
            OperationState::Failed => "failed",
            OperationState::Expired => "expired",
            OperationState::OutcomeUnknown => "outcome_unknown",
        }
    }

    /// Whether the operation ended (nothing more will happen to it).
    pub fn is_finished(self) -> bool {
        !matches!(self, OperationState::Queued | OperationState::InProgress)
    }

    /// The state named `name` ([`as_str`](Self::as_str)'s form), for backends that store text.
    pub fn parse(name: &str) -> Option<Self> {
        [
            OperationState::Queued,
            OperationState::InProgress,
            OperationState::Completed,
            OperationState::Failed,
            OperationState::Expired,
            OperationState::OutcomeUnknown,
        ]
        .into_iter()
        .find(|state| state.as_str() == name)
    }
}

/// An operation as the store holds it. Durations are from the store's now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Whose key it is (principal + route + key): the record it holds.
    pub scope: Scope,
    /// Its queue.
    pub tool: String,
    /// Its class (higher first).
    pub priority: u8,
    /// Where it is.
    pub state: OperationState,
    /// Attempts made so far (sent upstream, or possibly sent by a worker that died).
    pub attempts: u32,
    /// Attempts it may make.
    pub max_attempts: u32,
    /// What a worker sends.
    pub request: Bytes,
    /// Completed: the upstream's answer. Failed: the last answer, when there was one. Queued: the last answer
    /// that made it wait, if any.
    pub last: Option<StoredResponse>,
    /// Time since it was deferred.
    pub age: Duration,
    /// Time until its next attempt is due; zero when due, taken or finished.
    pub due_in: Duration,
    /// Time until its ttl ends; zero once it passed.
    pub expires_in: Duration,
    /// Once finished: how long it took from deferral to its end.
    pub took: Option<Duration>,
}

/// An operation a worker took: it is `in_progress` under the worker's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    /// The operation (state `in_progress`).
    pub operation: Operation,
    /// A worker that had begun an attempt died (or lost the store) before it ended it: the attempt may have
    /// acted. Already counted in `attempts`. Re-send only where the upstream deduplicates by the key; otherwise
    /// finish it `outcome_unknown`.
    pub interrupted: bool,
}

/// How an operation ended, with what its idempotency record becomes (in the same transaction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The upstream answered with success: the operation is `completed` and the record replays the answer.
    Completed(StoredResponse),
    /// The upstream refused it for good (a 4xx it produced): `failed`, and the record replays the answer.
    Rejected(StoredResponse),
    /// `max_attempts` attempts, none of which acted (each was refused for room or overload): `failed` with the
    /// last answer if there was one; the record is released, so a later call with the key runs.
    GaveUp(Option<StoredResponse>),
    /// The ttl ended first, nothing acted: `expired`; the record is released.
    Expired,
    /// An attempt may have acted and nobody knows: `outcome_unknown`, for the record too.
    OutcomeUnknown,
}

impl Finish {
    /// The state the operation ends in.
    pub fn state(&self) -> OperationState {
        match self {
            Finish::Completed(_) => OperationState::Completed,
            Finish::Rejected(_) | Finish::GaveUp(_) => OperationState::Failed,
            Finish::Expired => OperationState::Expired,
            Finish::OutcomeUnknown => OperationState::OutcomeUnknown,
        }
    }

    /// The answer the operation keeps as its `last`.
    pub fn last(&self) -> Option<&StoredResponse> {
        match self {
            Finish::Completed(response) | Finish::Rejected(response) => Some(response),
            Finish::GaveUp(last) => last.as_ref(),
            Finish::Expired | Finish::OutcomeUnknown => None,
        }
    }
}

/// Unfinished operations of one queue and class, for `/status` and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueDepth {
    /// The queue (tool).
    pub tool: String,
    /// The class (higher first).
    pub priority: u8,
    /// Operations waiting.
    pub queued: u64,
    /// Operations a worker holds.
    pub in_progress: u64,
    /// Age of the oldest unfinished one.
    pub oldest: Duration,
}

/// The queue, on the idempotency store that holds its records: every method is one atomic step (a
/// transaction on SQLite and PostgreSQL, one script on Redis) on the store's clock.
///
/// Row writes name the worker's token and apply only while the worker holds the operation (else
/// [`StoreError::NotHeld`], nothing changed). Record writes name the token the operation keeps and apply only
/// while the record still carries it in `claimed` or `dispatched` (a live request that took the record over
/// after the operation's life keeps what it made); the row's change happens either way.
#[async_trait::async_trait]
pub trait DeferredQueue: Send + Sync + std::fmt::Debug {
    /// Queues `operation` for the record of `scope`, which `owner` must hold (`claimed` or `dispatched`, lease
    /// live or not, as long as nobody took it over; else `NotHeld`): the record goes back to `claimed` under a
    /// fresh owner token the operation keeps (drawn here: a renewal or release by the old holder still on its
    /// way is refused, so it can neither shorten the operation's lease nor give its key away), with its lease
    /// stretched to the ttl plus [`RECORD_GRACE`] (and its retention with it), and the
    /// operation is written `queued`, replacing a finished operation of the scope. Returns it as stored.
    async fn defer(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        operation: &NewOperation,
    ) -> Result<Operation, StoreError>;

    /// Takes the first operation of `tools` that is due — highest priority, then earliest due, then earliest
    /// deferred — or one whose worker's lease ran out, for `worker` under `lease`: it becomes `in_progress`.
    /// An operation past its ttl is due (its worker ends it `expired`). `None` when nothing is due. Two workers
    /// never hold one operation.
    async fn take(
        &self,
        tools: &[String],
        worker: OwnerToken,
        lease: Duration,
    ) -> Result<Option<Taken>, StoreError>;

    /// The worker is alive: its lease runs `lease` from now.
    async fn renew(&self, scope: &Scope, worker: OwnerToken, lease: Duration) -> Result<(), StoreError>;

    /// An attempt is about to be sent: the record becomes `dispatched`, and a worker that dies from here on
    /// leaves the operation [`interrupted`](Taken::interrupted).
    async fn begin_attempt(&self, scope: &Scope, worker: OwnerToken) -> Result<(), StoreError>;

    /// Back to `queued`, due `due_in` from now (capped at the ttl), keeping `last` as its last answer when
    /// given. `attempted`: the attempt reached the upstream (counted) — else it was refused before it left.
    /// The record goes back to `claimed`.
    async fn reschedule(
        &self,
        scope: &Scope,
        worker: OwnerToken,
        due_in: Duration,
        attempted: bool,
        last: Option<&StoredResponse>,
    ) -> Result<(), StoreError>;

    /// Ends the operation as `end` says, its record with it. `attempted`: the last attempt reached the
    /// upstream (counted).
    async fn finish(
        &self,
        scope: &Scope,
        worker: OwnerToken,
        end: &Finish,
        attempted: bool,
    ) -> Result<(), StoreError>;

    /// The operation of `scope`, finished ones included (until their retention ends).
    async fn lookup(&self, scope: &Scope) -> Result<Option<Operation>, StoreError>;

    /// Unfinished operations per queue and class (no entry for an empty one).
    async fn depth(&self) -> Result<Vec<QueueDepth>, StoreError>;

    /// Deletes finished operations whose retention (the store's, counted from their end) passed; returns how
    /// many went. Unfinished operations are left alone, however old ([`expire_abandoned`](Self::expire_abandoned)
    /// ends those nobody works).
    async fn reap(&self) -> Result<u64, StoreError>;

    /// Ends the unfinished operations nobody will end (module docs, "Operations nobody works"), whatever their
    /// tool: those whose ttl ended at least `grace` ago (expiry + `grace` <= now) and that no worker holds —
    /// `queued`, or `in_progress` with its worker's lease run out. A gateway passes [`RECORD_GRACE`], the time a
    /// worker has to write an end it reached at the ttl.
    ///
    /// Each ends as its worker's [`finish`](Self::finish) would end it, in one step with its record (written
    /// only while the record still carries the operation's token in `claimed` or `dispatched`):
    /// - `in_progress` with an attempt begun ([`begin_attempt`](Self::begin_attempt)) and never ended: the attempt
    ///   may have acted, so it is counted (as a take of the interrupted operation would count it) and the
    ///   operation ends `outcome_unknown`, its record too ([`Finish::OutcomeUnknown`]);
    /// - otherwise (`queued`, or taken and no attempt begun) `expired`, its record released
    ///   ([`Finish::Expired`]): a later call with the key runs.
    ///
    /// Its end time is now: it is kept for the retention like any ended operation, then [`reap`](Self::reap)
    /// deletes it. An operation a live worker holds is left to that worker, even past its ttl. Ends at most 1000
    /// per call (the rest wait for the next call); returns how many it ended.
    async fn expire_abandoned(&self, grace: Duration) -> Result<u64, StoreError>;
}
