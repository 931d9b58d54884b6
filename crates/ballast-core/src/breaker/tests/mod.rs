//! Behaviour of the whole breaker: every rule of DESIGN.md's "Circuit breaker", late results, threads, and the
//! property that only the legal transitions ever happen. Shared helpers live here.

mod closed;
mod crowd;
mod half_open;
mod owned;
mod props;
mod threads;

use std::sync::Arc;
use std::time::Duration;

use super::*;
use BreakerState::{Closed, HalfOpen, Open};

const MS: Duration = Duration::from_millis(1);
const QUICK: Duration = Duration::from_millis(10);

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// A breaker with no jitter (exact open times) unless the builder sets one.
fn breaker(config: BreakerConfigBuilder) -> Arc<CircuitBreaker> {
    Arc::new(CircuitBreaker::seeded(config.build().unwrap(), Some(7)))
}

fn no_jitter() -> BreakerConfigBuilder {
    // And no spread: most tests make their calls at one instant.
    BreakerConfig::builder()
        .open_jitter(0.0)
        .consecutive_spread(Duration::ZERO)
}

/// One attempt at `now` that answers `result` quickly; panics if refused.
fn call(b: &Arc<CircuitBreaker>, result: CallResult, now: Instant) -> Option<Transition> {
    b.try_acquire(now).unwrap().record(result, QUICK, now)
}

/// Opens `b` with its consecutive trigger (`n` failures) at `now`.
fn trip(b: &Arc<CircuitBreaker>, now: Instant) {
    for _ in 0..b.config().consecutive_failures() {
        call(b, CallResult::Failure, now);
    }
    assert_eq!(b.state(now), Open);
}

/// A breaker with M probes and S successes, already half-open at `at(30_000)`.
fn half_open_breaker(m: u32, s: u32) -> (Arc<CircuitBreaker>, Instant) {
    let b = breaker(
        no_jitter()
            .consecutive_failures(1)
            .half_open_probes(m)
            .success_threshold(s),
    );
    trip(&b, at(0));
    let now = at(30_000);
    assert_eq!(b.state(now), HalfOpen);
    (b, now)
}
