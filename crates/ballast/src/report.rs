//! The outcome report: what happened to one call, attempt by attempt.
//!
//! Why: "it failed" is not enough at 2 a.m. The report says each attempt's status or error, how long it took and
//! whether it was sent; the total time; whether the answer was a replay; the breaker's state and the budget
//! left; why the call stopped, with its stable code; and — the line that matters for refunds — whether a side
//! effect may have happened (`outcome_unknown`). It is the user's record, never a channel between layers: each
//! layer writes into the shared [`Report`] only what it did — the attempt layer each attempt's line (the one place
//! that sees every attempt end, also one that finishes after its caller left: recorded too, marked
//! `background`), the breaker its state and the attempts it refused, the edge of the stack (a client, or the
//! outermost tower layer) the verdict from the values the layers returned — and no layer reads it to decide
//! anything. The caller reads a snapshot ([`OutcomeReport`]) when the call ends.
//!
//! When a fallback answers, the report stays the report of the call that was made — its attempts, key, stop
//! reason and code, since one of those attempts may have acted — and says who answered (`fallback`) and, for a
//! fallback tool, what that tool did (`fallback_report`): nothing the primary did disappears behind the answer.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast_core::{BreakerState, ErrorCode, StopReason};
use serde::Serialize;

/// How one attempt ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptResult {
    /// The upstream answered with this status.
    Status(u16),
    /// No answer: the error's short description (`timeout`, `never sent: connection refused`, ...).
    Error(String),
    /// Refused before it was handed to the transport — by the breaker, the throttle, or a deadline that could
    /// not hold it — with why: numbered, never sent, not an attempt the upstream could see.
    Refused(String),
    /// Still running in the background when the report was read.
    Pending,
}

/// One attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// 1-based attempt number.
    pub number: u32,
    /// How it ended.
    pub result: AttemptResult,
    /// How long it took.
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
    /// Whether the request may have reached the upstream.
    pub sent: bool,
    /// Whether it finished after the caller had gone (a sent side-effecting attempt runs to its timeout).
    pub background: bool,
    /// When it started, on the clock's timeline ([`clock::now`](crate::clock::now)); `None` for an attempt
    /// refused before it started. With the caller's own reading at the call's start, where the attempt sits in
    /// the call: what a trace's span of the attempt is drawn from.
    #[serde(skip)]
    pub started: Option<ballast_core::Instant>,
    /// The parent id it sent upstream in `traceparent` (`None` when it sent no trace): the id of the attempt's
    /// span in a trace, so that the upstream's own spans hang under it.
    #[serde(skip)]
    pub span_id: Option<u64>,
}

/// Tokens a model upstream reported in `usage`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenUsage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the answer.
    pub completion_tokens: u64,
    /// All tokens (as the upstream reported them, else the sum).
    pub total_tokens: u64,
}

impl TokenUsage {
    /// The sum of two usages.
    pub fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: self.prompt_tokens.saturating_add(other.prompt_tokens),
            completion_tokens: self.completion_tokens.saturating_add(other.completion_tokens),
            total_tokens: self.total_tokens.saturating_add(other.total_tokens),
        }
    }
}

/// The tokens of a model call, by what became of them: spent on the answer the caller got, or on attempts that
/// failed after the upstream reported them (a stream cut after its usage chunk) — those are paid for too
/// (reference/002), and `ballast_tokens_total{outcome}` counts both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Tokens of the answer the caller got.
    pub answered: TokenUsage,
    /// Tokens of attempts that failed after the upstream reported their usage.
    pub failed: TokenUsage,
}

/// What happened to one call.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OutcomeReport {
    /// The tool or model route.
    pub target: String,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptRecord>,
    /// Total time of the call.
    #[serde(rename = "total_ms", serialize_with = "millis")]
    pub total: Duration,
    /// Whether the answer was the upstream's stored answer to an earlier attempt (`Idempotent-Replayed`).
    pub replayed: bool,
    /// The `Idempotency-Key` every attempt carried, for side-effecting calls.
    pub idempotency_key: Option<String>,
    /// The breaker's state after the call.
    #[serde(serialize_with = "breaker_state")]
    pub breaker: Option<BreakerState>,
    /// Retries the upstream's budget could still give after the call.
    pub budget_left: Option<u64>,
    /// Retries the run could still give after the call (when the call belongs to a run).
    pub run_allowance_left: Option<u32>,
    /// Why the call stopped, when it did not succeed.
    #[serde(serialize_with = "stop_reason")]
    pub stop: Option<StopReason>,
    /// The stable error code, when the call did not succeed (a fallback may still have answered; see
    /// [`answered_by_fallback`](Self::answered_by_fallback)).
    #[serde(serialize_with = "error_code")]
    pub code: Option<ErrorCode>,
    /// A side effect may or may not have happened (here or in the fallback): check before doing it again.
    pub outcome_unknown: bool,
    /// The fallback the call went to after failing (`static response` or a tool's name; for a model call, the
    /// next deployment's name), if it did.
    pub fallback: Option<String>,
    /// What the fallback tool did, when the call went to one (a static response has no report); for a model
    /// call, what the next deployment did.
    pub fallback_report: Option<Box<OutcomeReport>>,
    /// Tokens the upstream reported for this call's attempts (model calls; `None` when it reported none).
    pub tokens: Option<Tokens>,
}

impl OutcomeReport {
    /// The report of the call whose answer was returned: the last fallback's (a model route's last deployment
    /// tried, a fallback tool), else this one.
    pub fn answering(&self) -> &OutcomeReport {
        self.fallback_report
            .as_deref()
            .map_or(self, OutcomeReport::answering)
    }

    /// Why the call that gave the final answer stopped (`None` when it succeeded): what a caller usually means by
    /// "the call's stop reason", however many fallbacks or deployments it went through.
    pub fn stop_reason(&self) -> Option<&StopReason> {
        self.answering().stop.as_ref()
    }

    /// The attempts handed to the transport (a connection refused included); those the breaker, the throttle or
    /// the deadline refused before sending are not counted. What the gateway's `ballast-attempts` says.
    pub fn attempts_made(&self) -> usize {
        self.attempts
            .iter()
            .filter(|a| !matches!(a.result, AttemptResult::Refused(_)))
            .count()
    }

    /// Whether the answer came from the fallback: a static response, or a fallback tool that succeeded (itself or
    /// through its own fallback).
    pub fn answered_by_fallback(&self) -> bool {
        self.fallback.is_some()
            && self
                .fallback_report
                .as_deref()
                .is_none_or(|r| r.code.is_none() || r.answered_by_fallback())
    }
}

/// The shared, writable report of one call: cheap to clone, written by the layers.
#[derive(Clone, Debug, Default)]
pub struct Report(Arc<Mutex<OutcomeReport>>);

impl Report {
    /// Changes the report: for a layer of your own, to record what it did (Ballast's layers record their
    /// attempts through the crate's own methods; none of them reads the report to decide).
    pub fn update(&self, change: impl FnOnce(&mut OutcomeReport)) {
        change(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Records an attempt that has started at `started`, sending `span_id` upstream as its trace's parent id;
    /// returns its index for [`Report::finish_attempt`].
    pub(crate) fn start_attempt(
        &self,
        number: u32,
        started: ballast_core::Instant,
        span_id: Option<u64>,
    ) -> usize {
        let mut report = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        report.attempts.push(AttemptRecord {
            number,
            result: AttemptResult::Pending,
            duration: Duration::ZERO,
            sent: false,
            background: false,
            started: Some(started),
            span_id,
        });
        report.attempts.len() - 1
    }

    /// Records attempt `number`, refused before it was sent (by the breaker, or a deadline that could not hold
    /// it), with why.
    pub(crate) fn refused_attempt(&self, number: u32, why: String) {
        self.update(|r| {
            r.attempts.push(AttemptRecord {
                number,
                result: AttemptResult::Refused(why),
                duration: Duration::ZERO,
                sent: false,
                background: false,
                started: None,
                span_id: None,
            });
        });
    }

    /// Records how the attempt at `index` ended.
    pub(crate) fn finish_attempt(&self, index: usize, result: AttemptResult, duration: Duration, sent: bool) {
        self.update(|r| {
            if let Some(attempt) = r.attempts.get_mut(index) {
                attempt.result = result;
                attempt.duration = duration;
                attempt.sent = sent;
            }
        });
    }

    /// Marks the attempt at `index` as finishing after the caller left.
    pub(crate) fn mark_background(&self, index: usize) {
        self.update(|r| {
            if let Some(attempt) = r.attempts.get_mut(index) {
                attempt.background = true;
            }
        });
    }

    /// Records why a call failed — its code and, when it is one, its stop reason — unless the report holds a
    /// failure already: what the deadline layer writes, so that a context reused for the steps of one agent
    /// request keeps the step that failed, not the later steps its failure left no time for. (The verdict of a
    /// retry layer or a client on the call it ran replaces it: theirs is the whole call's.)
    pub(crate) fn note_failure(&self, code: ErrorCode, stop: Option<StopReason>) {
        self.update(|r| {
            if r.code.is_none() {
                r.code = Some(code);
            }
            if r.stop.is_none() {
                r.stop = stop;
            }
        });
    }

    /// Reads the report without copying it.
    pub fn read<T>(&self, read: impl FnOnce(&OutcomeReport) -> T) -> T {
        read(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The report as it is now, taken rather than copied when no one else holds it (else a copy).
    pub(crate) fn into_snapshot(self) -> OutcomeReport {
        match Arc::try_unwrap(self.0) {
            Ok(report) => report.into_inner().unwrap_or_else(PoisonError::into_inner),
            Err(shared) => Report(shared).snapshot(),
        }
    }

    /// A copy of the report as it is now.
    pub fn snapshot(&self) -> OutcomeReport {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl fmt::Display for OutcomeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_report(f, self, "")
    }
}

/// The verdict on the first line: what the caller got.
fn verdict(report: &OutcomeReport) -> String {
    match (&report.fallback, report.code) {
        _ if report.outcome_unknown => "OUTCOME UNKNOWN".to_owned(),
        (Some(fallback), code) if report.answered_by_fallback() => match code {
            Some(code) => format!("answered by fallback {fallback} (failed here: {code})"),
            None => format!("answered by fallback {fallback}"),
        },
        (Some(fallback), Some(code)) => format!("failed ({code}); fallback {fallback} failed too"),
        (None, Some(code)) => format!("failed ({code})"),
        (_, None) => "ok".to_owned(),
    }
}

/// Writes `report` with every line after the first indented by `indent` and two spaces; a fallback tool's report
/// follows, indented once more.
fn write_report(f: &mut fmt::Formatter<'_>, report: &OutcomeReport, indent: &str) -> fmt::Result {
    let verdict = verdict(report);
    write!(
        f,
        "{}: {verdict} in {} ms",
        report.target,
        report.total.as_millis()
    )?;
    if report.replayed {
        f.write_str(", replayed")?;
    }
    for a in &report.attempts {
        let result = match &a.result {
            AttemptResult::Status(status) => status.to_string(),
            AttemptResult::Error(error) => error.clone(),
            AttemptResult::Refused(why) => why.clone(),
            AttemptResult::Pending => "pending".to_owned(),
        };
        let sent = if a.sent { "sent" } else { "not sent" };
        let background = if a.background {
            ", finished after the caller left"
        } else {
            ""
        };
        write!(
            f,
            "\n{indent}  attempt {}: {result} after {} ms ({sent}{background})",
            a.number,
            a.duration.as_millis()
        )?;
    }
    if let Some(key) = &report.idempotency_key {
        write!(f, "\n{indent}  idempotency key: {key}")?;
    }
    if let Some(stop) = &report.stop {
        write!(f, "\n{indent}  stopped: {stop}")?;
    }
    if let Some(state) = report.breaker {
        write!(f, "\n{indent}  breaker: {}", state.as_str())?;
    }
    if let Some(left) = report.budget_left {
        write!(f, "\n{indent}  retry budget left: {left}")?;
    }
    if let Some(left) = report.run_allowance_left {
        write!(f, "\n{indent}  run retries left: {left}")?;
    }
    if let Some(tokens) = &report.tokens {
        let a = tokens.answered;
        write!(
            f,
            "\n{indent}  tokens: {} answered ({} prompt + {} completion), {} on failed attempts",
            a.total_tokens, a.prompt_tokens, a.completion_tokens, tokens.failed.total_tokens
        )?;
    }
    if let Some(fallback) = &report.fallback_report {
        write!(f, "\n{indent}  fallback ")?;
        write_report(f, fallback, &format!("{indent}  "))?;
    }
    Ok(())
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn breaker_state<S: serde::Serializer>(state: &Option<BreakerState>, s: S) -> Result<S::Ok, S::Error> {
    match state {
        Some(state) => s.serialize_str(state.as_str()),
        None => s.serialize_none(),
    }
}

fn stop_reason<S: serde::Serializer>(reason: &Option<StopReason>, s: S) -> Result<S::Ok, S::Error> {
    match reason {
        Some(reason) => s.serialize_str(&reason.to_string()),
        None => s.serialize_none(),
    }
}

fn error_code<S: serde::Serializer>(code: &Option<ErrorCode>, s: S) -> Result<S::Ok, S::Error> {
    match code {
        Some(code) => s.serialize_str(code.as_str()),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_recorded_and_printed() {
        let report = Report::default();
        report.update(|r| r.target = "create_refund".into());
        let first = report.start_attempt(1, ballast_core::Instant::default(), None);
        report.finish_attempt(first, AttemptResult::Status(503), Duration::from_millis(40), true);
        let second = report.start_attempt(2, ballast_core::Instant::default(), Some(7));
        report.finish_attempt(
            second,
            AttemptResult::Error("timeout".into()),
            Duration::from_secs(2),
            true,
        );
        report.mark_background(second);
        report.update(|r| {
            r.outcome_unknown = true;
            r.code = Some(ErrorCode::OutcomeUnknown);
        });
        let snapshot = report.snapshot();
        assert_eq!(snapshot.attempts.len(), 2);
        let text = snapshot.to_string();
        assert!(text.starts_with("create_refund: OUTCOME UNKNOWN"), "{text}");
        assert!(text.contains("attempt 1: 503 after 40 ms (sent)"), "{text}");
        assert!(
            text.contains("attempt 2: timeout after 2000 ms (sent, finished after the caller left)"),
            "{text}"
        );
        let json = serde_json::to_value(&snapshot).unwrap();
        assert_eq!(json["attempts"][0]["result"]["status"], 503);
        assert_eq!(json["code"], "outcome_unknown");
    }

    #[test]
    fn a_fallback_answer_reads_as_answered_with_both_calls_printed() {
        let failed_attempt = AttemptRecord {
            number: 1,
            result: AttemptResult::Refused("circuit open".into()),
            duration: Duration::ZERO,
            sent: false,
            background: false,
            started: None,
            span_id: None,
        };
        let fallback = OutcomeReport {
            target: "process_payment".into(),
            attempts: vec![AttemptRecord {
                result: AttemptResult::Status(200),
                sent: true,
                ..failed_attempt.clone()
            }],
            ..OutcomeReport::default()
        };
        let mut report = OutcomeReport {
            target: "create_refund".into(),
            attempts: vec![failed_attempt],
            code: Some(ErrorCode::CircuitOpen),
            fallback: Some("process_payment".into()),
            fallback_report: Some(Box::new(fallback)),
            ..OutcomeReport::default()
        };
        assert!(report.answered_by_fallback());
        let text = report.to_string();
        assert!(
            text.starts_with(
                "create_refund: answered by fallback process_payment (failed here: circuit_open)"
            ),
            "{text}"
        );
        assert!(
            text.contains("\n  attempt 1: circuit open after 0 ms (not sent)"),
            "{text}"
        );
        assert!(
            text.contains("\n  fallback process_payment: ok in 0 ms\n    attempt 1: 200"),
            "{text}"
        );

        if let Some(fallback) = report.fallback_report.as_deref_mut() {
            fallback.code = Some(ErrorCode::UpstreamError);
        }
        assert!(!report.answered_by_fallback());
        let text = report.to_string();
        assert!(
            text.starts_with("create_refund: failed (circuit_open); fallback process_payment failed too"),
            "{text}"
        );

        let static_answer = OutcomeReport {
            code: Some(ErrorCode::RetryBudgetExhausted),
            fallback: Some("static response".into()),
            ..OutcomeReport::default()
        };
        assert!(static_answer.answered_by_fallback());
        assert!(!static_answer.to_string().contains(": failed"), "{static_answer}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["fallback_report"]["target"], "process_payment");
    }
}
