//! The retry decision: from one attempt's outcome to `Retry { after }`, `Done` or `Stop(reason)`.
//!
//! Why a decision and not a loop: the async shell owns the sockets, the clock and the sleeps; everything it must
//! decide between two attempts is here, pure and cheap (no allocation, no clock read), so every rule has a unit
//! test and the whole loop has property tests with a fake clock. The shell's loop is:
//!
//! ```text
//! let mut call = CallState::new(kind, deadline);             // once per logical call (per deployment)
//! loop {
//!     let timeout = call.deadline().attempt_timeout(per_try, now)?; // no attempt that cannot finish
//!     let outcome = send(call.next_attempt(), timeout).await; // ballast-attempt: N
//!     match policy.decide(&outcome, &mut call, now, &*budget, run, &mut rng) {
//!         RetryDecision::Done => return the answer,
//!         RetryDecision::Retry { after } => sleep(after).await,
//!         RetryDecision::Stop(reason) => return the failure (reason.code(), reason.should_retry_header()),
//!     }
//! }
//! ```
//!
//! The rules, in the order [`RetryPolicy::decide`] applies them (DESIGN.md, "Retry decision" and "Upstream
//! idempotency"):
//! 1. **Is it a failure at all?** 1xx-3xx answers are [`RetryDecision::Done`].
//! 2. **Can a retry help?** Provider problems a wait cannot fix stop at once: `insufficient_quota` (the model
//!    route moves to its next deployment instead of waiting) and a context-length error. Then
//!    `x-should-retry: true|false` from the upstream, when present, decides whether the answer is retryable
//!    (rule 3 still decides whether it is safe); otherwise the retryable set:
//!    never-sent errors, timeouts and transport errors after sending, statuses 408, 425, 429, 500, 502, 503,
//!    504, 529, and 409 only as an idempotency "in progress" answer (`urn:ballast:idempotency_in_progress`,
//!    Stripe's `idempotency_key_in_use`). Every other 4xx is final (AWS Builders' Library, "Timeouts, retries
//!    and backoff with jitter": retry only what a retry can fix).
//! 3. **Is a retry safe?** Model calls and read-only tools: yes. Side-effecting tools, by the upstream's
//!    [`UpstreamIdempotency`] (the table is `side_effect_may_retry` in `classify.rs`, one place to change):
//!    - `none`: only never-sent errors and explicit refusals — 408, 425, 429, a 409 in progress, a 503 with
//!      `Retry-After`: answered before the operation ran. A timeout or reset after sending is `OutcomeUnknown`:
//!      the upstream may have acted and nothing deduplicates a second try (reference/003, the double refund);
//!      any other 5xx is `OutcomeUnknownAnswer`: it may come after the commit (Stripe treats a 500 so).
//!    - `keyed`: the upstream deduplicates by `Idempotency-Key` and stores successes only, so every retryable
//!      outcome is retried with the same key.
//!    - `keyed_replays_errors` (Stripe): the upstream stores every answer it produced, so a 5xx would be
//!      replayed as the same 5xx — not retried. Timeouts and transport errors (no answer was received) and the
//!      4xx in the set — 408, 425, 429, 409 in progress — are retried: those are answered before the operation
//!      runs and are not stored (Stripe: "results are only saved if an API endpoint started executing").
//!
//!    `x-should-retry` overrides the retryable set of rule 2, not this table: `false` stops every kind of call,
//!    `true` makes any error answer retryable, and then the table still decides whether re-sending a side effect
//!    is safe. A `none` upstream's answer that is not a refusal is never re-sent, whatever the header: nothing
//!    deduplicates the second try, and an upstream's "retry me" cannot make that safe.
//!
//!    Before all three, for a side-effecting call: an answer that leaves the outcome unknown
//!    ([`answer_leaves_outcome_unknown`]: the upstream says so — `urn:ballast:outcome_unknown`, a handler that
//!    panicked, `ballast-outcome: unknown` — or a `none` upstream's 5xx) stops the call with
//!    `OutcomeUnknownAnswer`: the client believes the server, and nothing re-sends what may have happened. A `keyed_replays_errors` 5xx that says `true` *is*
//!    retried: the upstream only says so of an answer it did not store (Stripe's `Stripe-Should-Retry` is sent
//!    exactly for this), and the same key still deduplicates the retry. `keyed` retries it as it retries any
//!    retryable answer.
//! 4. **The attempt cap** (`max_attempts`, default 3).
//! 5. **How long to wait.** The upstream's `Retry-After` / `retry-after-ms` is honoured, never shortened, plus a
//!    small jitter on top (10% of it, at most `retry_after_jitter`, default 1 s) so the clients it paced do not
//!    return together; a value over `max_retry_after` (default 60 s) stops the call at once. Without it, the
//!    [`Backoff`](crate::Backoff) draws the sleep (full jitter by default, AWS).
//! 6. **Does the wait fit?** [`Deadline::check_wait`](crate::Deadline::check_wait): the wait must leave the
//!    reserve and `min_attempt` for the next attempt, or the call stops now with the deadline error rather than
//!    sleeping towards a certain failure.
//! 7. **Is this the layer that retries?** Retries happen at exactly one layer (reference/002: 3 tries over 5
//!    layers = 243x). A request from another Ballast (`ballast-hop`) or from an SDK that is already retrying
//!    (`x-stainless-retry-count` > 0) gets one attempt: [`retries_allowed_here`]. Its retryable failure still
//!    passes rules 4-6 and the budget checks of rule 8 — looked at, nothing withdrawn — so a caller whose retry
//!    could not succeed either (cap reached, no time left, allowance or budget spent) hears the reason that stops
//!    it, with `x-should-retry: false` (DESIGN.md: "false" when retries are spent or the deadline passed). Only
//!    when a retry would have gone ahead does the call stop with [`StopReason::RetriesAtCaller`] and
//!    `x-should-retry: true`: the caller's retry layer is the one layer that retries.
//! 8. **Can we afford it?** Only when everything above says retry here: one retry from the run's allowance (when the
//!    call belongs to a run, [`RunAllowance`]), then one from the upstream's [`RetryBudget`](crate::RetryBudget)
//!    (Finagle, Google SRE "Handling Overload"). If the budget refuses after the allowance gave, the allowance
//!    gets its retry back. `decide` also deposits each call's first attempt in the budget (the traffic a ratio
//!    budget earns from), so the shell never touches the budget itself.

mod allowance;
mod classify;
mod outcome;
mod policy;
mod stop;
#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use crate::UnknownName;

pub use allowance::{DEFAULT_RUN_ALLOWANCE, DEFAULT_RUN_ALLOWANCE_SHARE, RunAllowance, retries_allowed_here};
pub use classify::answer_leaves_outcome_unknown;
pub use outcome::{AttemptOutcome, CallKind, ProblemKind, ResponseInfo};
pub use policy::{
    CallState, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_RETRY_AFTER, DEFAULT_RETRY_AFTER_JITTER, InvalidRetryPolicy,
    RetryDecision, RetryPolicy,
};
pub use stop::StopReason;

/// What a retry of a side-effecting call may do, by what the upstream does with an `Idempotency-Key`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UpstreamIdempotency {
    /// The upstream does not deduplicate: only never-sent errors are retried; a timeout or reset after sending
    /// makes the outcome unknown. The default for side-effecting tools.
    #[default]
    None,
    /// The upstream deduplicates by key and stores only successes: timeouts, transport errors and 5xx are retried
    /// with the same key.
    Keyed,
    /// The upstream stores every answer per key (Stripe): a keyed 5xx is not retried, since the replay would be
    /// the same 5xx (unless it carries `x-should-retry: true`: then it was not stored); timeouts and transport
    /// errors are retried with the same key.
    KeyedReplaysErrors,
}

impl UpstreamIdempotency {
    /// The name used in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamIdempotency::None => "none",
            UpstreamIdempotency::Keyed => "keyed",
            UpstreamIdempotency::KeyedReplaysErrors => "keyed_replays_errors",
        }
    }

    /// Whether the upstream deduplicates by key (`keyed` or `keyed_replays_errors`).
    pub fn deduplicates(self) -> bool {
        !matches!(self, UpstreamIdempotency::None)
    }
}

impl fmt::Display for UpstreamIdempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for UpstreamIdempotency {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(UpstreamIdempotency::None),
            "keyed" => Ok(UpstreamIdempotency::Keyed),
            "keyed_replays_errors" => Ok(UpstreamIdempotency::KeyedReplaysErrors),
            _ => Err(UnknownName::new(s, &["none", "keyed", "keyed_replays_errors"])),
        }
    }
}

#[cfg(test)]
mod upstream_idempotency_tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for u in [
            UpstreamIdempotency::None,
            UpstreamIdempotency::Keyed,
            UpstreamIdempotency::KeyedReplaysErrors,
        ] {
            assert_eq!(u.as_str().parse::<UpstreamIdempotency>(), Ok(u));
        }
        assert!(!UpstreamIdempotency::None.deduplicates());
        assert!(UpstreamIdempotency::Keyed.deduplicates());
    }
}
