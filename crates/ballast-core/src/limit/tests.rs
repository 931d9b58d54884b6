use proptest::prelude::*;

use super::*;

const SECOND: f64 = 1e6;

#[test]
fn a_quiet_limit_lets_a_burst_go_at_once_then_spaces_the_rest() {
    // 600 per minute: one every 100 ms, a second's burst (about 11) at once.
    let limit = Gcra::per_minute(600, DEFAULT_LIMIT_BURST);
    let now = 1_000.0 * SECOND;
    let mut tat = 0.0;
    let mut at_once = 0;
    while let Grant::Granted { wait_us, tat: next } = limit.reserve(tat, now, 1.0, 0.0) {
        assert_eq!(wait_us, 0.0);
        tat = next;
        at_once += 1;
    }
    assert_eq!(at_once, 11);
    // The next one could go 100 ms later; a caller that may wait that long books it.
    let Grant::Refused { retry_after_us } = limit.reserve(tat, now, 1.0, 0.0) else {
        panic!("no room left")
    };
    assert!((retry_after_us - 0.1 * SECOND).abs() < 1.0, "{retry_after_us}");
    let Grant::Granted { wait_us, .. } = limit.reserve(tat, now, 1.0, 0.2 * SECOND) else {
        panic!("a caller that can wait is booked")
    };
    assert!((wait_us - 0.1 * SECOND).abs() < 1.0);
}

#[test]
fn a_charge_larger_than_the_burst_goes_when_idle_and_the_calls_after_it_pay() {
    // 6,000 tokens per minute (100/s), a second's burst: an 800-token call still goes when the limit is idle.
    let limit = Gcra::per_minute(6_000, DEFAULT_LIMIT_BURST);
    let now = 50.0 * SECOND;
    let Grant::Granted { wait_us, tat } = limit.reserve(0.0, now, 800.0, 0.0) else {
        panic!("idle")
    };
    assert_eq!(wait_us, 0.0);
    // The next token waits until the debt is paid down to the burst: 7 s.
    let Grant::Refused { retry_after_us } = limit.reserve(tat, now, 1.0, 0.0) else {
        panic!("in debt")
    };
    assert!((retry_after_us - 7.0 * SECOND).abs() < 1.0, "{retry_after_us}");
}

#[test]
fn limits_charged_together_wait_for_the_slowest_or_book_nothing() {
    let requests = Gcra::per_minute(60, Duration::ZERO); // one a second
    let tokens = Gcra::per_minute(60_000, Duration::ZERO); // 1,000 a second
    let now = 10.0 * SECOND;
    // Tokens are 3 s ahead, requests free: the pair waits 3 s.
    let booked = reserve_all(
        &[(requests, 0.0, 1.0), (tokens, now + 3.0 * SECOND, 500.0)],
        now,
        5.0 * SECOND,
    );
    let (wait, tats) = booked.unwrap();
    assert_eq!(wait, 3.0 * SECOND);
    assert_eq!(
        tats[0],
        now + 3.0 * SECOND + SECOND,
        "requests booked at the shared send time"
    );
    assert_eq!(tats[1], now + 3.0 * SECOND + 0.5 * SECOND);
    assert_eq!(
        reserve_all(
            &[(requests, 0.0, 1.0), (tokens, now + 3.0 * SECOND, 500.0)],
            now,
            SECOND
        ),
        Err(3.0 * SECOND)
    );
}

#[test]
fn a_correction_charges_the_difference_and_a_refund_never_reaches_the_past() {
    let limit = Gcra::per_minute(60_000, Duration::ZERO); // 1 ms a token
    let now = 100.0 * SECOND;
    assert_eq!(limit.correct(now + 500_000.0, now, 200.0), now + 700_000.0);
    assert_eq!(limit.correct(now + 500_000.0, now, -200.0), now + 300_000.0);
    assert_eq!(limit.correct(now + 500_000.0, now, -900.0), now, "not before now");
    assert_eq!(
        limit.correct(now - 5.0, now, -900.0),
        now - 5.0,
        "an idle limit stays as it was"
    );
}

proptest! {
    /// Whatever the arrivals and costs, no span of time admits more than the limit allows: the units booked to go
    /// within any span of `w` are at most `w / T + tau / T + 1` (plus the one charge that may exceed the burst).
    #[test]
    fn no_span_admits_more_than_the_limit(
        per_minute in 60u64..100_000,
        gaps in proptest::collection::vec(0.0f64..50_000.0, 1..300),
        max_wait in 0.0f64..2e6,
    ) {
        let limit = Gcra::per_minute(per_minute, DEFAULT_LIMIT_BURST);
        let mut tat = 0.0;
        let mut now = 1e9;
        let mut sends = Vec::new();
        for gap in gaps {
            now += gap;
            if let Grant::Granted { wait_us, tat: next } = limit.reserve(tat, now, 1.0, max_wait) {
                prop_assert!(wait_us <= max_wait + 1e-6);
                prop_assert!(next >= tat);
                sends.push(now + wait_us);
                tat = next;
            }
        }
        sends.sort_by(f64::total_cmp);
        let t = limit.interval_us();
        let allowed_burst = limit.tolerance_us() / t + 1.0;
        for (i, first) in sends.iter().enumerate() {
            let span_end = first + 1e6; // every one-second span starting at a send
            let within = sends[i..].iter().take_while(|s| **s < span_end).count() as f64;
            prop_assert!(within <= 1e6 / t + allowed_burst + 1e-9, "{within} in a second");
        }
    }

    /// A refused charge books nothing, and the wait it names is exactly what a patient caller would get.
    #[test]
    fn a_refusal_names_the_wait_a_patient_caller_gets(
        tat_ahead in 0.0f64..1e7, cost in 1.0f64..1000.0, per_minute in 1u64..1_000_000,
    ) {
        let limit = Gcra::per_minute(per_minute, DEFAULT_LIMIT_BURST);
        let now = 5e9;
        let tat = now + tat_ahead;
        if let Grant::Refused { retry_after_us } = limit.reserve(tat, now, cost, 0.0) {
            let Grant::Granted { wait_us, .. } = limit.reserve(tat, now, cost, retry_after_us) else {
                panic!("a caller who waits the named time is booked");
            };
            prop_assert_eq!(wait_us, retry_after_us);
        }
    }
}
