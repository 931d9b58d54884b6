//! Rules 4, 7 and 8: the attempt cap, one layer, the run allowance and the budget.

use super::*;
use std::sync::atomic::Ordering;

use crate::{Backoff, Deadline, ErrorCode};

#[test]
fn attempts_are_capped_per_call() {
    let budget = Counted::unlimited();
    let mut seeded = rng();
    let mut three = call(CallKind::Model);
    let mut decide = |state: &mut CallState| {
        policy().decide(
            &AttemptOutcome::status(503),
            state,
            at(0),
            &budget,
            None,
            &mut seeded,
        )
    };
    assert!(is_retry(decide(&mut three)));
    assert!(is_retry(decide(&mut three)));
    assert_eq!(
        decide(&mut three),
        stop(StopReason::AttemptsExhausted { attempts: 3 })
    );
    assert_eq!(three.attempts(), 3);

    let once = RetryPolicy::new(1, Backoff::default()).unwrap();
    let mut single = call(KEYED);
    let decision = once.decide(
        &AttemptOutcome::NeverSent,
        &mut single,
        at(0),
        &budget,
        None,
        &mut rng(),
    );
    assert_eq!(decision, stop(StopReason::AttemptsExhausted { attempts: 1 }));
    assert_eq!(budget.withdrawn(), 2);
}

#[test]
fn zero_attempts_is_refused_at_construction() {
    let err = RetryPolicy::new(0, Backoff::default()).unwrap_err();
    assert_eq!(err, InvalidRetryPolicy::ZeroAttempts);
    let message = err.to_string();
    assert!(
        message.contains("max_attempts") && message.contains('0'),
        "{message}"
    );
    assert_eq!(
        RetryPolicy::new(1, Backoff::default()).map(|p| p.max_attempts()),
        Ok(1)
    );
    assert_eq!(
        RetryPolicy::new(100, Backoff::default()).map(|p| p.max_attempts()),
        Ok(100)
    );
    // Review finding 5: up to u32::MAX was accepted, and `ballast plan` looped per attempt over it.
    for max_attempts in [101, u32::MAX] {
        let err = RetryPolicy::new(max_attempts, Backoff::default()).unwrap_err();
        assert_eq!(err, InvalidRetryPolicy::TooManyAttempts { max_attempts });
        let message = err.to_string();
        assert!(
            message.contains("max_attempts") && message.contains(&max_attempts.to_string()),
            "{message}"
        );
    }
    assert_eq!(RetryPolicy::default().max_attempts(), 3);
    assert_eq!(RetryPolicy::default().max_retry_after(), 60 * SECOND);
}

#[test]
fn a_refused_budget_stops_and_gives_the_run_its_retry_back() {
    let (budget, run) = (Counted::new(0), RunAllowance::new(3));
    let decision = policy().decide(
        &AttemptOutcome::NeverSent,
        &mut call(CallKind::Model),
        at(0),
        &budget,
        Some(&run),
        &mut rng(),
    );
    assert_eq!(decision, stop(StopReason::RetryBudgetExhausted));
    assert_eq!(run.left(), 3);
    assert_eq!(budget.refused(), 1);
    assert_eq!(
        StopReason::RetryBudgetExhausted.code(),
        ErrorCode::RetryBudgetExhausted
    );
}

#[test]
fn a_spent_run_allowance_stops_without_touching_the_budget() {
    let (budget, run) = (Counted::new(5), RunAllowance::new(0));
    let decision = policy().decide(
        &AttemptOutcome::NeverSent,
        &mut call(CallKind::Model),
        at(0),
        &budget,
        Some(&run),
        &mut rng(),
    );
    assert_eq!(decision, stop(StopReason::RunAllowanceExhausted));
    assert_eq!((budget.withdrawn(), budget.refused()), (0, 0));
    assert_eq!(
        StopReason::RunAllowanceExhausted.code(),
        ErrorCode::RunAllowanceExhausted
    );
}

#[test]
fn the_run_allowance_is_shared_by_the_calls_of_a_run() {
    let (budget, run) = (Counted::unlimited(), RunAllowance::new(3));
    let mut rng = rng();
    let decisions: Vec<_> = (0..4)
        .map(|_| {
            policy().decide(
                &AttemptOutcome::Timeout,
                &mut call(CallKind::Model),
                at(0),
                &budget,
                Some(&run),
                &mut rng,
            )
        })
        .collect();
    assert!(decisions[..3].iter().all(|d| is_retry(*d)), "{decisions:?}");
    assert_eq!(decisions[3], stop(StopReason::RunAllowanceExhausted));
    assert_eq!(budget.withdrawn(), 3);
}

#[test]
fn nothing_is_withdrawn_when_another_rule_stops() {
    let (budget, run) = (Counted::unlimited(), RunAllowance::new(3));
    let once = RetryPolicy::new(1, Backoff::default()).unwrap();
    let short = CallState::new(CallKind::Model, Deadline::after(at(0), 100 * MS));
    let cases = [
        (policy(), call(CallKind::Model), AttemptOutcome::status(404)),
        (policy(), call(NONE), AttemptOutcome::Timeout),
        (
            policy(),
            call(CallKind::Model),
            answer(ResponseInfo::status(429).with_retry_after(90 * SECOND)),
        ),
        (
            policy(),
            short,
            answer(ResponseInfo::status(429).with_retry_after(SECOND)),
        ),
        (once, call(CallKind::Model), AttemptOutcome::status(503)),
        (
            policy(),
            call(CallKind::Model).with_retries_here(false),
            AttemptOutcome::status(503),
        ),
    ];
    for (policy, mut call, outcome) in cases {
        let decision = policy.decide(&outcome, &mut call, at(0), &budget, Some(&run), &mut rng());
        assert!(
            matches!(decision, RetryDecision::Stop(_)),
            "{outcome:?}: {decision:?}"
        );
    }
    assert_eq!((budget.withdrawn(), budget.refused(), run.left()), (0, 0, 3));
}

#[test]
fn the_first_attempt_of_a_call_is_deposited_once() {
    let budget = Counted::unlimited();
    let mut call = call(CallKind::Model);
    let mut rng = rng();
    for _ in 0..3 {
        let _ = policy().decide(
            &AttemptOutcome::status(503),
            &mut call,
            at(0),
            &budget,
            None,
            &mut rng,
        );
    }
    assert_eq!(budget.deposits.load(Ordering::Relaxed), 1);
}

#[test]
fn a_request_from_a_retrying_layer_gets_one_attempt() {
    let budget = Counted::unlimited();
    let single = |outcome: AttemptOutcome| {
        let mut call = call(CallKind::Model).with_retries_here(retries_allowed_here(false, 1));
        policy().decide(&outcome, &mut call, at(0), &budget, None, &mut rng())
    };
    let reason = StopReason::RetriesAtCaller;
    assert_eq!(single(AttemptOutcome::status(503)), stop(reason));
    assert!(
        reason.should_retry_header(),
        "the caller is the layer that retries"
    );
    assert!(
        !reason.moves_to_fallback(),
        "a fallback attempt would be a second layer of retries"
    );
    assert_eq!(
        single(AttemptOutcome::status(400)),
        stop(StopReason::NotRetryable { status: 400 })
    );
    assert_eq!(single(AttemptOutcome::status(200)), RetryDecision::Done);
    assert_eq!(budget.withdrawn(), 0);
}

/// Regression (review finding 1): the one-layer check ran before every limit, so an SDK already retrying was
/// told `x-should-retry: true` with no time, no budget or no allowance left for its retry.
#[test]
fn a_retrying_caller_is_told_false_when_a_retry_could_not_go_ahead() {
    let outcome = AttemptOutcome::status(503);
    let at_caller =
        |policy: RetryPolicy, deadline: Deadline, budget: &Counted, run: Option<&RunAllowance>| {
            let mut call = CallState::new(CallKind::Model, deadline).with_retries_here(false);
            policy.decide(&outcome, &mut call, at(0), budget, run, &mut rng())
        };
    let plenty = Deadline::after(at(0), 30 * SECOND);
    let (full, empty) = (Counted::unlimited(), Counted::new(0));
    let once = RetryPolicy::new(1, Backoff::default()).unwrap();
    assert_eq!(
        at_caller(once, plenty, &full, None),
        stop(StopReason::AttemptsExhausted { attempts: 1 })
    );
    // 40 ms left: not even the reserve and `min_attempt` of the next attempt.
    let tight = Deadline::after(at(0), 40 * MS);
    assert!(matches!(
        at_caller(policy(), tight, &full, None),
        RetryDecision::Stop(StopReason::Deadline(_))
    ));
    let spent = RunAllowance::new(0);
    assert_eq!(
        at_caller(policy(), plenty, &full, Some(&spent)),
        stop(StopReason::RunAllowanceExhausted)
    );
    assert_eq!(
        at_caller(policy(), plenty, &empty, None),
        stop(StopReason::RetryBudgetExhausted)
    );
    let run = RunAllowance::new(1);
    assert_eq!(
        at_caller(policy(), plenty, &full, Some(&run)),
        stop(StopReason::RetriesAtCaller)
    );
    // Looked at, never withdrawn: this layer makes no retry.
    assert_eq!((full.withdrawn(), empty.refused(), run.left()), (0, 0, 1));
    for reason in [
        StopReason::AttemptsExhausted { attempts: 1 },
        StopReason::RunAllowanceExhausted,
        StopReason::RetryBudgetExhausted,
    ] {
        assert!(!reason.should_retry_header(), "{reason:?}");
    }
}

#[test]
fn call_state_numbers_the_attempts() {
    let mut call = call(CallKind::Model);
    assert_eq!((call.attempts(), call.next_attempt()), (0, 1));
    let _ = policy().decide(
        &AttemptOutcome::NeverSent,
        &mut call,
        at(0),
        &Counted::unlimited(),
        None,
        &mut rng(),
    );
    assert_eq!((call.attempts(), call.next_attempt()), (1, 2));
    assert_eq!(call.kind(), CallKind::Model);
    assert!(call.retries_here());
    assert_eq!(call.deadline().instant(), at(30_000));
}
