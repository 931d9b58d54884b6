//! Through a route's deployments, in order, under one deadline: the fallback rule and the context rule.
//!
//! Each deployment gets one trip through its own stack (its retries, budget and breaker). After a trip that did
//! not succeed, the verdict (`judge`) is one of:
//! - **next deployment** — the deployment is failing or cannot serve now: its breaker is open, its retries are
//!   spent (attempts, budget, run allowance), it asked for a `Retry-After` too long for `max_retry_after` or for
//!   the deadline, its quota is spent (`insufficient_quota`: at once, never waited for — and the deployment is
//!   then passed over by every call for the `Retry-After` it gave, 60 s without one, while a later deployment
//!   can serve), it was throttled or shed at its admission, or the primary used up its share of the deadline. (The core's [`StopReason::moves_to_fallback`] is the rule for the stop reasons.)
//! - **truncate and resend** — a context-length error on a route with `on_overflow = "truncate"`: whole older
//!   turns are dropped and the same deployment is asked again (its attempts numbered after the first trip's).
//! - **the end** — anything else: a 4xx the next deployment would answer too, a deadline that cannot hold another
//!   attempt, a cancelled call. A context-length error moves on only with `on_overflow = "fallback"`.
//!
//! **The primary's share.** With more than one deployment, the first one's trip runs under a deadline
//! [`scope`](crate::context::scope) ending at `primary_share` of the time that remained when the call started, so a
//! primary that hangs on every attempt still leaves the fallbacks the rest. The layers fold the scope into the
//! effective deadline, so the primary's attempts are told (in `ballast-timeout-ms`) and cut at what the share
//! leaves them, and its retries stop when the share cannot hold another attempt; the scope is not the call's
//! deadline, so it is never offered to the call's run (whose later calls keep the whole deadline). A trip that
//! ended on the share's deadline moves on to the next deployment when the call's own deadline still holds an
//! attempt.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ballast_core::{DeadlineExceeded, ErrorCode, Instant, Refused, StopReason};
use bytes::Bytes;
use http::Response;

use super::api::Protocol;
use super::context::{ContextVerdict, classify, on_context_length};
use super::deployment::DeploymentClient;
use super::responses::StateRecords;
use super::{ProviderErrorKind, Truncation};
use ballast_config::ModelRoute;

use crate::client::{CallError, Core, Failure, Refusal};
use crate::context::shared;
use crate::outcome::{Trip, Verdict, write_verdict};
use crate::{Body, CallContext, Error, OutcomeReport, Report, clock};

/// What the report of a deployment passed over for its spent quota says.
const QUOTA_PASSED_OVER: &str = "passed over: this deployment answered insufficient_quota, and is skipped for the Retry-After it gave (60 s \
     without one, at most server.max_retry_after) while another deployment can serve";

/// A 2xx answer of deployment `index` (for a streamed call, its body is the stream).
#[derive(Debug)]
pub(super) struct Committed {
    pub(super) index: usize,
    pub(super) response: Response<Body>,
}

/// What was tried: a report per deployment tried (and its index in the route), and what truncation dropped.
#[derive(Debug, Default)]
pub(super) struct Tried {
    pub(super) reports: Vec<Report>,
    pub(super) indexes: Vec<usize>,
    /// The deployment whose trip gave the call's failure (its answer's tokens are spent there).
    pub(super) failed_at: Option<usize>,
    pub(super) truncated: Option<Truncation>,
    pub(super) started: Option<Instant>,
}

impl Tried {
    /// The report of deployment `index` (the last trip to it).
    pub(super) fn report_of(&self, index: usize) -> &Report {
        let place = (self.indexes.iter())
            .rposition(|&i| i == index)
            .expect("a deployment that answered was tried");
        &self.reports[place]
    }

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

/// What comes after a trip that did not succeed.
enum Then {
    NextDeployment,
    Resend,
    End,
}

/// Which deployments a call may go to, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Targets {
    /// Those that speak its API, in the route's order: the first is the primary, the others its fallbacks.
    Speaking(ballast_config::Api),
    /// This one only (by index), and no fallback: it keeps state the call refers to (a previous response).
    Pinned(usize),
}

/// A model route as its calls walk it: its settings, the client core (runs, deadlines, the body limit), its
/// deployments in fallback order, and where each kept response's state lives.
#[derive(Debug)]
pub(super) struct Route {
    pub(super) config: ModelRoute,
    pub(super) core: Core,
    pub(super) deployments: Vec<DeploymentClient>,
    /// Which deployment keeps which response's state.
    pub(super) states: Arc<dyn StateRecords>,
}

impl Route {
    /// The route's name (what callers put in `model`).
    pub(super) fn name(&self) -> &str {
        &self.config.name
    }

    /// A refusal of the route's, with nothing sent.
    pub(super) fn refused(&self, refusal: Refusal) -> CallError {
        CallError::Refused {
            target: self.name().to_owned(),
            refusal,
            report: Box::default(),
        }
    }

    /// The index of the deployment named `name` (`route[index] model`).
    pub(super) fn index_of(&self, name: &str) -> usize {
        (self.deployments.iter())
            .position(|d| d.name == name)
            .expect("an answer names a deployment of its route")
    }

    /// The deployments `targets` names, in order.
    pub(super) fn order(&self, targets: &Targets) -> Vec<usize> {
        match targets {
            Targets::Speaking(api) => (self.deployments.iter().enumerate())
                .filter(|(_, d)| d.speaks(*api))
                .map(|(index, _)| index)
                .collect(),
            Targets::Pinned(index) => vec![*index],
        }
    }

    /// Sends `request` through the deployments `targets` names, in order, until one answers 2xx or the verdict is
    /// the end.
    pub(super) async fn through_route<P: Protocol>(
        &self,
        mut request: P::Request,
        ctx: &CallContext,
        tried: &mut Tried,
        targets: &Targets,
    ) -> Result<Committed, Failure> {
        let deployments = &self.deployments;
        let order = self.order(targets);
        let started = clock::now();
        tried.started = Some(started);
        let share_until = (order.len() > 1).then(|| {
            let remaining = ctx.effective_deadline().remaining(started);
            started + remaining.mul_f64(self.config.primary_share)
        });
        let mut failure = Failure::Error(Error::Cancelled);
        for (place, &index) in order.iter().enumerate() {
            let deployment = &deployments[index];
            // A deployment whose quota is spent is passed while a later one is not (the last one standing is
            // asked: its quota may be back, and its answer says more than a refusal made up here).
            let report = Report::default();
            report.update(|r| r.target.clone_from(&deployment.name));
            tried.reports.push(report.clone());
            tried.indexes.push(index);
            if passed_over(deployments, &order, index, clock::now()) {
                report.refused_attempt(1, QUOTA_PASSED_OVER.to_owned());
                report.update(|r| r.code = Some(ErrorCode::UpstreamError));
                continue;
            }
            let mut ctx = ctx.clone();
            ctx.report = report;
            ctx.target = Some(Arc::clone(&deployment.target));
            let cut = if place == 0 { share_until } else { None };
            let mut attempts = 0;
            loop {
                if ctx.cancel.is_cancelled() {
                    let error = Error::Cancelled;
                    let code = error.code();
                    ctx.report.update(|r| r.code = Some(code));
                    return Err(Failure::Error(error));
                }
                let trip = self.trip::<P>(deployment, &request, &ctx, cut, attempts).await;
                attempts = trip.attempts;
                if trip.succeeded() {
                    let Ok(response) = trip.result else {
                        unreachable!("a trip that succeeded has an answer")
                    };
                    return Ok(Committed { index, response });
                }
                let stop = trip.stop;
                failure = Failure::of(trip.result);
                tried.failed_at = Some(index);
                match self.judge::<P>(deployment, &failure, stop, &mut request, tried) {
                    Then::Resend => {}
                    Then::NextDeployment => break,
                    Then::End => return Err(failure),
                }
            }
        }
        Err(failure)
    }

    /// One trip through `deployment`'s stack, under the primary's share when `cut` is set (module docs), its
    /// verdict written into the deployment's report.
    async fn trip<P: Protocol>(
        &self,
        deployment: &DeploymentClient,
        request: &P::Request,
        ctx: &CallContext,
        cut: Option<Instant>,
        attempts_before: u32,
    ) -> Trip {
        let started = clock::now();
        let trip = match self.body_for::<P>(deployment, request) {
            Ok(body) => {
                // Boxed: the layers above (the share's scope, the route's loop, a stream's commit scope) would
                // each hold a copy of its state otherwise, and move it whole (kilobytes) at every step.
                let mut headers = http::HeaderMap::new();
                P::headers(request, &mut headers);
                let endpoint = (P::API, P::PATH);
                let send = Box::pin(deployment.send(endpoint, body, headers, ctx, attempts_before));
                self.bounded(send, ctx, cut).await
            }
            Err(refused) => Trip::refused(refused),
        };
        judged(deployment, ctx, trip, started)
    }

    /// One trip to deployment `index` alone (a response it keeps): `method` on `uri` with no body, its verdict
    /// written into its report.
    pub(super) async fn state_trip(
        &self,
        index: usize,
        method: http::Method,
        uri: http::Uri,
        ctx: &CallContext,
        tried: &mut Tried,
    ) -> Result<Committed, Failure> {
        let deployment = &self.deployments[index];
        tried.started = Some(clock::now());
        let report = Report::default();
        report.update(|r| r.target.clone_from(&deployment.name));
        tried.reports.push(report.clone());
        tried.indexes.push(index);
        let mut ctx = ctx.clone();
        ctx.report = report;
        ctx.target = Some(Arc::clone(&deployment.target));
        let started = clock::now();
        let trip = (deployment.send_to(ballast_config::Api::Responses, method, uri, &ctx)).await;
        let trip = judged(deployment, &ctx, trip, started);
        tried.failed_at = Some(index);
        if trip.succeeded() {
            let Ok(response) = trip.result else {
                unreachable!("a trip that succeeded has an answer")
            };
            return Ok(Committed { index, response });
        }
        Err(Failure::of(trip.result))
    }

    /// The trip of `body` through `deployment`, under the primary's share when `cut` is set: a trip that ended on
    /// the share's deadline while the call's own deadline still holds an attempt ends with that deadline's error,
    /// which moves the call on to the next deployment.
    async fn bounded(
        &self,
        trip: impl Future<Output = Trip>,
        ctx: &CallContext,
        cut: Option<Instant>,
    ) -> Trip {
        let Some(cut) = cut else { return trip.await };
        let mut trip = shared(ctx.effective_deadline(), cut, trip).await;
        if !ended_on_deadline(&trip) {
            return trip;
        }
        let now = clock::now();
        // The call's own deadline (outside the share's scope).
        let deadline = ctx.effective_deadline();
        if deadline.attempt_timeout(Duration::MAX, now).is_err() {
            // Spent too: the trip's ending is the call's.
            return trip;
        }
        // What the call's deadline has left: enough for an attempt, the judge moves on.
        trip.result = Err(Error::DeadlineExceeded(DeadlineExceeded {
            remaining: deadline.remaining(now),
            reserve: deadline.reserve(),
            min_attempt: deadline.min_attempt(),
            refused: Refused::Attempt,
        }));
        trip
    }

    /// The request as `deployment` gets it: its model name, every other field as the caller sent it. Refused
    /// when over the server's `body_limit`.
    fn body_for<P: Protocol>(
        &self,
        deployment: &DeploymentClient,
        request: &P::Request,
    ) -> Result<Bytes, Error> {
        let mut request = request.clone();
        P::set_model(&mut request, &deployment.config.model);
        self.core.encode(&request)
    }

    /// What to do after a trip that did not succeed and stopped for `stop` (module docs).
    fn judge<P: Protocol>(
        &self,
        deployment: &DeploymentClient,
        failure: &Failure,
        stop: Option<StopReason>,
        request: &mut P::Request,
        tried: &mut Tried,
    ) -> Then {
        if let Failure::Answer(response) = failure {
            let error = classify::<P>(response);
            match on_context_length::<P>(&self.config, &error, request) {
                ContextVerdict::NotContextLength => {}
                ContextVerdict::Fallback => return Then::NextDeployment,
                ContextVerdict::Answer => return Then::End,
                ContextVerdict::Truncated(dropped) => {
                    tried.truncated = Some(match tried.truncated {
                        Some(before) => Truncation {
                            dropped_messages: before.dropped_messages + dropped.dropped_messages,
                            dropped_turns: before.dropped_turns + dropped.dropped_turns,
                        },
                        None => dropped,
                    });
                    return Then::Resend;
                }
            }
            // A spent quota, even when only the provider's own wording says so: no wait helps.
            if error.kind == ProviderErrorKind::InsufficientQuota {
                deployment.quota_spent(error.retry_after, clock::now());
                return Then::NextDeployment;
            }
        }
        // The one fallback rule; a deadline that still holds an attempt is the primary's share spent (`bounded`).
        let end = match failure {
            Failure::Answer(_) => Ok(()),
            Failure::Error(error) => Err(error),
        };
        let moves_on = crate::outcome::upstream_failing(end, stop.as_ref());
        if moves_on { Then::NextDeployment } else { Then::End }
    }
}

/// Whether deployment `index` is passed over at `now`: its quota is spent, and another deployment of the call's
/// `order` is not — or, when every one's is, another's skip ends sooner (that one alone is asked: its quota may
/// be back).
fn passed_over(deployments: &[DeploymentClient], order: &[usize], index: usize, now: Instant) -> bool {
    let Some(until) = deployments[index].quota_skipped_until(now) else {
        return false;
    };
    let skipped = |i: usize| deployments[i].quota_skipped_until(now);
    let others: Vec<Option<Instant>> = (order.iter())
        .filter(|&&i| i != index)
        .map(|&i| skipped(i))
        .collect();
    if others.iter().any(Option::is_none) {
        return true;
    }
    // Every deployment is skipped: only the first of those whose skip ends soonest is asked.
    let soonest = others.iter().flatten().min().copied();
    let earlier_equal = (order.iter())
        .take_while(|&&i| i != index)
        .any(|&i| skipped(i) == Some(until));
    soonest.is_some_and(|s| s < until) || earlier_equal
}

/// `trip` (to `deployment`, begun at `started`) with its verdict written into the call's report: its code, its
/// time, and what is left of the budget and the run's allowance.
fn judged(deployment: &DeploymentClient, ctx: &CallContext, trip: Trip, started: Instant) -> Trip {
    let took = clock::now().saturating_duration_since(started);
    let verdict = Verdict::of(ctx.kind, &trip);
    write_verdict(&verdict, ctx, deployment.upstream.budget_left());
    let failed = (!trip.succeeded()).then_some(ErrorCode::UpstreamError);
    ctx.report.update(|r| {
        r.code = verdict.code.or(failed);
        r.total = took;
    });
    trip
}

/// Whether a trip ended on its deadline: refused or dropped by it, or its retries stopped by it.
fn ended_on_deadline(trip: &Trip) -> bool {
    match &trip.result {
        Err(Error::DeadlineExceeded(_) | Error::Stopped(StopReason::Deadline(_))) => true,
        Err(_) => false,
        Ok(response) => !response.status().is_success() && matches!(trip.stop, Some(StopReason::Deadline(_))),
    }
}
