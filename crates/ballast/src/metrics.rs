//! The metrics of DESIGN.md "Observability", through the [`metrics`] facade: the library emits, the application
//! installs the exporter (Prometheus, StatsD, anything with a `metrics` recorder), and with none installed every
//! emission is a no-op.
//!
//! Who counts what:
//! - **the clients**, when a call ends, from its outcome report: `ballast_requests_total{route,target,outcome}`
//!   (`outcome`: `ok`, `fallback` — answered after a failure, by a fallback tool, a static response or a later
//!   deployment — or the stable error code), `ballast_request_duration_seconds{route}`,
//!   `ballast_overhead_seconds{route}` (the call's time minus its attempts' time: what Ballast itself added,
//!   queueing and backoff included), `ballast_fallbacks_total{route}` (calls answered by a fallback), `ballast_attempts_total{target}`, `ballast_breaker_state{target}` (0 closed, 1 half open, 2 open) and `ballast_deadline_exceeded_total{target}`;
//! - **the layers**, where they decide: `ballast_retries_total{target,reason}` (`reason`: what the retried
//!   attempt met — `timeout`, `transport_error`, `never_sent`, or its status), `ballast_retry_budget_exhausted_total{target}`,
//!   `ballast_throttled_total{target}` (the retry loop), `ballast_shed_total{target,priority,reason}` (admission),
//!   `ballast_idempotency_total{result}` (the idempotency layer: `claimed`, `replayed`, `conflict`, `mismatch`,
//!   `unknown`);
//! - **deferred operations**: `ballast_deferred_total{queue,outcome}` (`deferred`, `retried`, `completed`,
//!   `failed`, `expired`, `outcome_unknown`);
//! - **the runs**: `ballast_runs_evicted_total` (runs forgotten for room, `[run] max_runs`);
//! - **many instances**: `ballast_shared_state_reachable` (1 while runs and limits are shared),
//!   `ballast_limit_mode{target,mode}` and `ballast_limited_total{target,outcome}` (a deployment's account limits);
//! - **the model side**: `ballast_tokens_total{model,outcome}` (`answered`, or `failed`: tokens of attempts that
//!   failed after the upstream reported them, paid for too — reference/002).
//!
//! A client's handles are registered when the client is built, with the recorder installed then: install the
//! recorder first (as `metrics` asks of every library). The layers' labels come from the call's target.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use ballast_core::{AttemptOutcome, BreakerState, ErrorCode};
use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

use crate::OutcomeReport;

/// The label of a call or target whose name nobody gave (a layer used alone, without a deadline layer naming it).
const UNNAMED: &str = "unnamed";

/// The `outcome` labels of `ballast_requests_total`, in the order of [`CallMetrics::outcomes`].
const OUTCOMES: usize = 2 + ErrorCode::ALL.len();

/// A client's handles: per route, and per target its calls go to (a tool: itself; a model route: its
/// deployments).
#[derive(Debug)]
pub(crate) struct CallMetrics {
    seconds: Histogram,
    overhead: Histogram,
    /// Calls answered by a fallback (a later deployment, a fallback tool, a static response) after a failure.
    fallbacks: Counter,
    targets: Vec<TargetMetrics>,
}

#[derive(Debug)]
struct TargetMetrics {
    target: Arc<str>,
    /// `ok`, `fallback`, then each code of [`ErrorCode::ALL`].
    outcomes: [Counter; OUTCOMES],
    attempts: Counter,
    breaker: Gauge,
    /// The breaker state last set (`u8::MAX`: none yet): the gauge is set when it changes.
    breaker_seen: AtomicU8,
    deadline_exceeded: Counter,
}

impl TargetMetrics {
    fn new(route: &str, target: &str) -> Self {
        let outcome = |label: &'static str| counter!("ballast_requests_total", "route" => route.to_owned(), "target" => target.to_owned(), "outcome" => label);
        TargetMetrics {
            target: Arc::from(target),
            outcomes: std::array::from_fn(|i| match i {
                0 => outcome("ok"),
                1 => outcome("fallback"),
                i => outcome(ErrorCode::ALL[i - 2].as_str()),
            }),
            attempts: counter!("ballast_attempts_total", "target" => target.to_owned()),
            breaker: gauge!("ballast_breaker_state", "target" => target.to_owned()),
            breaker_seen: AtomicU8::new(u8::MAX),
            deadline_exceeded: counter!("ballast_deadline_exceeded_total", "target" => target.to_owned()),
        }
    }

    /// One report's attempts, breaker and deadline.
    fn observe(&self, report: &OutcomeReport) {
        self.attempts.increment(report.attempts.len() as u64);
        if let Some(state) = report.breaker {
            let value = match state {
                BreakerState::Closed => 0,
                BreakerState::HalfOpen => 1,
                BreakerState::Open => 2,
            };
            if self.breaker_seen.swap(value, Ordering::Relaxed) != value {
                self.breaker.set(f64::from(value));
            }
        }
        if report.code == Some(ErrorCode::DeadlineExceeded) {
            self.deadline_exceeded.increment(1);
        }
    }
}

impl CallMetrics {
    /// The handles of `route`, whose calls go to `targets` (the first is the route's own when no report names
    /// another).
    pub(crate) fn new(route: &str, targets: &[&str]) -> Self {
        let route_label = route.to_owned();
        CallMetrics {
            seconds: histogram!("ballast_request_duration_seconds", "route" => route_label.clone()),
            overhead: histogram!("ballast_overhead_seconds", "route" => route_label.clone()),
            fallbacks: counter!("ballast_fallbacks_total", "route" => route_label),
            targets: targets
                .iter()
                .map(|target| TargetMetrics::new(route, target))
                .collect(),
        }
    }

    /// Counts a call that ended with `report`: the report's own attempts and, when `nested` (a model route's
    /// later deployments), those of every report nested in it. A fallback tool counts its own call.
    pub(crate) fn observe(&self, report: &OutcomeReport, nested: bool) {
        let mut attempted = Duration::ZERO;
        let mut current = Some(report);
        while let Some(r) = current {
            if let Some(target) = self.target(&r.target) {
                target.observe(r);
            }
            attempted += r.attempts.iter().map(|a| a.duration).sum::<Duration>();
            current = if nested {
                r.fallback_report.as_deref()
            } else {
                None
            };
        }
        let answering = if nested { report.answering() } else { report };
        let outcome = match (report.code, answering.code) {
            (None, _) => 0,
            _ if report.answered_by_fallback() => 1,
            (_, None) if nested => 1,
            (Some(code), answering) => {
                let code = answering.unwrap_or(code);
                2 + ErrorCode::ALL.iter().position(|c| *c == code).unwrap_or(0)
            }
        };
        if let Some(target) = self.target(&answering.target).or(self.targets.first()) {
            target.outcomes[outcome].increment(1);
        }
        if outcome == 1 {
            self.fallbacks.increment(1);
        }
        self.seconds.record(report.total.as_secs_f64());
        self.overhead
            .record(report.total.saturating_sub(attempted).as_secs_f64());
    }

    fn target(&self, name: &str) -> Option<&TargetMetrics> {
        self.targets.iter().find(|t| &*t.target == name)
    }
}

/// The label of a call's target.
fn target_label(target: Option<&Arc<str>>) -> String {
    target.map_or(UNNAMED, |t| &**t).to_owned()
}

/// A retry of a call to `target` after an attempt that came to `outcome`.
pub(crate) fn retry(target: Option<&Arc<str>>, outcome: &AttemptOutcome) {
    let reason = match outcome {
        AttemptOutcome::NeverSent => "never_sent",
        AttemptOutcome::TransportError => "transport_error",
        AttemptOutcome::Timeout => "timeout",
        AttemptOutcome::Response(info) => status_label(info.status),
    };
    counter!("ballast_retries_total", "target" => target_label(target), "reason" => reason).increment(1);
}

/// A retry the budget of `target` refused.
pub(crate) fn budget_exhausted(target: Option<&Arc<str>>) {
    counter!("ballast_retry_budget_exhausted_total", "target" => target_label(target)).increment(1);
}

/// An attempt to `target` its adaptive throttle refused.
pub(crate) fn throttled(target: Option<&Arc<str>>) {
    counter!("ballast_throttled_total", "target" => target_label(target)).increment(1);
}

/// A call to `target` of class `priority` shed by admission for `reason`.
pub(crate) fn shed(target: Option<&Arc<str>>, priority: &'static str, reason: &'static str) {
    counter!("ballast_shed_total", "target" => target_label(target), "priority" => priority, "reason" => reason)
        .increment(1);
}

/// What the idempotency layer did with a keyed request.
#[cfg(feature = "idempotency")]
pub(crate) fn idempotency(result: &'static str) {
    counter!("ballast_idempotency_total", "result" => result).increment(1);
}

/// A deferred operation's step: `deferred` (queued by the idempotency layer), `retried` (queued again after an
/// attempt), or how it ended (`completed`, `failed`, `expired`, `outcome_unknown`).
pub(crate) fn deferred(queue: &str, outcome: &'static str) {
    counter!("ballast_deferred_total", "queue" => queue.to_owned(), "outcome" => outcome).increment(1);
}

/// Tokens a model deployment reported, spent on the answer or on a failed attempt.
pub(crate) fn tokens(model: &str, answered: bool, tokens: u64) {
    let outcome = if answered { "answered" } else { "failed" };
    counter!("ballast_tokens_total", "model" => model.to_owned(), "outcome" => outcome).increment(tokens);
}

/// The statuses a retry may follow, named in `ballast_retries_total`'s `reason`; any other by its class.
const RETRIED_STATUSES: [(u16, &str); 9] = [
    (408, "408"),
    (409, "409"),
    (425, "425"),
    (429, "429"),
    (500, "500"),
    (502, "502"),
    (503, "503"),
    (504, "504"),
    (529, "529"),
];

/// A status as a label: the retryable ones by name, anything else by class.
fn status_label(status: u16) -> &'static str {
    RETRIED_STATUSES
        .iter()
        .find(|(named, _)| *named == status)
        .map_or_else(
            || match status / 100 {
                4 => "4xx",
                5 => "5xx",
                _ => "other",
            },
            |(_, label)| label,
        )
}

/// Runs the registry forgot for room (`ballast_runs_evicted_total`).
pub(crate) fn runs_evicted(count: u64) {
    counter!("ballast_runs_evicted_total").increment(count);
}

/// `ballast_shared_state_reachable`: 1 while runs and limits are decided in the shared store, 0 while this
/// instance works without it (runs from each call's headers, limits by `on_store_loss`).
#[cfg(feature = "idempotency")]
pub(crate) fn shared_state_reachable(reachable: bool) {
    gauge!("ballast_shared_state_reachable").set(if reachable { 1.0 } else { 0.0 });
}

/// The modes of a deployment's limits, as `ballast_limit_mode`'s `mode` label names them (`limit::LimitMode`).
pub(crate) const LIMIT_MODES: [&str; 4] = ["shared", "local", "share", "refuse"];

/// `ballast_limit_mode{target,mode}`: 1 for the mode a deployment's limits are in now (`shared`, `share`,
/// `refuse`, `local`), 0 for the others.
pub(crate) fn limit_mode(target: &str, mode: &'static str) {
    for each in LIMIT_MODES {
        gauge!("ballast_limit_mode", "target" => target.to_owned(), "mode" => each).set(if each == mode {
            1.0
        } else {
            0.0
        });
    }
}

/// `ballast_limit_unshared_total{target,mode}`: attempts a deployment's limits decided without the shared store
/// (lost, or slower than `sharing::PATIENCE` this once), as `on_store_loss` says: `share` or `refuse`.
#[cfg(feature = "idempotency")]
pub(crate) fn limit_unshared(target: &str, mode: &'static str) {
    counter!("ballast_limit_unshared_total", "target" => target.to_owned(), "mode" => mode).increment(1);
}

/// `ballast_limited_total{target,outcome}`: attempts a deployment's limits held back (`waited`) or refused
/// (`refused`).
pub(crate) fn limited(target: &str, outcome: &'static str) {
    counter!("ballast_limited_total", "target" => target.to_owned(), "outcome" => outcome).increment(1);
}
