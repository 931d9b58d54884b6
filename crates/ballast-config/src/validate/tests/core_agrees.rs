//! "A config that loads is a config that works": validation accepts a `retry`, `budget` or `breaker` table
//! exactly when ballast-core's constructors accept its values, and a validated config's settings are ones
//! ballast-core accepts and holds as written.
//!
//! The oracle below maps a raw table straight to ballast-core's constructors (`Backoff::new`,
//! `RetryPolicy::new`, `RatioBudget::new`, `TokenBucket::new`, `BreakerConfig::builder`), with only the file's
//! own readings in between: a whole number must fit a `u32`, and a breaker trigger written as 0 is off.

use std::time::Duration;

use ballast_core::{
    Backoff, BreakerConfig, DEFAULT_BASE, DEFAULT_CAP, DEFAULT_MAX_ATTEMPTS, Jitter, RatioBudget,
    RetryPolicy, TokenBucket,
};
use proptest::prelude::*;

use super::*;

const EXAMPLE: &str = include_str!("../../../../../examples/ballast.toml");

/// ballast-core accepts every route's settings of a validated config as they are.
fn assert_core_accepts(config: &Config) {
    let routes = (config.models.iter()).map(|m| (&m.name, &m.retry, &m.budget, &m.breaker));
    let tools = (config.tools.iter()).map(|t| (&t.name, &t.retry, &t.budget, &t.breaker));
    for (name, retry, budget, breaker) in routes.chain(tools) {
        let b = retry.backoff;
        assert_eq!(Backoff::new(b.base(), b.cap(), b.jitter()), Ok(b), "{name}");
        assert!(RetryPolicy::new(retry.max_attempts, b).is_ok(), "{name}");
        let accepted = match *budget {
            BudgetConfig::Ratio {
                ratio,
                min_per_sec,
                window,
            } => RatioBudget::new(ratio, min_per_sec, window).is_ok(),
            BudgetConfig::TokenBucket {
                capacity,
                refill_per_sec,
            } => TokenBucket::new(capacity, refill_per_sec).is_ok(),
        };
        assert!(accepted, "{name}: {budget:?}");
        let _live = budget.build();
        let rebuilt = BreakerConfig::builder()
            .consecutive_failures(breaker.consecutive_failures())
            .consecutive_spread(breaker.consecutive_spread())
            .failure_rate(breaker.failure_rate())
            .window(breaker.window())
            .window_buckets(breaker.window_buckets())
            .min_calls(breaker.min_calls())
            .slow_call(breaker.slow_call())
            .open_for(breaker.open_for())
            .open_jitter(breaker.open_jitter())
            .half_open_probes(breaker.half_open_probes())
            .success_threshold(breaker.success_threshold())
            .build();
        assert_eq!(rebuilt, Ok(*breaker), "{name}");
    }
}

#[test]
fn ballast_core_accepts_the_example_and_the_defaults() {
    for config in [
        Config::from_toml_str(EXAMPLE).unwrap(),
        Config::embedded_default(),
        load(&format!("{TOOL}{MODEL}")).unwrap(),
    ] {
        assert_core_accepts(&config);
    }
}

// ---- the oracle: raw values straight to ballast-core ----

/// A written whole number as the `u32` ballast-core takes, or `Err` when it does not fit one.
fn whole(value: Option<i64>, default: u32) -> Result<u32, ()> {
    value.map_or(Ok(default), |v| u32::try_from(v).map_err(drop))
}

/// A written duration (the generators only write well-formed ones).
fn time(value: Option<&HumanValue>, default: Duration) -> Duration {
    value.map_or(default, |v| parse_duration(&v.bare()).unwrap())
}

fn core_retry(raw: Option<&RawRetry>) -> Result<RetryConfig, ()> {
    let Some(raw) = raw else {
        return Ok(RetryConfig::default());
    };
    let max_attempts = whole(raw.max_attempts, DEFAULT_MAX_ATTEMPTS)?;
    let jitter: Jitter = raw.jitter.as_deref().map_or(Jitter::Full, |j| j.parse().unwrap());
    let (base, cap) = (
        time(raw.base.as_ref(), DEFAULT_BASE),
        time(raw.cap.as_ref(), DEFAULT_CAP),
    );
    let backoff = Backoff::new(base, cap, jitter).map_err(drop)?;
    let policy = RetryPolicy::new(max_attempts, backoff).map_err(drop)?;
    Ok(RetryConfig {
        max_attempts: policy.max_attempts(),
        backoff,
    })
}

fn core_budget(raw: Option<&RawBudget>) -> Result<BudgetConfig, ()> {
    match raw {
        None => Ok(BudgetConfig::default()),
        Some(RawBudget::Ratio {
            ratio,
            min_per_sec,
            window,
        }) => {
            let ratio = ratio.unwrap_or(RatioBudget::DEFAULT_RATIO);
            let min_per_sec = whole(*min_per_sec, RatioBudget::DEFAULT_MIN_PER_SEC)?;
            let window = time(window.as_ref(), RatioBudget::DEFAULT_WINDOW);
            RatioBudget::new(ratio, min_per_sec, window).map_err(drop)?;
            BudgetConfig::ratio(ratio, min_per_sec, window).map_err(drop)
        }
        Some(RawBudget::TokenBucket {
            capacity,
            refill_per_sec,
        }) => {
            let capacity = whole(*capacity, TokenBucket::DEFAULT_CAPACITY)?;
            let refill = refill_per_sec.unwrap_or(TokenBucket::DEFAULT_REFILL_PER_SEC);
            TokenBucket::new(capacity, refill).map_err(drop)?;
            BudgetConfig::token_bucket(capacity, refill).map_err(drop)
        }
    }
}

fn core_breaker(raw: Option<&RawBreaker>) -> Result<BreakerConfig, ()> {
    let Some(raw) = raw else {
        return Ok(BreakerConfig::default());
    };
    let d = BreakerConfig::default();
    let mut b = BreakerConfig::builder()
        .consecutive_failures(whole(raw.consecutive_failures, d.consecutive_failures())?)
        .consecutive_spread(time(raw.consecutive_spread.as_ref(), d.consecutive_spread()))
        .min_calls(whole(raw.min_calls, d.min_calls())?)
        .half_open_probes(whole(raw.half_open_probes, d.half_open_probes())?)
        .window(time(raw.window.as_ref(), d.window()))
        .open_for(time(raw.open_for.as_ref(), d.open_for()))
        .open_jitter(raw.open_jitter.unwrap_or(d.open_jitter()))
        .slow_call(raw.slow_call.as_ref().map(|s| time(Some(s), Duration::ZERO)));
    if let Some(rate) = raw.failure_rate {
        b = b.failure_rate((rate != 0.0).then_some(rate)); // the file's 0 is "off"
    }
    if raw.success_threshold.is_some() {
        b = b.success_threshold(whole(raw.success_threshold, 0)?);
    }
    b.build().map_err(drop)
}

// ---- generators: mostly ordinary values, often values on or just outside a bound ----

/// Left out, an ordinary value, or an edge (weights 3 : 6 : 1: each table holds an edge or two, and about one
/// config in five is valid).
fn pick<T: std::fmt::Debug + Clone + 'static>(
    ordinary: impl Strategy<Value = T> + 'static,
    edges: Vec<T>,
) -> BoxedStrategy<Option<T>> {
    prop_oneof![
        3 => Just(None),
        6 => ordinary.prop_map(Some),
        1 => prop::sample::select(edges).prop_map(Some),
    ]
    .boxed()
}

fn whole_number() -> BoxedStrategy<Option<i64>> {
    let edges = vec![-1, 0, 1, i64::from(u32::MAX), i64::from(u32::MAX) + 1];
    pick(1i64..50, edges)
}

fn number() -> BoxedStrategy<Option<f64>> {
    let edges = vec![
        0.0,
        -0.0,
        1.0,
        -0.1,
        0.999_999_9,
        1.000_000_1,
        1e-6,
        1e-7,
        1e9,
        2e9,
        f64::NAN,
        f64::INFINITY,
    ];
    pick(0.01..0.99f64, edges)
}

/// A duration, ordinarily from `ms` milliseconds.
fn duration(ms: std::ops::Range<u64>) -> BoxedStrategy<Option<HumanValue>> {
    let edges = [
        "0s", "1ns", "9999us", "10ms", "100ms", "999ms", "1s", "2s", "1h", "1h0.001s", "2h",
    ];
    let ordinary = ms.prop_map(|ms| HumanValue::Text(format!("{ms}ms")));
    pick(ordinary, edges.into_iter().map(HumanValue::from).collect())
}

fn maybe<T: std::fmt::Debug + Clone + 'static>(
    table: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    prop_oneof![1 => Just(None), 3 => table.prop_map(Some)].boxed()
}

fn retry() -> BoxedStrategy<Option<RawRetry>> {
    let jitter = maybe(prop::sample::select(vec![
        "full".to_owned(),
        "decorrelated".to_owned(),
    ]));
    let table = (whole_number(), duration(1..2_000), duration(100..5_000), jitter).prop_map(
        |(max_attempts, base, cap, jitter)| RawRetry {
            max_attempts,
            base,
            cap,
            jitter,
        },
    );
    maybe(table)
}

fn budget() -> BoxedStrategy<Option<RawBudget>> {
    let ratio =
        (number(), whole_number(), duration(1_000..60_000)).prop_map(|(ratio, min_per_sec, window)| {
            RawBudget::Ratio {
                ratio,
                min_per_sec,
                window,
            }
        });
    let bucket = (whole_number(), number()).prop_map(|(capacity, refill_per_sec)| RawBudget::TokenBucket {
        capacity,
        refill_per_sec,
    });
    maybe(prop_oneof![ratio, bucket])
}

fn breaker() -> BoxedStrategy<Option<RawBreaker>> {
    let counts = (whole_number(), whole_number(), whole_number(), whole_number());
    let times = (
        duration(10..60_000),
        duration(1..10_000),
        duration(1..60_000),
        duration(0..2_000),
    );
    let table = (counts, times, number(), number()).prop_map(
        |(
            (consecutive_failures, min_calls, half_open_probes, success_threshold),
            (window, slow_call, open_for, consecutive_spread),
            failure_rate,
            open_jitter,
        )| {
            RawBreaker {
                consecutive_failures,
                consecutive_spread,
                failure_rate,
                window,
                min_calls,
                slow_call,
                open_for,
                open_jitter,
                half_open_probes,
                success_threshold,
            }
        },
    );
    maybe(table)
}

type Tables = (Option<RawRetry>, Option<RawBudget>, Option<RawBreaker>);

fn tables() -> impl Strategy<Value = Tables> {
    (retry(), budget(), breaker())
}

fn config_with(model: &Tables, tool: &Tables) -> RawConfig {
    let mut raw = parse(&format!("version = 1\n{MODEL}{TOOL}")).unwrap();
    (raw.models[0].retry, raw.models[0].budget, raw.models[0].breaker) = model.clone();
    (raw.tools[0].retry, raw.tools[0].budget, raw.tools[0].breaker) = tool.clone();
    raw
}

/// The keys written in a table, for "every error names a key the file wrote".
fn written_keys<T: serde::Serialize>(table: Option<&T>) -> Vec<String> {
    table.map_or_else(Vec::new, |t| {
        toml::Table::try_from(t).unwrap().keys().cloned().collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Validation accepts exactly what ballast-core accepts, keeps it as written, and blames written keys.
    #[test]
    fn validation_agrees_with_ballast_core(model in tables(), tool in tables()) {
        let raw = config_with(&model, &tool);
        let oracle = |t: &Tables| {
            Ok::<_, ()>((core_retry(t.0.as_ref())?, core_budget(t.1.as_ref())?, core_breaker(t.2.as_ref())?))
        };
        match (validate(&raw), oracle(&model), oracle(&tool)) {
            (Ok(config), Ok(m), Ok(t)) => {
                assert_core_accepts(&config);
                let (route, tool) = (&config.models[0], &config.tools[0]);
                prop_assert_eq!((route.retry, route.budget, route.breaker), m);
                prop_assert_eq!((tool.retry, tool.budget, tool.breaker), t);
            }
            (Err(errors), m, t) => {
                prop_assert!(m.is_err() || t.is_err(), "refused what ballast-core accepts: {}", errors);
                for error in errors.errors() {
                    let path = error.path().unwrap_or_default();
                    let (table, key) = path.rsplit_once('.').unwrap_or_default();
                    let (route, table) = table.split_once('.').unwrap_or_default();
                    let tables = if route == "models[0]" { &model } else { &tool };
                    let keys = match table {
                        "retry" => written_keys(tables.0.as_ref()),
                        "budget" => written_keys(tables.1.as_ref()),
                        "breaker" => written_keys(tables.2.as_ref()),
                        _ => Vec::new(),
                    };
                    prop_assert!(keys.iter().any(|k| k == key), "{} blames a key the file did not write", error);
                }
            }
            (Ok(_), m, t) => prop_assert!(false, "accepted what ballast-core refuses: {:?} {:?}", m, t),
        }
    }
}
