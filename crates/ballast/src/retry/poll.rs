//! The hook for a caller that waits out a 409 "in progress" itself (the `ToolClient`).
//!
//! Why: a 409 `urn:ballast:idempotency_in_progress` says the operation is still running at the upstream under
//! this key; it is not a failure to retry but an answer to wait on. A `ToolClient` polls it within the deadline,
//! each poll a new call through the stack. Were the retry layer to treat those answers as failures, every poll
//! would retry the 409s (spending the run's allowance and the upstream's budget on waiting), deposit in the budget
//! again (one operation counted as many calls) and number its attempts from 1 again. A trip run with [`Polling`]
//! gets instead:
//! - a 409 in-progress answer handed back at once, not judged: no retry, no deposit, no withdrawal;
//! - attempt numbers that go on from the operation's earlier calls (`attempts_before` + 1, ...);
//! - when it is a poll (`attempts_before > 0`), no deposit in the budget: the operation's first call made it.
//!   Retries of a poll's other failures (a 503) are judged and paid for as usual.

use ballast_core::{AttemptOutcome, Instant, ProblemKind, RetryBudget};

/// What the caller of the retry loop ([`run`](super::run)) says of a trip: it waits out 409 "in progress" answers
/// itself, and `attempts_before` attempts of the same operation were already sent by its earlier trips.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Polling {
    /// Attempts of the operation sent before this call (0 for its first call).
    pub(crate) attempts_before: u32,
}

impl Polling {
    /// The number of this call's attempt `number` (1-based) within the operation.
    pub(super) fn number(polling: Option<Polling>, number: u32) -> u32 {
        polling.map_or(number, |p| number.saturating_add(p.attempts_before))
    }

    /// Whether `outcome` goes back to the sender unjudged: a 409 in-progress answer, for a sender that polls.
    pub(super) fn hands_back(polling: Option<Polling>, outcome: &AttemptOutcome) -> bool {
        polling.is_some()
            && matches!(outcome, AttemptOutcome::Response(info)
                if info.status == 409 && info.problem == ProblemKind::IdempotencyInProgress)
    }

    /// Whether the call's first attempt is deposited in the budget: not for a poll.
    pub(super) fn deposits(polling: Option<Polling>) -> bool {
        polling.is_none_or(|p| p.attempts_before == 0)
    }
}

/// The upstream's budget as a poll sees it: withdrawals and reads go through, the deposit does not (the
/// operation's first call made it).
#[derive(Debug)]
pub(super) struct WithoutDeposit<'a>(pub(super) &'a dyn RetryBudget);

impl RetryBudget for WithoutDeposit<'_> {
    fn deposit(&self, _now: Instant) {}

    fn try_withdraw(&self, now: Instant) -> bool {
        self.0.try_withdraw(now)
    }

    fn available(&self, now: Instant) -> u64 {
        self.0.available(now)
    }

    fn refused(&self) -> u64 {
        self.0.refused()
    }

    fn refund(&self, withdrawn_at: Instant) {
        self.0.refund(withdrawn_at);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use ballast_core::{CallKind, Deadline, RatioBudget, RetryPolicy, TokenBucket, UpstreamIdempotency};
    use bytes::Bytes;
    use http::{Request, Response};
    use tower::{Layer, ServiceExt as _, service_fn};

    use super::*;
    use crate::outcome::Trip;
    use crate::{AttemptNumber, CallContext, Error, RetryLayer, Run, clock};

    /// An upstream answering 409 in progress `busy` times, then `then`; it records the attempt numbers it saw.
    fn upstream(
        busy: u32,
        then: u16,
        seen: Arc<std::sync::Mutex<Vec<u32>>>,
    ) -> impl tower::Service<
        Request<Bytes>,
        Response = Response<Bytes>,
        Error = Error,
        Future = std::future::Ready<Result<Response<Bytes>, Error>>,
    > + Clone {
        let sent = Arc::new(AtomicU32::new(0));
        service_fn(move |request: Request<Bytes>| {
            let number = request.extensions().get::<AttemptNumber>().map_or(0, |n| n.0);
            seen.lock().unwrap().push(number);
            let response = if sent.fetch_add(1, Ordering::SeqCst) < busy {
                Response::builder()
                    .status(409)
                    .header("content-type", "application/problem+json")
                    .header("retry-after", "1")
                    .body(Bytes::from_static(
                        br#"{"type": "urn:ballast:idempotency_in_progress"}"#,
                    ))
            } else {
                Response::builder().status(then).body(Bytes::new())
            };
            std::future::ready(Ok(response.unwrap()))
        })
    }

    fn request(ctx: &CallContext) -> Request<Bytes> {
        let mut request = Request::post("http://tools.internal/tools/create_refund")
            .body(Bytes::new())
            .unwrap();
        request.extensions_mut().insert(ctx.clone());
        request
    }

    fn keyed_context() -> CallContext {
        let kind = CallKind::SideEffectingTool(UpstreamIdempotency::Keyed);
        let mut ctx = CallContext::new(kind, Deadline::after(clock::now(), Duration::from_secs(30)));
        ctx.run = Some(Arc::new(Run::new("run-1".into(), 3)));
        ctx
    }

    /// One trip of `ctx`'s call through `layer` over `upstream`, as a polling caller runs it.
    async fn trip<S>(layer: &RetryLayer, upstream: S, ctx: &CallContext, polling: Polling) -> Trip
    where
        S: tower::Service<Request<Bytes>, Response = Response<Bytes>, Error = Error>,
    {
        super::super::run(layer.shared(), upstream, request(ctx), ctx, Some(polling)).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_poll_gets_the_409_back_at_once_without_spending_or_depositing() {
        let budget = Arc::new(TokenBucket::new(5, 0.0).unwrap());
        let layer = RetryLayer::new(RetryPolicy::default(), budget.clone()).with_rng_seed(1);
        let seen = Arc::default();
        let ctx = keyed_context();
        let started = clock::now();
        let polling = Polling { attempts_before: 4 };
        let trip = trip(&layer, upstream(u32::MAX, 200, Arc::clone(&seen)), &ctx, polling).await;
        assert_eq!(trip.result.unwrap().status(), 409);
        assert_eq!(clock::now(), started, "no retry, no wait");
        assert_eq!(
            *seen.lock().unwrap(),
            [5],
            "numbered after the operation's earlier attempts"
        );
        assert_eq!(trip.attempts, 5, "the next poll numbers after it");
        assert_eq!(budget.available(clock::now()), 5, "nothing withdrawn");
        assert_eq!(ctx.run.as_ref().unwrap().allowance().left(), 3);
        assert_eq!(trip.stop, None, "an answer to wait on, not a failure");
    }

    #[tokio::test(start_paused = true)]
    async fn without_polling_the_409_is_retried_as_before() {
        let layer = RetryLayer::new(RetryPolicy::default(), Arc::new(RatioBudget::default()))
            .with_rng_seed(1)
            .layer(upstream(1, 200, Arc::default()));
        let ctx = keyed_context();
        let response = layer.oneshot(request(&ctx)).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(ctx.report.snapshot().run_allowance_left, Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_poll_deposits_nothing_and_still_retries_a_failure() {
        #[derive(Debug, Default)]
        struct Counting(AtomicU32);
        impl RetryBudget for Counting {
            fn deposit(&self, _: Instant) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
            fn try_withdraw(&self, _: Instant) -> bool {
                true
            }
            fn available(&self, _: Instant) -> u64 {
                10
            }
            fn refused(&self) -> u64 {
                0
            }
        }
        let budget = Arc::new(Counting::default());
        let seen: Arc<std::sync::Mutex<Vec<u32>>> = Arc::default();
        // A 503, then the answer: the poll's failure is retried with the next number.
        let sent = Arc::new(AtomicU32::new(0));
        let log = Arc::clone(&seen);
        let flaky = service_fn(move |request: Request<Bytes>| {
            log.lock()
                .unwrap()
                .push(request.extensions().get::<AttemptNumber>().unwrap().0);
            let status = if sent.fetch_add(1, Ordering::SeqCst) == 0 {
                503
            } else {
                200
            };
            std::future::ready(Ok::<_, Error>(
                Response::builder().status(status).body(Bytes::new()).unwrap(),
            ))
        });
        let layer = RetryLayer::new(RetryPolicy::default(), budget.clone()).with_rng_seed(1);
        let ctx = keyed_context();
        let polling = Polling { attempts_before: 2 };
        let answered = trip(&layer, flaky.clone(), &ctx, polling).await;
        assert_eq!(answered.result.unwrap().status(), 200);
        assert_eq!(answered.attempts, 4);
        assert_eq!(*seen.lock().unwrap(), [3, 4]);
        assert_eq!(budget.0.load(Ordering::SeqCst), 0, "a poll deposits nothing");
        // The operation's first trip deposits as any call does.
        let first = Polling { attempts_before: 0 };
        let _ = trip(&layer, flaky, &keyed_context(), first).await;
        assert_eq!(budget.0.load(Ordering::SeqCst), 1);
    }
}
