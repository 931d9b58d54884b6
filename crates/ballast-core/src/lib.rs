//! Ballast's pure policy: every decision Ballast makes about a call, with no async runtime and no I/O.
//!
//! Functions that need the time take `now` ([`Instant`], a monotonic point the caller supplies); randomness is a
//! parameter with a seedable default ([`DefaultRng`]). The async shell in the `ballast` crate owns the clock,
//! the sockets and the sleeps, and asks this crate what to do.
//!
//! # Layout
//! - `time` — [`Instant`], the monotonic timeline every `now` lives on.
//! - `deadline` — [`Deadline`]: one absolute deadline per request, the reserve and the least attempt worth
//!   starting.
//! - `wire` — the deadline headers (`ballast-timeout-ms`, `grpc-timeout`, the OpenAI SDKs' headers): parse,
//!   format, and the "smallest of all present, capped" rule.
//! - `backoff` — [`Backoff`]: full (default) and decorrelated jitter.
//! - `budget` — [`RetryBudget`]: the ratio budget (default) and the token bucket.
//! - `retry` — the retry decision: from an attempt's outcome to retry-after or stop-with-reason.
//! - `breaker` — the circuit breaker: consecutive-failure and failure-rate triggers, half-open probes.
//! - `admission` — [`Priority`] classes, the bounded priority queue and the concurrency limit.
//! - `idempotency` — idempotency keys (UUIDv4, derived UUIDv5) and request fingerprints (SHA-256 over the
//!   media type and the body in JCS form with exact numbers).
//! - `limit` — [`Gcra`]: account limits (requests and tokens per minute), decided with reservations.
//! - `deferred` — a deferred operation's next step after an attempt (`deferred::next`, `deferred::on_take`).
//! - `code` — [`ErrorCode`], the stable error codes every failure maps to.
//! - `repeat` — [`RecentFailures`]: a status-only client's retries of a final failure, told from new requests.

mod admission;
mod backoff;
mod breaker;
mod budget;
mod cache_line;
mod code;
mod deadline;
pub mod deferred;
mod idempotency;
mod limit;
mod name;
mod repeat;
mod retry;
mod throttle;
mod time;
mod window;
mod wire;

// admission
pub use admission::{
    Admission, AdmissionConfig, InvalidAdmission, Offer, Priority, Release, Shed, ShedReason, Ticket,
};
// backoff
pub use backoff::{Backoff, DEFAULT_BASE, DEFAULT_CAP, DefaultRng, InvalidBackoff, Jitter, default_rng};
// breaker
pub use breaker::{
    BreakerConfig, BreakerConfigBuilder, BreakerRejected, BreakerSnapshot, BreakerState, CallResult,
    CircuitBreaker, InvalidBreaker, OwnedPermit, Permit, Transition, TransitionReason,
};
// budget
pub use budget::{InvalidBudget, RatioBudget, RetryBudget, TokenBucket};
// code
pub use code::ErrorCode;
// deadline
pub use deadline::{DEFAULT_MIN_ATTEMPT, DEFAULT_RESERVE, Deadline, DeadlineExceeded, Refused};
// idempotency
pub use idempotency::{
    AmbiguousJson, Fingerprint, IdempotencyKey, InvalidFingerprint, InvalidKey, canonical_json, fingerprint,
    is_json_content_type, media_type,
};
// limit
pub use limit::{DEFAULT_LIMIT_BURST, Gcra, Grant, reserve_all};
// name
pub use name::UnknownName;
// repeat
pub use repeat::{RecentFailures, Repeat, RepeatKey, is_final_failure};
// retry
pub use retry::{
    AttemptOutcome, CallKind, CallState, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_RETRY_AFTER_JITTER, DEFAULT_RUN_ALLOWANCE, DEFAULT_RUN_ALLOWANCE_SHARE, InvalidRetryPolicy,
    ProblemKind, ResponseInfo, RetryDecision, RetryPolicy, RunAllowance, StopReason, UpstreamIdempotency,
    answer_leaves_outcome_unknown, retries_allowed_here,
};
// throttle
pub use throttle::{
    AdaptiveThrottle, InvalidThrottle, ThrottleConfig, ThrottleOutcome, ThrottleSnapshot, Throttled,
};
// time
pub use time::Instant;
// wire
pub use wire::{
    BALLAST_ATTEMPT, BALLAST_HOP, BALLAST_OUTCOME, BALLAST_REMAINING_MS, BALLAST_TIMEOUT_MS, DeadlineHeader,
    ENVOY_EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT, InboundTimeout, InvalidTraceparent, Malformation,
    RETRY_AFTER, RETRY_AFTER_MS, RetryAfter, STAINLESS_READ_TIMEOUT, STAINLESS_TIMEOUT, TRACEPARENT,
    TimeoutSource, TraceContext, TraceId, WireError, X_SHOULD_RETRY, format_grpc_timeout, format_timeout_ms,
    inbound_timeout, parse_retry_after, parse_retry_after_ms, parse_should_retry,
};
