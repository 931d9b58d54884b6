//! Through a route's deployments, in order, under one deadline: the fallback rule and the context rule.
//!
//! Each deployment gets one trip through its own stack (its retries, budget and breaker). After a trip that did
//! not succeed, the verdict (`judge`) is one of:
//! - **next deployment** — the deployment is failing or cannot serve now: its breaker is open, its retries are
//!   spent (attempts, budget, run allowance), it asked for a `Retry-After` too long for `max_retry_after` or for
//!   the deadline, its quota is spent (`insufficient_quota`: at once, never waited for), or the primary used up
//!   its share of the deadline. (The core's [`StopReason::moves_to_fallback`] is the rule for the stop reasons.)
//! - **truncate and resend** — a context-length error on a route with `on_overflow = "truncate"`: whole older
//!   turns are dropped and the same deployment is asked again (its attempts numbered after the first trip's).
//! - **the end** — anything else: a 4xx the next deployment would answer too, a deadline that cannot hold another
//!   attempt, a cancelled call. A context-length error moves on only with `on_overflow = "fallback"`.
//!
//! **The primary's share.** With more than one deployment, the first one's trip runs under a deadline
//! [`scope`](crate::scope) ending at `primary_share` of the time that remained when the call started, so a
//! primary that hangs on every attempt still leaves the fallbacks the rest. The layers fold the scope into the
//! effective deadline, so the primary's attempts are told (in `ballast-timeout-ms`) and cut at what the share
//! leaves them, and its retries stop when the share cannot hold another attempt; the scope is not the call's
//! deadline, so it is never offered to the call's run (whose later calls keep the whole deadline). A trip that
//! ended on the share's deadline moves on to the next deployment when the call's own deadline still holds an
//! attempt.

use std::time::Duration;

use ballast_core::{DeadlineExceeded, ErrorCode, Instant, Refused, StopReason};
use bytes::Bytes;
use http::Response;

use super::client::ChatClient;
use super::context::{ContextVerdict, classify, on_context_length};
use super::deployment::DeploymentClient;
use super::transport::StreamHandoff;
use super::{ChatRequest, ProviderErrorKind, Truncation};
use crate::{AttemptResult, CallContext, Error, OutcomeReport, Report, clock, scope};

/// A 2xx answer of deployment `index`.
#[derive(Debug)]
pub(super) struct Committed {
    pub(super) index: usize,
    pub(super) response: Response<Bytes>,
    pub(super) handoff: Option<StreamHandoff>,
}

/// How the last trip ended, when no deployment answered 2xx.
#[derive(Debug)]
pub(super) enum Failure {
    /// The upstream's own error answer.
    Answer(Response<Bytes>),
    /// No answer.
    Error(Error),
}

/// What was tried: a report per deployment tried, and what truncation dropped.
#[derive(Debug, Default)]
pub(super) struct Tried {
    pub(super) reports: Vec<Report>,
    pub(super) truncated: Option<Truncation>,
    pub(super) started: Option<Instant>,
}

impl Tried {
    /// The call's report: the first deployment's, each next one's nested in `fallback_report`; the total is the
    /// whole call's.
    pub(super) fn report(&self) -> OutcomeReport {
        let mut next: Option<OutcomeReport> = None;
        for report in self.reports.iter().rev() {
            let mut snapshot = report.snapshot();
            if let Some(after) = next.take() {
                snapshot.fallback = Some(after.target.clone());
                snapshot.fallback_report = Some(Box::new(after));
            }
            next = Some(snapshot);
        }
        let mut report = next.unwrap_or_default();
        if let Some(started) = self.started {
            report.total = clock::now().saturating_duration_since(started);
        }
        report
    }
}

/// After a trip that did not succeed.
enum Verdict {
    Next,
    Resend,
    End,
}

impl ChatClient {
    /// Sends `request` through the deployments in order until one answers 2xx or the verdict is the end.
    pub(super) async fn through_route(
        &self,
        mut request: ChatRequest,
        ctx: &CallContext,
        streaming: bool,
        tried: &mut Tried,
    ) -> Result<Committed, Failure> {
        let deployments = &self.inner.deployments;
        let started = clock::now();
        tried.started = Some(started);
        let share_until = (deployments.len() > 1).then(|| {
            let remaining = ctx.effective_deadline().remaining(started);
            started + remaining.mul_f64(self.inner.route.primary_share)
        });
        let mut failure = Failure::Error(Error::Cancelled);
        for (index, deployment) in deployments.iter().enumerate() {
            let report = Report::default();
            report.update(|r| r.target = deployment.name.clone());
            tried.reports.push(report.clone());
            let mut ctx = ctx.clone();
            ctx.report = report;
            let cut = if index == 0 { share_until } else { None };
            loop {
                if ctx.cancel.is_cancelled() {
                    return Err(Failure::Error(Error::Cancelled));
                }
                let handoff = streaming.then(StreamHandoff::default);
                let result = self.trip(deployment, &request, &ctx, cut, handoff.as_ref()).await;
                let response = match result {
                    Ok(response) if response.status().is_success() => {
                        return Ok(Committed {
                            index,
                            response,
                            handoff,
                        });
                    }
                    Ok(response) => Failure::Answer(response),
                    Err(error) => Failure::Error(error),
                };
                failure = response;
                match self.judge(&failure, &ctx, &mut request, tried) {
                    Verdict::Resend => {}
                    Verdict::Next => break,
                    Verdict::End => return Err(failure),
                }
            }
        }
        Err(failure)
    }

    /// One trip through `deployment`'s stack, under the primary's share when `cut` is set (module docs).
    async fn trip(
        &self,
        deployment: &DeploymentClient,
        request: &ChatRequest,
        ctx: &CallContext,
        cut: Option<Instant>,
        handoff: Option<&StreamHandoff>,
    ) -> Result<Response<Bytes>, Error> {
        let body = self.body_for(deployment, request)?;
        let before = ctx.report.read(|r| r.attempts.len());
        let before = u32::try_from(before).unwrap_or(u32::MAX);
        let trip = deployment.send(body, ctx, before, handoff);
        let Some(cut) = cut else { return trip.await };
        let started = clock::now();
        let share = ctx.effective_deadline().shorten_to(cut);
        let result = scope(share, trip).await;
        if !ended_on_deadline(&result, &ctx.report) {
            return result;
        }
        let now = clock::now();
        // The call's own deadline (outside the share's scope).
        let deadline = ctx.effective_deadline();
        if deadline.attempt_timeout(Duration::MAX, now).is_err() {
            // Spent too: the trip's ending is the call's.
            return result;
        }
        record_share_spent(&ctx.report, now.saturating_duration_since(started));
        // What the call's deadline has left: enough for an attempt, the judge moves on.
        Err(Error::DeadlineExceeded(DeadlineExceeded {
            remaining: deadline.remaining(now),
            reserve: deadline.reserve(),
            min_attempt: deadline.min_attempt(),
            refused: Refused::Attempt,
        }))
    }

    /// The request as `deployment` gets it: its model name, every other field as the caller sent it. Refused
    /// when over the server's `body_limit`.
    fn body_for(&self, deployment: &DeploymentClient, request: &ChatRequest) -> Result<Bytes, Error> {
        let mut request = request.clone();
        request.model.clone_from(&deployment.config.model);
        let body = serde_json::to_vec(&request).map_err(|e| Error::transport(false, e))?;
        let limit = self.inner.server.body_limit;
        if u64::try_from(body.len()).unwrap_or(u64::MAX) > limit {
            return Err(Error::BodyTooLarge {
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            });
        }
        Ok(Bytes::from(body))
    }

    /// What to do after a trip that did not succeed (module docs).
    fn judge(
        &self,
        failure: &Failure,
        ctx: &CallContext,
        request: &mut ChatRequest,
        tried: &mut Tried,
    ) -> Verdict {
        let stop = ctx.report.read(|r| r.stop);
        if let Failure::Answer(response) = failure {
            let error = classify(response);
            match on_context_length(&self.inner.route, &error, request) {
                ContextVerdict::NotContextLength => {}
                ContextVerdict::Fallback => return Verdict::Next,
                ContextVerdict::Answer => return Verdict::End,
                ContextVerdict::Truncated(dropped) => {
                    tried.truncated = Some(match tried.truncated {
                        Some(before) => Truncation {
                            dropped_messages: before.dropped_messages + dropped.dropped_messages,
                            dropped_turns: before.dropped_turns + dropped.dropped_turns,
                        },
                        None => dropped,
                    });
                    return Verdict::Resend;
                }
            }
            // A spent quota, even when only the provider's own wording says so: no wait helps.
            if error.kind == ProviderErrorKind::InsufficientQuota {
                return Verdict::Next;
            }
        }
        let moves_on = match failure {
            Failure::Answer(_) => stop.is_some_and(|s| s.moves_to_fallback()),
            Failure::Error(Error::CircuitOpen { .. } | Error::Overloaded { .. }) => true,
            Failure::Error(Error::Stopped(reason)) => reason.moves_to_fallback(),
            // The primary's share spent while the call's deadline still holds an attempt (`trip`).
            Failure::Error(Error::DeadlineExceeded(exceeded)) => exceeded.attempt_fits(),
            Failure::Error(_) => false,
        };
        if moves_on { Verdict::Next } else { Verdict::End }
    }
}

/// Whether a trip ended on its deadline: refused or dropped by it, or its retries stopped by it.
fn ended_on_deadline(result: &Result<Response<Bytes>, Error>, report: &Report) -> bool {
    match result {
        Err(Error::DeadlineExceeded(_) | Error::Stopped(StopReason::Deadline(_))) => true,
        Err(_) => false,
        Ok(response) => {
            !response.status().is_success()
                && report.read(|r| matches!(r.stop, Some(StopReason::Deadline(_))))
        }
    }
}

/// Marks the trip's unfinished attempts as cut at the primary's share, and the deployment's code.
fn record_share_spent(report: &Report, took: Duration) {
    report.update(|r| {
        r.total = took;
        for attempt in &mut r.attempts {
            if attempt.result == AttemptResult::Pending {
                attempt.result =
                    AttemptResult::Error("cut: the primary's share of the deadline is spent".into());
                attempt.sent = true;
            }
        }
        r.code = Some(ErrorCode::DeadlineExceeded);
    });
}
