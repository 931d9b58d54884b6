use std::sync::atomic::AtomicU64;
use std::thread;

use proptest::prelude::*;

use super::*;
use crate::budget::test_support::drain;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

#[test]
fn defaults_are_ten_tokens_refilled_one_per_second() {
    let bucket = TokenBucket::default();
    assert_eq!(bucket.capacity(), 10);
    assert_eq!(bucket.refill_per_sec(), 1.0);
    assert_eq!(bucket.available(at(0)), 10);
    assert_eq!(bucket.refused(), 0);
}

#[test]
fn invalid_parameters_are_refused_at_construction() {
    assert_eq!(
        TokenBucket::new(0, 1.0).unwrap_err(),
        InvalidBudget::Capacity { capacity: 0 }
    );
    for refill in [-1.0, -0.0001, f64::NAN, f64::INFINITY, 2e9, 1e-7] {
        let error = TokenBucket::new(10, refill).unwrap_err();
        assert!(matches!(error, InvalidBudget::RefillPerSec { .. }), "{refill}");
    }
    for refill in [0.0, -0.0, 1e-6, 0.5, 1e9] {
        assert!(TokenBucket::new(10, refill).is_ok(), "{refill}");
    }
    let message = TokenBucket::new(10, -2.5).unwrap_err().to_string();
    assert!(
        message.contains("refill_per_sec") && message.contains("-2.5"),
        "{message}"
    );
}

#[test]
fn starts_full_and_refuses_beyond_its_capacity() {
    // Full at whatever point of the caller's timeline it is first used.
    let bucket = TokenBucket::default();
    let now = at(86_400_000);
    assert_eq!(bucket.available(now), 10);
    assert_eq!(drain(&bucket, now), 10);
    assert_eq!(bucket.refused(), 1);
    assert!(!bucket.try_withdraw(now));
    assert_eq!(bucket.refused(), 2);
    assert_eq!(bucket.available(now), 0);
}

#[test]
fn refills_at_its_rate() {
    let bucket = TokenBucket::default();
    assert_eq!(drain(&bucket, at(0)), 10);
    assert_eq!(bucket.available(at(999)), 0);
    assert!(!bucket.try_withdraw(at(999)));
    assert_eq!(bucket.available(at(1_000)), 1);
    assert_eq!(bucket.available(at(3_500)), 3);
    assert!(bucket.try_withdraw(at(3_500)));
    assert_eq!(bucket.available(at(3_500)), 2);
    assert_eq!(bucket.available(at(4_000)), 3);
}

#[test]
fn a_fractional_rate_refills_no_faster_than_asked() {
    let bucket = TokenBucket::new(5, 2.5).unwrap();
    assert_eq!(drain(&bucket, at(0)), 5);
    assert_eq!(bucket.available(at(399)), 0);
    assert_eq!(bucket.available(at(400)), 1);
    assert_eq!(bucket.available(at(1_000)), 2);
    // 3 per second is a token every 333 333 334 ns (rounded up): not yet one at 333 333 333 ns.
    let bucket = TokenBucket::new(1, 3.0).unwrap();
    assert!(bucket.try_withdraw(Instant::ZERO));
    assert_eq!(bucket.available(Instant::from_nanos(333_333_333)), 0);
    assert_eq!(bucket.available(Instant::from_nanos(333_333_334)), 1);
}

#[test]
fn refill_stops_at_the_capacity() {
    let bucket = TokenBucket::default();
    assert_eq!(drain(&bucket, at(0)), 10);
    assert_eq!(bucket.available(at(3_600_000)), 10);
    assert_eq!(drain(&bucket, at(3_600_000)), 10);
}

#[test]
fn deposits_earn_nothing() {
    let bucket = TokenBucket::new(2, 1.0).unwrap();
    assert_eq!(drain(&bucket, at(0)), 2);
    for _ in 0..1_000 {
        bucket.deposit(at(0));
    }
    assert_eq!(bucket.available(at(0)), 0);
}

#[test]
fn a_zero_refill_is_a_fixed_allowance() {
    let bucket = TokenBucket::new(3, 0.0).unwrap();
    assert_eq!(drain(&bucket, at(5)), 3);
    for later in [at(60_000), at(86_400_000), Instant::MAX] {
        assert_eq!(bucket.available(later), 0);
        assert!(!bucket.try_withdraw(later));
    }
    assert_eq!(bucket.refused(), 4);
}

#[test]
fn an_earlier_now_mints_nothing_and_does_not_panic() {
    let bucket = TokenBucket::default();
    assert_eq!(drain(&bucket, at(100_000)), 10);
    // A thread whose clock read lost the race arrives with an earlier time: the bucket looks emptier, not fuller.
    assert_eq!(bucket.available(at(50_000)), 0);
    assert!(!bucket.try_withdraw(at(50_000)));
    assert!(!bucket.try_withdraw(Instant::ZERO));
    assert_eq!(bucket.available(at(101_000)), 1);
}

#[test]
fn the_end_of_time_refuses_without_panicking() {
    let bucket = TokenBucket::default();
    assert_eq!(bucket.available(Instant::MAX), 10);
    assert!(!bucket.try_withdraw(Instant::MAX));
    assert_eq!(bucket.refused(), 1);
}

#[test]
fn racing_threads_take_exactly_the_capacity() {
    for refill in [1.0, 0.0] {
        let bucket = TokenBucket::new(100, refill).unwrap();
        let now = at(5_000);
        let taken = AtomicU64::new(0);
        thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..10_000 {
                        if bucket.try_withdraw(now) {
                            taken.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(taken.into_inner(), 100, "refill {refill}");
        assert_eq!(bucket.refused(), 40_000 - 100);
    }
}

#[test]
fn racing_threads_with_moving_clocks_take_no_more_than_the_refill() {
    let bucket = TokenBucket::new(5, 10.0).unwrap();
    let taken = AtomicU64::new(0);
    thread::scope(|scope| {
        for thread in 0..4_u64 {
            let (bucket, taken) = (&bucket, &taken);
            scope.spawn(move || {
                for i in 0..10_000_u64 {
                    // Over 10 s, each thread slightly out of step with the others.
                    if bucket.try_withdraw(Instant::from_nanos(i * 1_000_000 + thread * 123_457)) {
                        taken.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    // 5 to start with and 10 a second for (at most) 10 s.
    let taken = taken.into_inner();
    assert!(taken <= 105, "{taken}");
    assert!(taken >= 95, "{taken}");
}

proptest! {
    /// From the GCRA rule alone: every success moves the arrival time one interval on, and a success at `t`
    /// leaves it at most `capacity` intervals past `t`. So between any two successes `i` then `j` (in call
    /// order, whatever their times), the successes from `i` to `j` number at most
    /// `capacity + refill x (t_j - t_i)` — fewer when `t_j` is earlier: time going backwards mints nothing.
    #[test]
    fn withdrawals_never_exceed_capacity_plus_refill(
        capacity in 1_u32..20,
        refill in prop_oneof![Just(0.0), 0.1_f64..50.0],
        ops in proptest::collection::vec((any::<bool>(), prop_oneof![8 => 0_i64..400, 1 => -2_000_i64..0]), 1..300),
    ) {
        let bucket = TokenBucket::new(capacity, refill).unwrap();
        let (mut now, mut latest) = (10_000_u64, 0_u64);
        let mut successes: Vec<u64> = Vec::new();
        let mut refusals = 0;
        for (deposit, step) in ops {
            now = now.saturating_add_signed(step);
            latest = latest.max(now);
            if deposit {
                bucket.deposit(at(now));
                continue;
            }
            let available = bucket.available(at(now));
            prop_assert!(available <= u64::from(capacity));
            let taken = bucket.try_withdraw(at(now));
            prop_assert_eq!(taken, available >= 1);
            if !taken {
                refusals += 1;
                continue;
            }
            successes.push(now);
            let j = successes.len() - 1;
            for (i, &t_i) in successes.iter().enumerate() {
                let count = (j - i + 1) as f64;
                let allowed = f64::from(capacity) + refill * (now as f64 - t_i as f64) / 1_000.0;
                prop_assert!(count <= allowed + 1e-9, "{} successes, {} allowed", count, allowed);
            }
        }
        prop_assert_eq!(bucket.refused(), refusals);
        if refill > 0.0 {
            // Given time, it is full again — and no fuller.
            let full = latest + (f64::from(capacity) / refill * 1_000.0) as u64 + 1;
            prop_assert_eq!(bucket.available(at(full)), u64::from(capacity));
        }
    }
}

#[test]
fn a_refunded_retry_is_given_back_and_never_past_the_capacity() {
    let bucket = TokenBucket::new(2, 0.0).unwrap();
    assert_eq!(drain(&bucket, at(0)), 2);
    bucket.refund(at(0));
    assert_eq!(bucket.available(at(0)), 1);
    bucket.refund(at(0));
    assert_eq!(bucket.available(at(0)), 2);
    bucket.refund(at(0)); // stray: nothing was taken
    assert_eq!(bucket.available(at(0)), 2);
    assert_eq!(drain(&bucket, at(5_000)), 2);
}

#[test]
fn a_refund_while_refilling_gives_the_retry_back() {
    let bucket = TokenBucket::new(2, 1.0).unwrap();
    assert_eq!(drain(&bucket, at(0)), 2);
    // At 0.5 s: half a token refilled; the refund makes it one and a half.
    bucket.refund(at(0));
    assert_eq!(bucket.available(at(500)), 1);
    assert_eq!(
        bucket.available(at(1_000)),
        2,
        "full a second earlier than without the refund"
    );
}

#[test]
fn a_refund_after_the_bucket_refilled_gives_nothing() {
    let bucket = TokenBucket::new(1, 1.0).unwrap();
    assert!(bucket.try_withdraw(at(0)));
    // Full again at 1 s; drained again at 1.5 s (the next token at 2.5 s).
    assert!(bucket.try_withdraw(at(1_500)));
    bucket.refund(at(0));
    assert_eq!(
        bucket.available(at(1_500)),
        0,
        "the refill already made up for the retry taken at 0 s"
    );
    assert_eq!(bucket.available(at(2_499)), 0);
    // The retry of 1.5 s was not made up for: it comes back whole.
    bucket.refund(at(1_500));
    assert_eq!(bucket.available(at(1_500)), 1);
}

#[test]
fn a_refund_after_other_retries_gives_back_what_the_refill_did_not() {
    // 3 tokens, one a second. Retries at 0 s and 0.4 s, then the first is refunded.
    let bucket = TokenBucket::new(3, 1.0).unwrap();
    assert!(bucket.try_withdraw(at(0)));
    assert!(bucket.try_withdraw(at(400)));
    bucket.refund(at(0));
    // Without the first retry the bucket would have been full until 0.4 s, then short of 1 token, full at 1.4
    // s: 0.6 s of the refill was not wasted, and that much comes back.
    let twin = TokenBucket::new(3, 1.0).unwrap();
    assert!(twin.try_withdraw(at(400)));
    for t in [400, 1_000, 1_399, 1_400, 5_000] {
        assert_eq!(bucket.available(at(t)), twin.available(at(t)), "at {t} ms");
    }
    assert_eq!(bucket.available(at(1_399)), 2);
}

#[test]
fn racing_withdrawals_and_refunds_leave_it_full() {
    for refill in [0.0, 10.0] {
        let bucket = TokenBucket::new(5, refill).unwrap();
        thread::scope(|scope| {
            for thread in 0..4_u64 {
                let bucket = &bucket;
                scope.spawn(move || {
                    for i in 0..10_000_u64 {
                        let now = Instant::from_nanos(i * 100_000 + thread * 12_345);
                        if bucket.try_withdraw(now) {
                            bucket.refund(now);
                        }
                    }
                });
            }
        });
        // Without refill every retry came back. With refill, a refund racing a withdrawal from a clock read later
        // may be kept (the refill made up for it), so the bucket is full again by the time it refills.
        let settled = at(if refill == 0.0 { 0 } else { 1_500 });
        assert_eq!(bucket.available(settled), 5, "refill {refill}");
        assert_eq!(drain(&bucket, settled), 5, "refill {refill}");
    }
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Withdraw,
    /// A retry taken and held, to be refunded later.
    Hold,
    /// Refunds the oldest retry held.
    Refund,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![Just(Step::Withdraw), Just(Step::Hold), Just(Step::Refund)]
}

proptest! {
    /// A bucket that takes retries and refunds some holds, now and later, never more than a twin that never
    /// took the refunded ones (and makes every other withdrawal the bucket makes); without refill, exactly as
    /// much once none is held. With refill, the two are full again together.
    #[test]
    fn a_refunded_retry_never_leaves_more_than_if_never_taken(
        capacity in 1_u32..8,
        refill in prop_oneof![Just(0.0), 0.1_f64..20.0],
        ops in proptest::collection::vec((step(), 0_u64..800), 1..300),
    ) {
        let bucket = TokenBucket::new(capacity, refill).unwrap();
        let twin = TokenBucket::new(capacity, refill).unwrap();
        let mut held = std::collections::VecDeque::new();
        let mut now = 10_000_u64;
        for (step, elapsed) in ops {
            now += elapsed;
            match step {
                Step::Withdraw => {
                    if bucket.try_withdraw(at(now)) {
                        prop_assert!(twin.try_withdraw(at(now)), "the twin has at least as much");
                    }
                }
                Step::Hold => {
                    if bucket.try_withdraw(at(now)) {
                        held.push_back(now);
                    }
                }
                Step::Refund => {
                    if let Some(taken) = held.pop_front() {
                        bucket.refund(at(taken));
                    }
                }
            }
            for later in [0, 100, 1_000, 60_000] {
                let (mine, twins) = (bucket.available(at(now + later)), twin.available(at(now + later)));
                prop_assert!(mine <= twins, "{} > {} at +{} ms", mine, twins, later);
                if held.is_empty() && refill == 0.0 {
                    prop_assert_eq!(mine, twins, "at +{} ms", later);
                }
            }
        }
        if held.is_empty() && refill > 0.0 {
            let full = now + (f64::from(capacity) / refill * 1_000.0) as u64 + 1;
            prop_assert_eq!(bucket.available(at(full)), u64::from(capacity));
        }
    }

    /// A retry refunded before any other is taken is exactly as if never taken, whatever came before it.
    #[test]
    fn a_refund_before_any_other_retry_is_exact(
        capacity in 1_u32..8,
        refill in prop_oneof![Just(0.0), 0.1_f64..20.0],
        before in proptest::collection::vec(0_u64..800, 0..30),
        held_after in 0_u64..800,
        refunded_after in 0_u64..3_000,
    ) {
        let bucket = TokenBucket::new(capacity, refill).unwrap();
        let twin = TokenBucket::new(capacity, refill).unwrap();
        let mut now = 10_000_u64;
        for elapsed in before {
            now += elapsed;
            if bucket.try_withdraw(at(now)) {
                prop_assert!(twin.try_withdraw(at(now)));
            }
        }
        now += held_after;
        if bucket.try_withdraw(at(now)) {
            let taken = now;
            now += refunded_after;
            bucket.refund(at(taken));
        }
        for later in [0, 100, 1_000, 60_000] {
            prop_assert_eq!(bucket.available(at(now + later)), twin.available(at(now + later)));
        }
    }
}
