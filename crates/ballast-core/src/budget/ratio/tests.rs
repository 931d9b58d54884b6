use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::thread;

use proptest::prelude::*;

use super::*;
use crate::budget::test_support::drain;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn defaults_are_twenty_percent_plus_ten_per_second_over_ten_seconds() {
    let budget = RatioBudget::default();
    assert_eq!(budget.ratio(), 0.2);
    assert_eq!(budget.min_per_sec(), 10);
    assert_eq!(budget.window(), secs(10));
    // A new budget holds the whole floor: 10/s x 10 s.
    assert_eq!(budget.available(at(0)), 100);
    assert_eq!(budget.refused(), 0);
}

#[test]
fn invalid_parameters_are_refused_at_construction() {
    for ratio in [-0.01, 1.01, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let error = RatioBudget::new(ratio, 10, secs(10)).unwrap_err();
        assert!(matches!(error, InvalidBudget::Ratio { .. }), "{ratio}");
    }
    for window in [Duration::ZERO, Duration::from_millis(999), secs(3_601)] {
        assert_eq!(
            RatioBudget::new(0.2, 10, window).unwrap_err(),
            InvalidBudget::Window { window }
        );
    }
    for (ratio, window) in [(0.0, secs(1)), (1.0, secs(3_600))] {
        assert!(RatioBudget::new(ratio, 0, window).is_ok());
    }
    let message = RatioBudget::new(1.5, 10, secs(10)).unwrap_err().to_string();
    assert!(message.contains("ratio") && message.contains("1.5"), "{message}");
}

#[test]
fn allows_the_ratio_of_requests_plus_the_floor_and_refuses_beyond() {
    let budget = RatioBudget::default();
    for ms in 0..1_000 {
        budget.deposit(at(ms));
    }
    // 100 (floor) + 20% of 1000.
    assert_eq!(budget.available(at(1_000)), 300);
    assert_eq!(drain(&budget, at(1_000)), 300);
    assert_eq!(budget.refused(), 1);
    assert!(!budget.try_withdraw(at(1_500)));
    assert_eq!(budget.refused(), 2);
    assert_eq!(budget.available(at(1_500)), 0);
}

#[test]
fn the_ratio_alone_without_a_floor() {
    let budget = RatioBudget::new(0.1, 0, secs(10)).unwrap();
    assert_eq!(budget.available(at(0)), 0);
    assert!(!budget.try_withdraw(at(0)));
    for _ in 0..9 {
        budget.deposit(at(0));
    }
    assert_eq!(budget.available(at(0)), 0, "nine requests earn 0.9 of a retry");
    budget.deposit(at(0));
    assert_eq!(drain(&budget, at(0)), 1);
}

#[test]
fn a_ratio_rounds_down_to_thousandths_never_up() {
    // 0.29 is not exact in floating point; it must still earn exactly 290 retries per 1000 requests.
    let budget = RatioBudget::new(0.29, 0, secs(10)).unwrap();
    for _ in 0..1_000 {
        budget.deposit(at(0));
    }
    assert_eq!(budget.available(at(0)), 290);
    // 0.0015 earns 0.001: a thousand requests earn one retry, not one and a half.
    let budget = RatioBudget::new(0.0015, 0, secs(10)).unwrap();
    for _ in 0..1_999 {
        budget.deposit(at(0));
    }
    assert_eq!(budget.available(at(0)), 1);
}

#[test]
fn requests_age_out_of_the_window() {
    let budget = RatioBudget::new(0.5, 0, secs(10)).unwrap();
    for _ in 0..10 {
        budget.deposit(at(0));
    }
    for _ in 0..4 {
        budget.deposit(at(5_000));
    }
    assert_eq!(budget.available(at(9_999)), 7);
    // At 10 s the requests of the first second have left; those of 5 s have not.
    assert_eq!(budget.available(at(10_000)), 2);
    assert_eq!(budget.available(at(15_000)), 0);
}

#[test]
fn the_window_slides_in_tenths() {
    let budget = RatioBudget::new(1.0, 0, secs(10)).unwrap();
    budget.deposit(at(999));
    // The request at 0.999 s sits in the slot [0 s, 1 s): it counts for between 9 s and 10 s.
    assert_eq!(budget.available(at(9_999)), 1);
    assert_eq!(budget.available(at(10_000)), 0);
}

#[test]
fn retries_taken_from_the_floor_come_back_as_they_leave_the_window() {
    let budget = RatioBudget::new(0.0, 10, secs(10)).unwrap();
    // Ten retries a second for the first five seconds: half the floor.
    for second in 0..5 {
        for _ in 0..10 {
            assert!(budget.try_withdraw(at(second * 1_000)));
        }
    }
    assert_eq!(budget.available(at(9_999)), 50);
    assert_eq!(drain(&budget, at(9_999)), 50);
    assert_eq!(budget.available(at(9_999)), 0);
    // Each second, the retries of ten seconds before are given back.
    assert_eq!(budget.available(at(10_000)), 10);
    assert_eq!(budget.available(at(12_500)), 30);
    // Only after the drain at 9.999 s has left too is the whole floor back.
    assert_eq!(budget.available(at(18_999)), 50);
    assert_eq!(budget.available(at(19_000)), 100);
}

#[test]
fn the_floor_allows_min_per_sec_on_average() {
    let budget = RatioBudget::new(0.0, 10, secs(10)).unwrap();
    let mut taken = 0;
    for ms in (0..60_000).step_by(100) {
        taken += drain(&budget, at(ms));
    }
    // The floor comes back a window after it was taken: 100 every 10 s, 10 a second on average.
    assert!((590..=610).contains(&taken), "{taken}");
}

#[test]
fn an_earlier_now_mints_nothing_and_does_not_panic() {
    let budget = RatioBudget::new(0.5, 1, secs(10)).unwrap();
    assert_eq!(drain(&budget, at(20_000)), 10);
    // A thread whose clock read lost the race arrives with an earlier time.
    assert!(!budget.try_withdraw(at(19_000)));
    assert!(!budget.try_withdraw(at(0)));
    assert_eq!(budget.available(at(0)), 0);
    // A request older than the window (20 s - 10 s) has already aged out: it earns nothing.
    budget.deposit(at(9_000));
    budget.deposit(at(9_000));
    assert_eq!(budget.available(at(20_000)), 0);
    // One inside the window counts.
    budget.deposit(at(15_000));
    budget.deposit(at(15_000));
    assert_eq!(budget.available(at(20_000)), 1);
    // A late retry is held as if taken at the latest time seen (20 s): not given back at 29.999 s.
    assert!(budget.try_withdraw(at(12_000)));
    assert_eq!(budget.available(at(29_999)), 0);
    assert_eq!(budget.available(at(30_000)), 10);
}

#[test]
fn the_end_of_time_does_not_panic() {
    // With 100 ms slots, Instant::MAX is past the last epoch a slot can name: time is clamped there.
    let budget = RatioBudget::new(0.2, 10, secs(1)).unwrap();
    budget.deposit(Instant::MAX);
    assert!(budget.try_withdraw(Instant::MAX));
    assert_eq!(budget.available(Instant::MAX), 9);
    assert!(budget.try_withdraw(at(0)));
}

#[test]
fn racing_threads_take_exactly_the_floor() {
    let budget = Arc::new(RatioBudget::new(0.0, 10, secs(10)).unwrap());
    let now = at(5_000);
    let taken = AtomicU64::new(0);
    thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..10_000 {
                    if budget.try_withdraw(now) {
                        taken.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(taken.into_inner(), 100);
    assert_eq!(budget.refused(), 40_000 - 100);
    assert_eq!(budget.available(now), 0);
}

#[test]
fn racing_deposits_and_withdrawals_never_overdraw() {
    let budget = RatioBudget::new(0.5, 0, secs(10)).unwrap();
    let now = at(1_000);
    let taken = AtomicU64::new(0);
    thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| (0..10_000).for_each(|_| budget.deposit(now)));
            scope.spawn(|| {
                for _ in 0..10_000 {
                    if budget.try_withdraw(now) {
                        taken.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    // 20 000 requests earned 10 000 retries: whatever was not taken is still there, to the unit.
    let taken = taken.into_inner();
    assert_eq!(taken + budget.available(now), 10_000);
    assert_eq!(budget.balance_units(), (10_000 - taken as i64) * 1_000);
}

#[test]
fn racing_threads_across_slot_boundaries_leave_the_balance_exact() {
    let budget = RatioBudget::new(0.3, 2, secs(1)).unwrap();
    thread::scope(|scope| {
        for thread in 0..4_u64 {
            let budget = &budget;
            scope.spawn(move || {
                for i in 0..20_000_u64 {
                    // Each thread's clock moves forward over 4 s, slightly out of step with the others'.
                    let now = Instant::from_nanos(i * 200_000 + thread * 37_000);
                    if i % 3 == 0 {
                        budget.try_withdraw(now);
                    } else {
                        budget.deposit(now);
                    }
                }
            });
        }
    });
    // Once everything has left the window, exactly the floor remains: nothing leaked, nothing minted.
    assert_eq!(budget.available(at(10_000)), 2);
    assert_eq!(budget.balance_units(), 2_000);
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Deposit,
    Withdraw,
}

fn op() -> impl Strategy<Value = (Op, i64)> {
    let kind = prop_oneof![Just(Op::Deposit), Just(Op::Withdraw)];
    // Mostly forward, sometimes back (a thread that read the clock earlier and arrived later).
    let step = prop_oneof![8 => 0_i64..1_500, 1 => -3_000_i64..0];
    (kind, step)
}

proptest! {
    /// Checks every withdrawal against the rule computed from the history alone. A retry counts at the
    /// latest time seen when it was taken, a request at its own time; `s` is one slot, a tenth of the window.
    /// - taken: retries in [T - W + s, T] <= floor + ratio x requests in [T - W, T]
    /// - refused: floor + ratio x requests in [T - W + s, T] - retries in [T - W, T] < 1 (up to the 1/1000
    ///   fixed point)
    #[test]
    fn withdrawals_follow_the_rule(
        ratio in 0.0_f64..=1.0,
        min_per_sec in 0_u32..5,
        window_steps in 100_u64..500,
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        let window_ms = window_steps * 10;
        let slot_ms = window_ms / 10;
        let budget = RatioBudget::new(ratio, min_per_sec, Duration::from_millis(window_ms)).unwrap();
        let floor = f64::from(min_per_sec) * window_ms as f64 / 1_000.0;
        let mut deposits: Vec<u64> = Vec::new();
        let mut retries: Vec<u64> = Vec::new();
        let (mut now, mut latest) = (20_000_u64, 0_u64);
        let mut refusals = 0_u64;
        for (op, step) in ops {
            now = now.saturating_add_signed(step);
            latest = latest.max(now);
            let in_window = |times: &[u64], from: u64| times.iter().filter(|&&t| t >= from).count() as f64;
            match op {
                Op::Deposit => {
                    budget.deposit(at(now));
                    deposits.push(now);
                }
                Op::Withdraw => {
                    let available = budget.available(at(now));
                    let taken = budget.try_withdraw(at(now));
                    prop_assert_eq!(taken, available >= 1);
                    let (wide, narrow) = (latest.saturating_sub(window_ms), latest.saturating_sub(window_ms - slot_ms));
                    if taken {
                        retries.push(latest);
                        let allowed = floor + ratio * in_window(&deposits, wide);
                        prop_assert!(in_window(&retries, narrow) <= allowed + 1e-9,
                            "{} retries in the window, {} allowed", in_window(&retries, narrow), allowed);
                    } else {
                        refusals += 1;
                        let left = floor - 0.001 + (ratio - 0.001) * in_window(&deposits, narrow)
                            - in_window(&retries, wide);
                        prop_assert!(left < 1.0, "refused with {} retries left", left);
                    }
                }
            }
            let bound = floor + ratio * deposits.len() as f64;
            prop_assert!(budget.available(at(now)) as f64 <= bound + 1e-9);
        }
        prop_assert_eq!(budget.refused(), refusals);
        // After everything has left the window only the floor remains, exactly.
        let reserve = i64::from(min_per_sec) * window_ms as i64;
        let far = latest + 2 * window_ms;
        prop_assert_eq!(budget.available(at(far)), (reserve / 1_000) as u64);
        prop_assert_eq!(budget.balance_units(), reserve);
    }
}

#[test]
fn a_refunded_retry_is_given_back_at_once() {
    // A floor of 10 retries over 10 s, no ratio.
    let budget = RatioBudget::new(0.0, 1, secs(10)).unwrap();
    assert_eq!(drain(&budget, at(0)), 10);
    budget.refund(at(0));
    assert_eq!(budget.available(at(500)), 1);
    assert!(budget.try_withdraw(at(500)));
    assert!(!budget.try_withdraw(at(500)));
}

#[test]
fn a_refund_later_in_the_window_leaves_with_the_retry_it_returns() {
    let budget = RatioBudget::new(0.0, 1, secs(10)).unwrap();
    assert_eq!(drain(&budget, at(0)), 10);
    // Taken at 0 s, so held until 10 s; refunded at 9.5 s.
    assert_eq!(budget.available(at(9_500)), 0);
    budget.refund(at(0));
    assert_eq!(budget.available(at(9_500)), 1);
    // At 10 s the slot of 0 s leaves with its ten debits and the refund: the floor, not one more.
    assert_eq!(budget.available(at(10_000)), 10);
    assert_eq!(budget.balance_units(), 10_000);
}

#[test]
fn a_refund_after_the_window_gave_the_retry_back_gives_nothing() {
    let budget = RatioBudget::new(0.0, 1, secs(10)).unwrap();
    assert!(budget.try_withdraw(at(0)));
    assert_eq!(budget.available(at(10_000)), 10, "the window gave it back");
    budget.refund(at(0));
    assert_eq!(budget.available(at(10_000)), 10, "not twice");
    assert_eq!(budget.balance_units(), 10_000);
}

#[test]
fn a_late_refund_before_the_window_moved_cancels_out_when_it_does() {
    // Nobody touched the budget since the retry: its slot is still labelled, and the refund is credited there.
    let budget = RatioBudget::new(0.0, 1, secs(10)).unwrap();
    assert!(budget.try_withdraw(at(0)));
    budget.refund(at(0));
    assert_eq!(budget.available(at(25_000)), 10);
    assert_eq!(budget.balance_units(), 10_000);
}

#[test]
fn racing_withdrawals_and_refunds_leave_the_balance_exact() {
    let budget = RatioBudget::new(0.2, 1, secs(1)).unwrap();
    thread::scope(|scope| {
        for thread in 0..4_u64 {
            let budget = &budget;
            scope.spawn(move || {
                for i in 0..20_000_u64 {
                    // Over 4 s, out of step with the other threads; some refunds arrive a slot later.
                    let now = Instant::from_nanos(i * 200_000 + thread * 37_000);
                    budget.deposit(now);
                    if budget.try_withdraw(now) && i % 2 == 0 {
                        budget.refund(now);
                    }
                }
            });
        }
    });
    // Once everything has left the window, exactly the floor remains.
    assert_eq!(budget.available(at(10_000)), 1);
    assert_eq!(budget.balance_units(), 1_000);
}

#[test]
fn racing_refunds_of_every_retry_give_everything_back() {
    let budget = RatioBudget::new(0.0, 1, secs(10)).unwrap();
    let now = at(1_000);
    thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..10_000 {
                    if budget.try_withdraw(now) {
                        budget.refund(now);
                    }
                }
            });
        }
    });
    assert_eq!(budget.available(now), 10);
    assert_eq!(budget.balance_units(), 10_000);
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Deposit,
    Withdraw,
    /// A retry taken and held, to be refunded later.
    Hold,
    /// Refunds the oldest retry held.
    Refund,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Deposit),
        Just(Step::Withdraw),
        Just(Step::Hold),
        Just(Step::Refund)
    ]
}

proptest! {
    /// A retry taken and refunded leaves the budget exactly as a twin that never took it, whenever the refund
    /// comes (the twin makes every other withdrawal the budget makes); while retries are held, never more.
    #[test]
    fn a_refunded_retry_is_as_if_never_taken(
        ratio in 0.0_f64..=1.0,
        min_per_sec in 0_u32..3,
        ops in proptest::collection::vec((step(), 0_u64..1_500), 1..300),
    ) {
        let budget = RatioBudget::new(ratio, min_per_sec, secs(5)).unwrap();
        let twin = RatioBudget::new(ratio, min_per_sec, secs(5)).unwrap();
        let mut held = std::collections::VecDeque::new();
        let mut now = 20_000_u64;
        for (step, elapsed) in ops {
            now += elapsed;
            match step {
                Step::Deposit => {
                    budget.deposit(at(now));
                    twin.deposit(at(now));
                }
                Step::Withdraw => {
                    if budget.try_withdraw(at(now)) {
                        prop_assert!(twin.try_withdraw(at(now)), "the twin has at least as much");
                    }
                }
                Step::Hold => {
                    if budget.try_withdraw(at(now)) {
                        held.push_back(now);
                    }
                }
                Step::Refund => {
                    if let Some(taken) = held.pop_front() {
                        budget.refund(at(taken));
                    }
                }
            }
            let (mine, twins) = (budget.available(at(now)), twin.available(at(now)));
            prop_assert!(mine <= twins, "{} > {}", mine, twins);
            if held.is_empty() {
                prop_assert_eq!(budget.balance_units(), twin.balance_units());
            }
        }
        for taken in held.drain(..) {
            budget.refund(at(taken));
        }
        prop_assert_eq!(budget.balance_units(), twin.balance_units());
    }
}
