//! One logical call: attempts, decisions, sleeps — and the [`Trip`] it comes back with.

use std::sync::Arc;
use std::time::Duration;

use std::task::Poll;

use ballast_core::{
    AttemptOutcome, CallState, Deadline, DeadlineExceeded, Instant, Refused, RetryBudget, RetryDecision,
    StopReason,
};
use bytes::Bytes;
use futures::future::poll_fn;
use http::{HeaderMap, Method, Request, Response};
use tower::Service;

use super::poll::Polling;
use super::{Shared, classify_response};
use crate::outcome::{Reach, Trip, stop_of};
use crate::{AttemptNumber, Body, CallContext, Cancel, Error, Overload, Run, clock, current_deadline};

/// The deadline of a call with no [`CallContext`] and no enclosing deadline scope: DESIGN.md's default
/// `max_timeout`, the longest deadline Ballast accepts from anyone.
const DEADLINE_WITHOUT_CONTEXT: Duration = Duration::from_secs(300);

/// Runs one logical call of `ctx` through `inner`, attempt after attempt, as the policy decides.
pub(crate) async fn run<S, B>(
    shared: &Shared,
    mut inner: S,
    request: Request<Bytes>,
    ctx: &CallContext,
    polling: Option<Polling>,
) -> Trip
where
    S: Service<Request<Bytes>, Response = Response<B>, Error = Error>,
    B: Into<Body>,
{
    let mut state = CallState::new(ctx.kind, ctx.effective_deadline()).with_retries_here(ctx.retries_here);
    let mut made = Made::default();
    // The retry paid for by the last decision, until its attempt goes out.
    let mut paid: Option<PaidRetry> = None;
    // The last attempt's result while its retry waits: what the call ends with if the throttle refuses the retry.
    // Boxed: only a retried call has one, and inline it would size every call's future (past the allocator's
    // small-size cache, which costs every call about a thousand instructions).
    let mut last: Option<Box<Result<Response<Body>, Error>>> = None;
    loop {
        if ctx.cancel.is_cancelled() {
            drop(paid.take());
            return made.ended(End::Rejected(Error::Cancelled));
        }
        // Nothing is sent until the service below is ready: the wait is this loop's, bounded by the deadline and
        // the caller's cancellation. Refused or cancelled, the retry never went out.
        if let Err(refused) = ready(&mut inner, ctx).await {
            drop(paid.take());
            return made.ended(End::Rejected(refused));
        }
        if let Some(paid) = paid.as_mut() {
            // Handed below: from here on the retry stays spent, even if the call's future is dropped mid-way.
            paid.handed_below = true;
        }
        let number = Polling::number(polling, state.next_attempt());
        let result = inner
            .call(attempt_request(&request, number))
            .await
            .map(|response| response.map(Into::into));
        let now = clock::now();
        let (outcome, result) = match result {
            Ok(response) => {
                let info = classify_response(&response);
                made.attempt(number, Reach::of_answer(ctx.kind, &info));
                (AttemptOutcome::Response(info), Ok(response))
            }
            Err(error) if error.attempt_outcome().is_some() => {
                made.attempt(number, Reach::of_error(&error));
                (
                    error.attempt_outcome().unwrap_or(AttemptOutcome::NeverSent),
                    Err(error),
                )
            }
            // Not an upstream outcome (circuit open, deadline, shed...): nothing to judge, nothing to retry.
            Err(error) => {
                made.attempt(number, Reach::of_error(&error));
                if let Some(paid) = paid.take() {
                    if error.may_have_reached_upstream() {
                        paid.spent();
                    } else {
                        // Refused below: the retry never went out, the run and the budget get it back.
                        paid.refund();
                    }
                }
                if let Error::Overloaded {
                    reason: Overload::Throttled,
                    ..
                } = &error
                {
                    crate::metrics::throttled(ctx.target.as_ref());
                }
                // A retry the throttle or the account's limits refused ends with the last real answer (DESIGN.md,
                // "Overload").
                if let (
                    Error::Overloaded {
                        reason: reason @ (Overload::Throttled | Overload::Limited),
                        ..
                    },
                    Some(last),
                ) = (&error, last.take())
                {
                    let stop = if *reason == Overload::Limited {
                        StopReason::Limited
                    } else {
                        StopReason::Throttled
                    };
                    return made.ended(End::Stopped(stop, *last));
                }
                return made.ended(End::Rejected(error));
            }
        };
        if let Some(paid) = paid.take() {
            paid.spent();
        }
        if Polling::hands_back(polling, &outcome) {
            return made.ended(End::Answered(result));
        }
        // The attempt's end, just read: the decision's now.
        // A run shared by many instances takes its retries from the store, after the decision (`take_run_retry`).
        let shared_run = shared_run(ctx);
        let local_run = ctx
            .run
            .as_ref()
            .filter(|_| shared_run.is_none())
            .map(|run| run.allowance());
        match shared.decide(&outcome, &mut state, local_run, Polling::deposits(polling), now) {
            RetryDecision::Done => return made.ended(End::Answered(result)),
            RetryDecision::Stop(reason) => {
                if reason.code() == ballast_core::ErrorCode::RetryBudgetExhausted {
                    crate::metrics::budget_exhausted(ctx.target.as_ref());
                }
                return made.ended(End::Stopped(reason, result));
            }
            RetryDecision::Retry { after } => {
                let from_store = match shared_run {
                    Some(run) => match take_run_retry(run, ctx, now).await {
                        Some(from_store) => from_store,
                        None => {
                            // The run has none left: the budget's withdrawal goes back, the call ends.
                            shared.budget.refund(now);
                            return made.ended(End::Stopped(StopReason::RunAllowanceExhausted, result));
                        }
                    },
                    None => false,
                };
                crate::metrics::retry(ctx.target.as_ref(), &outcome);
                paid = Some(PaidRetry::new(shared, ctx, now, from_store));
                // Kept through the wait — the call's end if the throttle refuses the retry — but a large body
                // is freed now, not after the sleep (many calls may wait at once).
                last = Some(Box::new(kept_through_the_wait(result)));
                tracing::debug!(attempt = number, ?after, "retrying after a wait");
                // Boxed: the rare wait would otherwise size every call's future.
                if let Err(cancelled) = Box::pin(back_off(&ctx.cancel, after)).await {
                    drop(paid.take());
                    return made.ended(End::Rejected(cancelled));
                }
            }
        }
    }
}

/// The most of a failed answer's body kept while its retry waits; a larger one is dropped (the status and
/// headers stay).
const KEPT_BODY: usize = 16 * 1024;

/// `result`, with an answer's body dropped when it is over [`KEPT_BODY`].
fn kept_through_the_wait(result: Result<Response<Body>, Error>) -> Result<Response<Body>, Error> {
    result.map(|response| {
        let small = response.body().as_bytes().is_some_and(|b| b.len() <= KEPT_BODY);
        if small {
            return response;
        }
        let (parts, _large) = response.into_parts();
        Response::from_parts(parts, Body::empty())
    })
}

/// Waits until `inner` is ready, at most until the call's deadline can no longer hold an attempt
/// ([`Error::DeadlineExceeded`]) or the caller cancels ([`Error::Cancelled`]). Nearly always ready at once: then no
/// timer is armed.
async fn ready<S, R>(inner: &mut S, ctx: &CallContext) -> Result<(), Error>
where
    S: Service<R, Error = Error>,
{
    match poll_fn(|cx| Poll::Ready(inner.poll_ready(cx))).await {
        Poll::Ready(ready) => ready,
        // Boxed: the rare wait (a timer, the token) would otherwise size every call's future.
        Poll::Pending => Box::pin(wait_ready(inner, ctx)).await,
    }
}

/// [`ready`]'s wait, once the service said it is not ready yet.
async fn wait_ready<S, R>(inner: &mut S, ctx: &CallContext) -> Result<(), Error>
where
    S: Service<R, Error = Error>,
{
    let deadline = ctx.effective_deadline();
    // The first instant at which what is left, after the reserve, is under the least attempt.
    let give_up = deadline.instant() - deadline.reserve() - deadline.min_attempt() + Duration::from_nanos(1);
    tokio::select! {
        biased;
        ready = poll_fn(|cx| inner.poll_ready(cx)) => ready,
        () = ctx.cancel.cancelled() => Err(Error::Cancelled),
        () = clock::sleep_until(give_up) => Err(Error::DeadlineExceeded(DeadlineExceeded {
            remaining: deadline.remaining(clock::now()),
            reserve: deadline.reserve(),
            min_attempt: deadline.min_attempt(),
            refused: Refused::Attempt,
        })),
    }
}

/// How a call ended.
#[derive(Debug)]
enum End {
    /// The decision said done (the upstream's success), or a poll's 409 went back unjudged.
    Answered(Result<Response<Body>, Error>),
    /// The decision stopped the call after an attempt that ended so.
    Stopped(StopReason, Result<Response<Body>, Error>),
    /// Not an upstream outcome: a local rejection below, or the caller cancelled.
    Rejected(Error),
}

/// What the call's attempts were: how many, up to which number, and what they may have done.
#[derive(Debug, Default)]
struct Made {
    attempts: u32,
    reach: Reach,
}

impl Made {
    fn attempt(&mut self, number: u32, reach: Reach) {
        self.attempts = number;
        self.reach = self.reach.then(reach);
    }

    /// The trip: the upstream's answer when there was one (also when the decision stopped on it), else the error
    /// — [`Error::Stopped`] when the decision stopped after an attempt's error (its text is in the attempt's
    /// report line).
    fn ended(self, end: End) -> Trip {
        let (result, stop) = match end {
            End::Answered(result) => (result, None),
            End::Stopped(reason, Ok(response)) => (Ok(response), Some(reason)),
            End::Stopped(reason, Err(_attempt_error)) => (Err(Error::Stopped(reason)), Some(reason)),
            End::Rejected(error) => {
                let stop = match &error {
                    Error::DeadlineExceeded(_) => stop_of(&error),
                    _ => None,
                };
                (Err(error), stop)
            }
        };
        Trip {
            result,
            stop,
            attempts: self.attempts,
            reach: self.reach,
        }
    }
}

/// A retry the decision drew from the run's allowance and the upstream's budget, whose attempt has not gone
/// out yet. Dropped before it is handed to the service below — the caller cancelled the backoff or dropped the
/// call, the service below never became ready — or refunded when a layer below refused the attempt (circuit open,
/// no time left, shed), it gives both back: a retry never sent costs the run and the upstream nothing. Handed
/// below, it stays spent however the call ends.
#[cfg_attr(not(feature = "idempotency"), allow(dead_code))]
struct PaidRetry {
    budget: Arc<dyn RetryBudget>,
    run: Option<Arc<Run>>,
    /// The run's retry came from the shared store (else from its local allowance).
    from_store: bool,
    withdrawn_at: Instant,
    /// The attempt was handed to the service below: it may have gone out.
    handed_below: bool,
    settled: bool,
}

impl PaidRetry {
    fn new(shared: &Shared, ctx: &CallContext, withdrawn_at: Instant, from_store: bool) -> Self {
        PaidRetry {
            budget: Arc::clone(&shared.budget),
            run: ctx.run.clone(),
            from_store,
            withdrawn_at,
            handed_below: false,
            settled: false,
        }
    }

    /// Its attempt went out: the retry is spent.
    fn spent(mut self) {
        self.settled = true;
    }

    /// Its attempt was refused below and never went out: the run and the budget get the retry back.
    fn refund(mut self) {
        self.give_back();
        self.settled = true;
    }

    fn give_back(&self) {
        match &self.run {
            #[cfg(feature = "idempotency")]
            Some(run) if self.from_store => run.give_back_shared(),
            Some(run) => run.allowance().give_back(),
            None => {}
        }
        self.budget.refund(self.withdrawn_at);
    }
}

impl Drop for PaidRetry {
    fn drop(&mut self) {
        if !self.settled && !self.handed_below {
            self.give_back();
        }
    }
}

/// The call's run when its retries are decided in the shared store now (a run of many instances whose store is
/// reachable, on a layer that retries).
#[cfg(feature = "idempotency")]
fn shared_run(ctx: &CallContext) -> Option<&Run> {
    ctx.run
        .as_deref()
        .filter(|run| ctx.retries_here && run.is_shared_now())
}

#[cfg(not(feature = "idempotency"))]
fn shared_run(_: &CallContext) -> Option<&Run> {
    None
}

/// Takes the retry the decision granted from `run`'s shared allowance: `Some(true)` taken there, `Some(false)`
/// taken from the local allowance because the store could not be asked, `None` when none is left.
#[cfg(feature = "idempotency")]
async fn take_run_retry(run: &Run, ctx: &CallContext, now: Instant) -> Option<bool> {
    use crate::run::SharedTake;
    // Within what the trip itself may wait (its deadline less the reserve), so the take is never cut mid-way.
    let deadline = ctx.effective_deadline();
    let patience = deadline.remaining(now).saturating_sub(deadline.reserve());
    match Box::pin(run.take_shared_retry(patience)).await {
        SharedTake::Taken => Some(true),
        SharedTake::Spent => None,
        SharedTake::Lost => run.allowance().try_take().then_some(false),
    }
}

#[cfg(not(feature = "idempotency"))]
async fn take_run_retry(run: &Run, _: &CallContext, _: Instant) -> Option<bool> {
    run.allowance().try_take().then_some(false)
}

/// Waits `after`, or until `cancel` fires ([`Error::Cancelled`], at once).
async fn back_off(cancel: &Cancel, after: Duration) -> Result<(), Error> {
    let until = clock::now() + after;
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Error::Cancelled),
        () = clock::sleep_until(until) => Ok(()),
    }
}

/// Headers the layers below add to each attempt (`ballast-timeout-ms`, `x-envoy-expected-rq-timeout-ms`,
/// `ballast-attempt`, `ballast-hop`, `traceparent`) and the HTTP client after them (reqwest's `accept`): the copy
/// has room for them, so adding them never grows it (a grown map is rehashed: ~1,800 instructions).
const ATTEMPT_HEADERS: usize = 5 + 2;

/// A copy of `request` for attempt `number`: the same method, URI, version, headers, extensions and body.
fn attempt_request(request: &Request<Bytes>, number: u32) -> Request<Bytes> {
    let mut copy = Request::new(request.body().clone());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    // Built with room to spare rather than cloned: a clone is full, and the attempt's headers would grow it twice.
    let mut headers = HeaderMap::with_capacity(request.headers().len() + ATTEMPT_HEADERS);
    for (name, value) in request.headers() {
        headers.append(name.clone(), value.clone());
    }
    *copy.headers_mut() = headers;
    *copy.extensions_mut() = request.extensions().clone();
    copy.extensions_mut().insert(AttemptNumber(number));
    copy
}

/// The context of `request`, inserting the default one when it has none (see the module docs).
pub(super) fn context_of(request: &mut Request<Bytes>) -> CallContext {
    if let Some(context) = request.extensions().get::<CallContext>() {
        return context.clone();
    }
    let context = default_context(request.method());
    request.extensions_mut().insert(context.clone());
    context
}

/// The context of a call that came without one: read-only for the safe methods, otherwise side-effecting with no
/// deduplication (the safe assumption: only never-sent errors are retried); the scope's deadline, else
/// [`DEADLINE_WITHOUT_CONTEXT`].
fn default_context(method: &Method) -> CallContext {
    let kind = crate::deadline::kind_for_method(method);
    let deadline =
        current_deadline().unwrap_or_else(|| Deadline::after(clock::now(), DEADLINE_WITHOUT_CONTEXT));
    CallContext::new(kind, deadline)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_core::{CallKind, UpstreamIdempotency};

    #[test]
    fn an_attempt_copies_everything_and_numbers_it() {
        let mut request = Request::post("http://tools.internal/tools/create_refund?x=1")
            .header("idempotency-key", "k-1")
            .body(Bytes::from_static(b"{\"amount\": 5}"))
            .unwrap();
        request.extensions_mut().insert(7_u8);
        let copy = attempt_request(&request, 2);
        assert_eq!(copy.method(), Method::POST);
        assert_eq!(copy.uri(), request.uri());
        assert_eq!(copy.headers(), request.headers());
        assert_eq!(copy.body(), request.body());
        assert_eq!(copy.extensions().get::<u8>(), Some(&7));
        assert_eq!(copy.extensions().get::<AttemptNumber>(), Some(&AttemptNumber(2)));
        assert_eq!(request.extensions().get::<AttemptNumber>(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_without_context_gets_a_safe_default() {
        let mut post = Request::post("http://x/").body(Bytes::new()).unwrap();
        let context = context_of(&mut post);
        assert_eq!(
            context.kind,
            CallKind::SideEffectingTool(UpstreamIdempotency::None)
        );
        assert_eq!(context.deadline.remaining(clock::now()), DEADLINE_WITHOUT_CONTEXT);
        assert!(post.extensions().get::<CallContext>().is_some(), "carried below");

        let mut get = Request::get("http://x/").body(Bytes::new()).unwrap();
        let scoped = Deadline::after(clock::now(), Duration::from_secs(3));
        let context = crate::context::scope(scoped, async { context_of(&mut get) }).await;
        assert_eq!(context.kind, CallKind::ReadOnlyTool);
        assert_eq!(context.deadline.instant(), scoped.instant());
    }

    #[test]
    fn a_present_context_is_kept() {
        let given = CallContext::new(
            CallKind::Model,
            Deadline::at(ballast_core::Instant::from_millis(5)),
        );
        let mut request = Request::post("http://x/").body(Bytes::new()).unwrap();
        request.extensions_mut().insert(given);
        assert_eq!(context_of(&mut request).kind, CallKind::Model);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_back_off_ends_at_once() {
        let cancel = Cancel::new();
        let started = clock::now();
        let sleeping = tokio::spawn({
            let cancel = cancel.clone();
            async move { back_off(&cancel, Duration::from_secs(5)).await }
        });
        tokio::time::advance(Duration::from_secs(1)).await;
        cancel.cancel();
        let result = sleeping.await.unwrap();
        assert!(matches!(result, Err(Error::Cancelled)));
        assert_eq!(
            clock::now().saturating_duration_since(started),
            Duration::from_secs(1)
        );
        let uncancelled = back_off(&Cancel::new(), Duration::from_millis(300)).await;
        assert!(uncancelled.is_ok());
    }
}
