//! Property tests: a whole run of calls driven by random outcomes, a fixed-seed RNG and a fake clock.
//!
//! The simulated shell does what the real one does: before each attempt it asks the deadline for the attempt's
//! timeout, the attempt takes some of it (all of it on a timeout), then the decision is asked and its wait is
//! slept on the fake clock. The calls of one run share the deadline, the upstream's budget and the run allowance.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::{Backoff, Deadline, Jitter};

/// One attempt: what happened, and how much of the attempt's timeout it took (per mille).
type Attempt = (AttemptOutcome, u64);

fn outcome() -> impl Strategy<Value = AttemptOutcome> {
    let status = prop::sample::select(vec![
        200, 201, 400, 404, 408, 409, 425, 429, 500, 501, 502, 503, 504, 529,
    ]);
    let problem = prop::sample::select(vec![
        ProblemKind::None,
        ProblemKind::None,
        ProblemKind::IdempotencyInProgress,
        ProblemKind::InsufficientQuota,
        ProblemKind::ContextLengthExceeded,
    ]);
    let response = (
        status,
        any::<Option<bool>>(),
        prop::option::of(0u64..8_000),
        problem,
    )
        .prop_map(|(status, should_retry, retry_after_ms, problem)| ResponseInfo {
            status,
            should_retry,
            retry_after: retry_after_ms.map(Duration::from_millis),
            problem,
        });
    prop_oneof![
        Just(AttemptOutcome::NeverSent),
        Just(AttemptOutcome::TransportError),
        Just(AttemptOutcome::Timeout),
        response.prop_map(AttemptOutcome::Response),
    ]
}

fn kind() -> impl Strategy<Value = CallKind> {
    prop::sample::select(vec![
        CallKind::Model,
        CallKind::ReadOnlyTool,
        CallKind::SideEffectingTool(UpstreamIdempotency::None),
        CallKind::SideEffectingTool(UpstreamIdempotency::Keyed),
        CallKind::SideEffectingTool(UpstreamIdempotency::KeyedReplaysErrors),
    ])
}

fn policy() -> impl Strategy<Value = RetryPolicy> {
    (
        1u32..6,
        1u64..300,
        0u64..3_000,
        any::<bool>(),
        0u64..10_000,
        0u64..2_000,
    )
        .prop_map(
            |(attempts, base_ms, extra_ms, decorrelated, max_retry_after_ms, jitter_ms)| {
                let jitter = if decorrelated {
                    Jitter::Decorrelated
                } else {
                    Jitter::Full
                };
                let backoff = Backoff::new(ms(base_ms), ms(base_ms + extra_ms), jitter).unwrap();
                RetryPolicy::new(attempts, backoff)
                    .unwrap()
                    .with_max_retry_after(ms(max_retry_after_ms))
                    .with_retry_after_jitter(ms(jitter_ms))
            },
        )
}

fn deadline() -> impl Strategy<Value = Deadline> {
    (0u64..20_000, 0u64..200, 0u64..300).prop_map(|(timeout_ms, reserve_ms, min_attempt_ms)| {
        Deadline::after(Instant::ZERO, ms(timeout_ms))
            .with_reserve(ms(reserve_ms))
            .with_min_attempt(ms(min_attempt_ms))
    })
}

struct Run {
    policy: RetryPolicy,
    deadline: Deadline,
    per_try: Duration,
    budget: Counted,
    run: RunAllowance,
}

impl Run {
    /// Plays the calls of one run; returns the retries made. Asserts the invariants on every step.
    fn play(&self, kinds: &[CallKind], attempts: &[Attempt], seed: u64) -> Result<u64, TestCaseError> {
        let deadline = self.deadline;
        let mut rng = default_rng(Some(seed));
        let mut attempts = attempts.iter().cycle();
        let (mut now, mut retries) = (Instant::ZERO, 0u64);
        for kind in kinds {
            let mut call = CallState::new(*kind, deadline);
            loop {
                let Ok(timeout) = deadline.attempt_timeout(self.per_try, now) else {
                    // (a) Only a call's first attempt may find the deadline spent: every wait left room.
                    prop_assert_eq!(call.attempts(), 0, "a retry's wait left no room for its attempt");
                    return Ok(retries);
                };
                prop_assert!(deadline.usable(now) >= deadline.min_attempt() && !timeout.is_zero());
                let (outcome, share) = attempts.next().copied().unwrap_or((AttemptOutcome::NeverSent, 0));
                now = now + attempt_time(&outcome, timeout, share);
                let decision =
                    self.policy
                        .decide(&outcome, &mut call, now, &self.budget, Some(&self.run), &mut rng);
                // (b) Never more attempts than the cap.
                prop_assert!(call.attempts() <= self.policy.max_attempts());
                let RetryDecision::Retry { after } = decision else {
                    break;
                };
                retries += 1;
                // (d) A side effect that may have happened is never sent again to an upstream that cannot tell.
                if *kind == CallKind::SideEffectingTool(UpstreamIdempotency::None) {
                    prop_assert!(!matches!(
                        outcome,
                        AttemptOutcome::Timeout | AttemptOutcome::TransportError
                    ));
                }
                // (e) Never earlier than the upstream asked.
                if let AttemptOutcome::Response(ResponseInfo {
                    retry_after: Some(asked),
                    ..
                }) = outcome
                {
                    prop_assert!(after >= asked, "waited {:?}, asked {:?}", after, asked);
                }
                now = now + after;
                // (a) No wait ends past deadline - reserve - min_attempt.
                let latest = deadline.instant() - deadline.reserve() - deadline.min_attempt();
                prop_assert!(now <= latest, "wait ended at {:?}, latest {:?}", now, latest);
                prop_assert!(!deadline.usable(now).is_zero(), "a wait left no usable time");
            }
        }
        Ok(retries)
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// How long an attempt took: its whole timeout when it timed out, else a share of it.
fn attempt_time(outcome: &AttemptOutcome, timeout: Duration, share: u64) -> Duration {
    match outcome {
        AttemptOutcome::Timeout => timeout,
        _ => timeout.mul_f64(share as f64 / 1000.0),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_run_keeps_to_its_deadline_cap_budget_and_allowance(
        policy in policy(),
        deadline in deadline(),
        per_try_ms in 1u64..5_000,
        budget_retries in 0u64..6,
        run_retries in 0u32..6,
        kinds in prop::collection::vec(kind(), 1..5),
        attempts in prop::collection::vec((outcome(), 0u64..=1000), 1..30),
        seed: u64,
    ) {
        let run = Run {
            policy,
            deadline,
            per_try: ms(per_try_ms),
            budget: Counted::new(budget_retries),
            run: RunAllowance::new(run_retries),
        };
        let retries = run.play(&kinds, &attempts, seed)?;
        // (c) Retries within the budget and the run's allowance, each drawn exactly once from both.
        prop_assert!(retries <= budget_retries);
        prop_assert!(retries <= u64::from(run_retries));
        prop_assert_eq!(run.budget.withdrawn(), retries);
        prop_assert_eq!(u64::from(run.run.left()), u64::from(run_retries) - retries);
    }

    #[test]
    fn a_none_side_effect_is_never_retried_once_sent(
        policy in policy(),
        lost in prop::sample::select(vec![AttemptOutcome::Timeout, AttemptOutcome::TransportError]),
        attempts_before in 0u32..4,
        seed: u64,
    ) {
        let kind = CallKind::SideEffectingTool(UpstreamIdempotency::None);
        let mut call = CallState::new(kind, Deadline::after(Instant::ZERO, Duration::from_secs(60)));
        let budget = Counted::new(u64::MAX);
        let mut rng = default_rng(Some(seed));
        for _ in 0..attempts_before {
            let _ = policy.decide(&AttemptOutcome::NeverSent, &mut call, Instant::ZERO, &budget, None, &mut rng);
        }
        let decision = policy.decide(&lost, &mut call, Instant::ZERO, &budget, None, &mut rng);
        let timed_out = lost == AttemptOutcome::Timeout;
        prop_assert_eq!(decision, RetryDecision::Stop(StopReason::OutcomeUnknown { timed_out }));
    }
}
