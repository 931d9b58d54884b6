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
//! - `idempotency` — idempotency keys (UUIDv4, derived UUIDv5) and request fingerprints (SHA-256 over JCS).
//! - `code` — [`ErrorCode`], the stable error codes every failure maps to.

mod admission;
mod backoff;
mod breaker;
mod budget;
mod code;
mod deadline;
mod idempotency;
mod name;
mod retry;
mod time;
mod wire;

// admission
pub use admission::Priority;
// backoff
pub use backoff::{Backoff, DEFAULT_BASE, DEFAULT_CAP, DefaultRng, InvalidBackoff, Jitter, default_rng};
// breaker
// budget
pub use budget::{InvalidBudget, RatioBudget, RetryBudget, TokenBucket};
// code
pub use code::ErrorCode;
// deadline
pub use deadline::{DEFAULT_MIN_ATTEMPT, DEFAULT_RESERVE, Deadline, DeadlineExceeded, Refused};
// idempotency
// name
pub use name::UnknownName;
// retry
pub use retry::UpstreamIdempotency;
// time
pub use time::Instant;
// wire
