//! The policy and the decision: rules 4-8 (the attempt cap, the wait, the deadline, one layer, the budgets).

use std::time::Duration;

use rand::{Rng, RngExt as _};

use super::classify::{Verdict, classify};
use super::{AttemptOutcome, CallKind, RunAllowance, StopReason};
use crate::time::saturating_nanos;
use crate::{Backoff, Deadline, Instant, RetryBudget};

/// Default attempts per call, the first included (DESIGN.md: 3).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Default longest `Retry-After` worth waiting for (DESIGN.md: 60 s).
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Default cap on the jitter added on top of a `Retry-After` (the jitter is 10% of the wait, at most this).
pub const DEFAULT_RETRY_AFTER_JITTER: Duration = Duration::from_secs(1);
/// The jitter on top of a `Retry-After` is up to `1 / RETRY_AFTER_JITTER_DIVISOR` of it (10%).
const RETRY_AFTER_JITTER_DIVISOR: u32 = 10;

/// A retry policy that cannot work, refused at construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidRetryPolicy {
    /// `max_attempts` is zero: a call makes at least one attempt.
    #[error("retry.max_attempts: 0 is not allowed; a call makes at least one attempt (1 means no retries)")]
    ZeroAttempts,
    /// `max_attempts` is over [`RetryPolicy::LARGEST_MAX_ATTEMPTS`].
    #[error(
        "retry.max_attempts: {max_attempts} is more than {} attempts per call; the deadline and the retry budget \
         bound a call long before that, so use a smaller cap",
        RetryPolicy::LARGEST_MAX_ATTEMPTS
    )]
    TooManyAttempts {
        /// The value given.
        max_attempts: u32,
    },
}

/// What to do after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub enum RetryDecision {
    /// The attempt succeeded (1xx-3xx): hand its answer to the caller.
    Done,
    /// Wait `after`, then make the next attempt.
    Retry {
        /// The wait before the next attempt: the backoff, or the upstream's `Retry-After` plus jitter.
        after: Duration,
    },
    /// The call failed and will not be retried, for this reason.
    Stop(StopReason),
}

/// One logical call's progress: what the decision needs to remember between attempts.
///
/// Created once per call (per deployment, when a model route falls back), before its first attempt, and passed
/// to every [`RetryPolicy::decide`], which records the attempt and the wait it chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallState {
    kind: CallKind,
    deadline: Deadline,
    attempts: u32,
    previous_sleep: Duration,
    retries_here: bool,
}

impl CallState {
    /// A call of `kind` under `deadline`, before its first attempt.
    pub const fn new(kind: CallKind, deadline: Deadline) -> Self {
        CallState {
            kind,
            deadline,
            attempts: 0,
            previous_sleep: Duration::ZERO,
            retries_here: true,
        }
    }

    /// The same call, retried here or not ([`retries_allowed_here`](crate::retries_allowed_here)): a call that
    /// may not retry gets one attempt. A retryable failure stops with [`StopReason::RetriesAtCaller`] when a retry
    /// here would have gone ahead, else with the reason that would have stopped it (module docs, rule 7).
    pub const fn with_retries_here(mut self, allowed: bool) -> Self {
        self.retries_here = allowed;
        self
    }

    /// The kind of call.
    pub const fn kind(&self) -> CallKind {
        self.kind
    }

    /// The call's deadline.
    pub const fn deadline(&self) -> &Deadline {
        &self.deadline
    }

    /// Attempts judged so far (1 after the first [`decide`](RetryPolicy::decide)); `ballast-attempts`.
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The number of the next attempt, for its `ballast-attempt` header.
    pub const fn next_attempt(&self) -> u32 {
        self.attempts.saturating_add(1)
    }

    /// The last wait chosen (zero before the first retry); decorrelated jitter grows from it.
    pub const fn previous_sleep(&self) -> Duration {
        self.previous_sleep
    }

    /// Whether this layer retries the call.
    pub const fn retries_here(&self) -> bool {
        self.retries_here
    }
}

/// How a call retries: the attempt cap, the backoff, and how `Retry-After` is honoured. Cheap to copy and share.
///
/// ```
/// use ballast_core::{
///     AttemptOutcome, CallKind, CallState, Deadline, Instant, ResponseInfo, RetryBudget, RetryDecision,
///     RetryPolicy, StopReason, default_rng,
/// };
/// use std::time::Duration;
///
/// #[derive(Debug)]
/// struct Unlimited; // a stand-in for the upstream's ratio budget
/// impl RetryBudget for Unlimited {
///     fn deposit(&self, _: Instant) {}
///     fn try_withdraw(&self, _: Instant) -> bool { true }
///     fn available(&self, _: Instant) -> u64 { u64::MAX }
///     fn refused(&self) -> u64 { 0 }
/// }
///
/// let policy = RetryPolicy::default().with_retry_after_jitter(Duration::ZERO);
/// let now = Instant::ZERO;
/// let mut call = CallState::new(CallKind::Model, Deadline::after(now, Duration::from_secs(30)));
/// let mut rng = default_rng(Some(1));
///
/// // A 429 asking for 2 s: wait exactly that, never less.
/// let throttled = AttemptOutcome::Response(ResponseInfo::status(429).with_retry_after(Duration::from_secs(2)));
/// let decision = policy.decide(&throttled, &mut call, now, &Unlimited, None, &mut rng);
/// assert_eq!(decision, RetryDecision::Retry { after: Duration::from_secs(2) });
///
/// // A 400 is the caller's to fix.
/// let decision = policy.decide(&AttemptOutcome::status(400), &mut call, now, &Unlimited, None, &mut rng);
/// assert_eq!(decision, RetryDecision::Stop(StopReason::NotRetryable { status: 400 }));
/// assert_eq!(call.attempts(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: Backoff,
    max_retry_after: Duration,
    retry_after_jitter: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            retry_after_jitter: DEFAULT_RETRY_AFTER_JITTER,
        }
    }
}

impl RetryPolicy {
    /// The largest `max_attempts` accepted. Retries pay off in the first few tries (AWS SDKs default to 3; gRPC's
    /// retry design treats any `maxAttempts` over 5 as 5); a cap in the hundreds bounds nothing the deadline and
    /// the budget do not, while worst-case arithmetic over it (`ballast plan`, amplification over layers) only
    /// grows. 100 leaves room for unusual upstreams and keeps every product finite.
    pub const LARGEST_MAX_ATTEMPTS: u32 = 100;

    /// A policy of at most `max_attempts` attempts per call (the first included), sleeping by `backoff` when the
    /// upstream asks for no particular wait. `max_attempts` is between 1 and
    /// [`LARGEST_MAX_ATTEMPTS`](RetryPolicy::LARGEST_MAX_ATTEMPTS).
    pub fn new(max_attempts: u32, backoff: Backoff) -> Result<Self, InvalidRetryPolicy> {
        if max_attempts == 0 {
            return Err(InvalidRetryPolicy::ZeroAttempts);
        }
        if max_attempts > Self::LARGEST_MAX_ATTEMPTS {
            return Err(InvalidRetryPolicy::TooManyAttempts { max_attempts });
        }
        Ok(RetryPolicy {
            max_attempts,
            backoff,
            ..RetryPolicy::default()
        })
    }

    /// The same policy stopping at once when the upstream asks to wait longer than `max_retry_after`. Zero means
    /// never wait for a `Retry-After` above zero (move to the fallback instead).
    pub const fn with_max_retry_after(mut self, max_retry_after: Duration) -> Self {
        self.max_retry_after = max_retry_after;
        self
    }

    /// The same policy with this cap on the jitter added on top of a `Retry-After` (10% of the wait, at most
    /// `cap`). Zero adds none: the wait is exactly what the upstream asked.
    pub const fn with_retry_after_jitter(mut self, cap: Duration) -> Self {
        self.retry_after_jitter = cap;
        self
    }

    /// Attempts per call, the first included.
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The backoff used when the upstream asks for no wait.
    pub const fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// The longest `Retry-After` waited for.
    pub const fn max_retry_after(&self) -> Duration {
        self.max_retry_after
    }

    /// The cap on the jitter added on top of a `Retry-After`.
    pub const fn retry_after_jitter(&self) -> Duration {
        self.retry_after_jitter
    }

    /// Judges the attempt that just ended with `outcome` at `now`: done, retry after a wait, or stop.
    ///
    /// Records the attempt in `call` (and, on `Retry`, the wait). The first attempt of a call is deposited in
    /// `budget` here, so budgets that earn retries from traffic see every call exactly once; the shell does not
    /// deposit. A retry is withdrawn from `run` (when the call belongs to a run) and `budget` only when every other
    /// rule says retry. The rules and their order are in the module documentation.
    pub fn decide<B, R>(
        &self,
        outcome: &AttemptOutcome,
        call: &mut CallState,
        now: Instant,
        budget: &B,
        run: Option<&RunAllowance>,
        rng: &mut R,
    ) -> RetryDecision
    where
        B: RetryBudget + ?Sized,
        R: Rng + ?Sized,
    {
        if call.attempts == 0 {
            budget.deposit(now);
        }
        call.attempts = call.attempts.saturating_add(1);
        let retry_after = match classify(outcome, call.kind) {
            Verdict::Done => return RetryDecision::Done,
            Verdict::Stop(reason) => return RetryDecision::Stop(reason),
            Verdict::Retry { retry_after } => retry_after,
        };
        if call.attempts >= self.max_attempts {
            return RetryDecision::Stop(StopReason::AttemptsExhausted {
                attempts: call.attempts,
            });
        }
        let after = match self.wait(retry_after, call, now, rng) {
            Ok(after) => after,
            Err(reason) => return RetryDecision::Stop(reason),
        };
        if !call.retries_here {
            return RetryDecision::Stop(Self::stop_for_caller(now, budget, run));
        }
        if let Some(run) = run
            && !run.try_take()
        {
            return RetryDecision::Stop(StopReason::RunAllowanceExhausted);
        }
        if !budget.try_withdraw(now) {
            if let Some(run) = run {
                run.give_back();
            }
            return RetryDecision::Stop(StopReason::RetryBudgetExhausted);
        }
        call.previous_sleep = after;
        RetryDecision::Retry { after }
    }

    /// Rule 7 for a call this layer does not retry, reached only when the cap and the deadline would have allowed
    /// a retry: a spent run allowance or an empty budget would still have stopped one, and the caller hears that
    /// (`x-should-retry: false`; its retry would be refused the same way). Only when a retry would have gone ahead
    /// is the caller's retry layer told to retry ([`StopReason::RetriesAtCaller`]). Nothing is withdrawn: this
    /// layer makes no retry, so it spends nothing.
    fn stop_for_caller<B>(now: Instant, budget: &B, run: Option<&RunAllowance>) -> StopReason
    where
        B: RetryBudget + ?Sized,
    {
        if run.is_some_and(|run| run.left() == 0) {
            StopReason::RunAllowanceExhausted
        } else if budget.available(now) == 0 {
            StopReason::RetryBudgetExhausted
        } else {
            StopReason::RetriesAtCaller
        }
    }

    /// Rules 5-6: the wait before the next attempt, and whether the deadline can hold it and an attempt after.
    fn wait<R: Rng + ?Sized>(
        &self,
        retry_after: Option<Duration>,
        call: &CallState,
        now: Instant,
        rng: &mut R,
    ) -> Result<Duration, StopReason> {
        let deadline = &call.deadline;
        let Some(asked) = retry_after else {
            // `attempts` is at least 1 here, so this is the number of retries made so far.
            let retry = call.attempts.saturating_sub(1);
            let sleep = self.backoff.delay(retry, call.previous_sleep, rng);
            deadline.check_wait(sleep, now).map_err(StopReason::Deadline)?;
            return Ok(sleep);
        };
        if asked > self.max_retry_after {
            return Err(StopReason::RetryAfterTooLong {
                asked,
                max: self.max_retry_after,
            });
        }
        deadline.check_wait(asked, now).map_err(StopReason::Deadline)?;
        // The jitter only ever lengthens the wait, and is trimmed to what the deadline leaves after it.
        let slack = deadline
            .remaining(now)
            .saturating_sub(asked)
            .saturating_sub(deadline.reserve())
            .saturating_sub(deadline.least_attempt());
        let window = (asked / RETRY_AFTER_JITTER_DIVISOR)
            .min(self.retry_after_jitter)
            .min(slack);
        Ok(asked + draw_up_to(window, rng))
    }
}

/// A uniform draw in `[0, max]`; no draw at all when `max` is zero.
fn draw_up_to<R: Rng + ?Sized>(max: Duration, rng: &mut R) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    Duration::from_nanos(rng.random_range(0..=saturating_nanos(max)))
}
