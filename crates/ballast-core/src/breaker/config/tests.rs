//! Defaults, validation and the open-time bounds of [`BreakerConfig`].

use super::*;

const MS: Duration = Duration::from_millis(1);

#[test]
fn defaults_are_the_documented_ones_and_valid() {
    let c = BreakerConfig::default();
    assert_eq!(BreakerConfig::builder().build(), Ok(c));
    assert_eq!(c.consecutive_failures(), 7);
    assert_eq!(c.failure_rate(), Some(0.5));
    assert_eq!(
        (c.window(), c.window_buckets(), c.min_calls()),
        (10_000 * MS, 10, 100)
    );
    assert_eq!((c.open_for(), c.open_jitter()), (5_000 * MS, 0.2));
    assert_eq!((c.half_open_probes(), c.success_threshold()), (3, 3));
    assert_eq!(c.slow_call(), None);
    assert_eq!(c.open_time_bounds(), (4_000 * MS, 6_000 * MS));
}

#[test]
fn success_threshold_follows_probes_unless_set() {
    let c = BreakerConfig::builder().half_open_probes(7).build().unwrap();
    assert_eq!(c.success_threshold(), 7);
    // S above M is allowed: probes go through in waves.
    let c = BreakerConfig::builder()
        .half_open_probes(2)
        .success_threshold(5)
        .build()
        .unwrap();
    assert_eq!((c.half_open_probes(), c.success_threshold()), (2, 5));
}

#[test]
fn invalid_fields_are_named_with_their_value() {
    let b = BreakerConfig::builder;
    let cases = [
        (
            b().failure_rate(Some(0.0)).build(),
            "failure_rate",
            "failure_rate: 0 is not in (0, 1]",
        ),
        (
            b().failure_rate(Some(1.5)).build(),
            "failure_rate",
            "failure_rate: 1.5 is not in (0, 1]",
        ),
        (
            b().failure_rate(Some(f64::NAN)).build(),
            "failure_rate",
            "failure_rate: NaN",
        ),
        (
            b().window_buckets(0).build(),
            "window_buckets",
            "window_buckets: 0 is not in 1..=1000",
        ),
        (
            b().window_buckets(1001).build(),
            "window_buckets",
            "window_buckets: 1001",
        ),
        (
            b().window(Duration::ZERO).build(),
            "window",
            "window: 0ns is shorter than 10 buckets",
        ),
        (
            b().window(9 * MS).build(),
            "window",
            "window: 9ms is shorter than 10 buckets of at least 1ms",
        ),
        (
            b().min_calls(0).build(),
            "min_calls",
            "min_calls: 0 must be at least 1",
        ),
        (
            b().slow_call(Some(Duration::ZERO)).build(),
            "slow_call",
            "slow_call: 0ns must be",
        ),
        (
            b().open_for(Duration::ZERO).build(),
            "open_for",
            "open_for: 0ns must be greater than zero",
        ),
        (
            b().open_for(Duration::MAX).build(),
            "open_for",
            "open_for: 18446744073709551615.999999999s is longer than 1 day",
        ),
        (
            b().open_for(BreakerConfig::MAX_OPEN_FOR + Duration::from_nanos(1))
                .build(),
            "open_for",
            "open_for: 86400.000000001s is longer than 1 day",
        ),
        (
            b().open_jitter(1.0).build(),
            "open_jitter",
            "open_jitter: 1 is not in [0, 1)",
        ),
        (
            b().open_jitter(-0.1).build(),
            "open_jitter",
            "open_jitter: -0.1 is not in [0, 1)",
        ),
        (
            b().half_open_probes(0).build(),
            "half_open_probes",
            "half_open_probes: 0 must be at least 1",
        ),
        (
            b().success_threshold(0).build(),
            "success_threshold",
            "success_threshold: 0 must be",
        ),
    ];
    for (result, field, message) in cases {
        let err = result.unwrap_err();
        assert_eq!(err.field(), field, "{err}");
        assert!(
            err.to_string().starts_with(message),
            "{err} does not start with {message}"
        );
    }
}

#[test]
fn edge_values_are_accepted() {
    let c = BreakerConfig::builder()
        .failure_rate(Some(1.0))
        .window(10 * MS)
        .min_calls(1)
        .open_jitter(0.0)
        .slow_call(Some(Duration::from_nanos(1)))
        .half_open_probes(1)
        .build()
        .unwrap();
    assert_eq!(c.open_time_bounds(), (5_000 * MS, 5_000 * MS));
    let day = BreakerConfig::builder()
        .open_for(BreakerConfig::MAX_OPEN_FOR)
        .open_jitter(0.5)
        .build()
        .unwrap();
    assert_eq!(
        day.open_time_bounds(),
        (Duration::from_secs(43_200), Duration::from_secs(129_600))
    );
    assert!(
        BreakerConfig::builder()
            .window_buckets(1000)
            .window(Duration::from_secs(1))
            .build()
            .is_ok()
    );
}

/// Review finding 6: an unbounded `open_for` panicked in `mul_f64` at the first open.
#[test]
fn scaling_an_open_time_never_panics() {
    assert_eq!(scale(Duration::MAX, 1.5), Duration::MAX);
    assert_eq!(scale(30_000 * MS, 1.1), 33_000 * MS);
    assert_eq!(scale(30_000 * MS, -1.0), Duration::ZERO);
    assert_eq!(scale(30_000 * MS, f64::NAN), Duration::ZERO);
}

#[test]
fn can_open_needs_a_trigger() {
    let b = BreakerConfig::builder;
    assert!(b().build().unwrap().can_open());
    assert!(b().failure_rate(None).build().unwrap().can_open());
    assert!(b().consecutive_failures(0).build().unwrap().can_open());
    let never = b()
        .consecutive_failures(0)
        .failure_rate(None)
        .slow_call(Some(MS))
        .build()
        .unwrap();
    assert!(!never.can_open());
    assert_eq!(never.min_calls_per_second(), None);
    assert_eq!(b().build().unwrap().min_calls_per_second(), Some(10.0)); // 100 calls / 10 s
}
