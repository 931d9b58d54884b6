//! One logical call: attempts, decisions, sleeps.

use std::sync::Arc;
use std::time::Duration;

use ballast_core::{AttemptOutcome, CallState, Deadline, Instant, RetryBudget, RetryDecision};
use bytes::Bytes;
use futures::future::poll_fn;
use http::{HeaderMap, Method, Request, Response};
use tokio_util::sync::CancellationToken;
use tower::Service;

use super::poll::Polling;
use super::record::{End, finish, never_left, record_attempt, recorded};
use super::{Shared, classify_response};
use crate::{AttemptNumber, CallContext, Error, Report, Run, clock, current_deadline};

/// The deadline of a call with no [`CallContext`] and no enclosing deadline scope: DESIGN.md's default
/// `max_timeout`, the longest deadline Ballast accepts from anyone.
const DEADLINE_WITHOUT_CONTEXT: Duration = Duration::from_secs(300);

/// Runs one logical call through `inner`, attempt after attempt, as the policy decides.
pub(super) async fn call<S>(
    shared: Arc<Shared>,
    mut inner: S,
    mut request: Request<Bytes>,
) -> Result<Response<Bytes>, Error>
where
    S: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error>,
{
    let ctx = context_of(&mut request);
    let mut state = CallState::new(ctx.kind, ctx.effective_deadline()).with_retries_here(ctx.retries_here);
    let run = ctx.run.as_ref().map(|run| run.allowance());
    let polling = Polling::of(&request);
    // The retry paid for by the last decision, until its attempt goes out.
    let mut paid: Option<PaidRetry> = None;
    loop {
        if ctx.cancel.is_cancelled() {
            drop(paid.take());
            return finish(&shared, &ctx, End::Rejected(Error::Cancelled), clock::now());
        }
        let number = Polling::number(polling, state.next_attempt());
        let (result, now) = attempt(&mut inner, &request, number, &ctx.report).await;
        let (outcome, result) = match result {
            Ok(response) => (
                AttemptOutcome::Response(classify_response(&response)),
                Ok(response),
            ),
            Err(error) => match error.attempt_outcome() {
                Some(outcome) => (outcome, Err(error)),
                // Not an upstream outcome (circuit open, deadline, shed...): nothing to judge, nothing to retry.
                None => {
                    if let Some(paid) = paid.take() {
                        if never_left(&error) {
                            // Refused below: the retry never went out, the run and the budget get it back.
                            drop(paid);
                        } else {
                            paid.spent();
                        }
                    }
                    return finish(&shared, &ctx, End::Rejected(error), now);
                }
            },
        };
        if let Some(paid) = paid.take() {
            paid.spent();
        }
        if Polling::hands_back(polling, &outcome) {
            return finish(&shared, &ctx, End::Answered(result), now);
        }
        // The attempt's end, just read: the decision's now (and the budget's, in the report).
        match shared.decide(&outcome, &mut state, run, Polling::deposits(polling), now) {
            RetryDecision::Done => return finish(&shared, &ctx, End::Answered(result), now),
            RetryDecision::Stop(reason) => {
                return finish(&shared, &ctx, End::Stopped(reason, result), now);
            }
            RetryDecision::Retry { after } => {
                paid = Some(PaidRetry::new(&shared, &ctx, now));
                // The failed answer's buffered body is freed now, not after the sleep.
                drop(result);
                tracing::debug!(attempt = number, ?after, "retrying after a wait");
                // Boxed: the rare wait would otherwise size every call's future.
                if let Err(cancelled) = Box::pin(back_off(&ctx.cancel, after)).await {
                    drop(paid.take());
                    return finish(&shared, &ctx, End::Rejected(cancelled), clock::now());
                }
            }
        }
    }
}

/// A retry the decision drew from the run's allowance and the upstream's budget, whose attempt has not gone
/// out yet. Dropped before it goes out — the caller cancelled the backoff or dropped the call, or a layer below
/// refused the attempt (circuit open, no time left, shed) — it gives both back: a retry never sent costs the
/// run and the upstream nothing.
struct PaidRetry {
    budget: Arc<dyn RetryBudget>,
    run: Option<Arc<Run>>,
    withdrawn_at: Instant,
    spent: bool,
}

impl PaidRetry {
    fn new(shared: &Shared, ctx: &CallContext, withdrawn_at: Instant) -> Self {
        PaidRetry {
            budget: Arc::clone(&shared.budget),
            run: ctx.run.clone(),
            withdrawn_at,
            spent: false,
        }
    }

    /// Its attempt went out: the retry is spent.
    fn spent(mut self) {
        self.spent = true;
    }
}

impl Drop for PaidRetry {
    fn drop(&mut self) {
        if !self.spent {
            if let Some(run) = &self.run {
                run.allowance().give_back();
            }
            self.budget.refund(self.withdrawn_at);
        }
    }
}

/// Sends attempt `number`: a copy of `request` to `inner` once it is ready. Records it in `report` unless a layer
/// below did. Returns its result and the instant it ended.
async fn attempt<S>(
    inner: &mut S,
    request: &Request<Bytes>,
    number: u32,
    report: &Report,
) -> (Result<Response<Bytes>, Error>, Instant)
where
    S: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error>,
{
    let recorded_before = recorded(report);
    let started = clock::now();
    // The copy is made once the service below is ready, straight into its call: never held across a wait.
    let result = match poll_fn(|cx| inner.poll_ready(cx)).await {
        Ok(()) => inner.call(attempt_request(request, number)).await,
        Err(error) => Err(error),
    };
    let ended = clock::now();
    let took = ended.saturating_duration_since(started);
    record_attempt(report, recorded_before, number, &result, took);
    (result, ended)
}

/// Waits `after`, or until `cancel` fires ([`Error::Cancelled`], at once).
async fn back_off(cancel: &CancellationToken, after: Duration) -> Result<(), Error> {
    let until = clock::now() + after;
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Error::Cancelled),
        () = clock::sleep_until(until) => Ok(()),
    }
}

/// Headers an attempt layer below adds to each attempt (`ballast-timeout-ms`, `x-envoy-expected-rq-timeout-ms`,
/// `ballast-attempt`, `ballast-hop`): the copy has room for them, so adding them never grows it.
const ATTEMPT_HEADERS: usize = 4;

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
fn context_of(request: &mut Request<Bytes>) -> CallContext {
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
        let context = crate::scope(scoped, async { context_of(&mut get) }).await;
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
        let cancel = CancellationToken::new();
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
        let uncancelled = back_off(&CancellationToken::new(), Duration::from_millis(300)).await;
        assert!(uncancelled.is_ok());
    }
}
