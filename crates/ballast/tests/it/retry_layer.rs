//! The retry layer over scripted test doubles (`tower::service_fn`), paused time and a seeded generator: what
//! each attempt carries, what is never retried, local rejections, cancellation (issue 4, test 7's first half),
//! and the report. The doubles sit under an attempt layer with an hour per try (no attempt times out): it writes
//! each attempt's line in the report, the retry layer the call's verdict.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast::{
    Error, Run, clock,
    context::{AttemptNumber, CallContext, scope},
    layer::{AttemptLayer, AttemptService, BreakerLayer, Retry, RetryLayer},
    report::{AttemptResult, OutcomeReport},
};
use ballast_core::{
    BreakerConfig, CallKind, CircuitBreaker, Deadline, ErrorCode, RatioBudget, RetryBudget, RetryPolicy,
    StopReason, TokenBucket, UpstreamIdempotency,
};
use bytes::Bytes;
use http::{Request, Response};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

/// What the double saw of one attempt.
#[derive(Debug)]
struct Seen {
    request: Request<Bytes>,
    at: ballast_core::Instant,
}

/// A double answering attempt `n` (1-based) with `answer(n)`, recording every request it gets.
type Log = Arc<Mutex<Vec<Seen>>>;

/// The stack's inner service, type-erased.
type Upstream = BoxCloneService<Request<Bytes>, Response<Bytes>, Error>;

/// The retry layer over an attempt layer over the double.
type Retrying = Retry<AttemptService<Upstream>>;

/// The attempt layer of these tests: an hour per try, so that no attempt times out.
fn attempts() -> AttemptLayer {
    AttemptLayer::new(Duration::from_secs(3600))
}

/// The headers of a request as the retry layer sent it: without those the attempt layer below adds.
fn sent_headers(request: &Request<Bytes>) -> http::HeaderMap {
    let mut headers = request.headers().clone();
    for added in [
        "ballast-timeout-ms",
        "x-envoy-expected-rq-timeout-ms",
        "ballast-attempt",
        "ballast-hop",
        "traceparent",
    ] {
        headers.remove(added);
    }
    headers
}

fn retrying<F>(answer: F) -> (Retrying, Log)
where
    F: Fn(usize) -> Result<Response<Bytes>, Error> + Clone + Send + 'static,
{
    retrying_with(Arc::new(RatioBudget::default()), answer)
}

/// [`retrying`] drawing its retries from `budget`.
fn retrying_with<F>(budget: Arc<dyn RetryBudget>, answer: F) -> (Retrying, Log)
where
    F: Fn(usize) -> Result<Response<Bytes>, Error> + Clone + Send + 'static,
{
    let log: Log = Arc::default();
    let seen = Arc::clone(&log);
    let upstream = service_fn(move |request: Request<Bytes>| {
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.push(Seen {
                request,
                at: clock::now(),
            });
            seen.len()
        };
        let result = answer(n);
        async move { result }
    });
    let layer = RetryLayer::new(RetryPolicy::default(), budget).with_rng_seed(9);
    (layer.layer(attempts().layer(BoxCloneService::new(upstream))), log)
}

fn status(code: u16) -> Result<Response<Bytes>, Error> {
    Ok(Response::builder()
        .status(code)
        .body(Bytes::from_static(b"{}"))
        .unwrap())
}

fn with_header(code: u16, name: &'static str, value: &'static str) -> Result<Response<Bytes>, Error> {
    Ok(Response::builder()
        .status(code)
        .header(name, value)
        .body(Bytes::new())
        .unwrap())
}

fn timeout() -> Error {
    Error::timeout(Duration::from_secs(2))
}

/// A call of `kind` under 30 s, and its request (a refund, with a key and a JSON body).
fn call(kind: CallKind) -> (CallContext, Request<Bytes>) {
    let context = CallContext::new(kind, Deadline::after(clock::now(), Duration::from_secs(30)));
    let mut request = Request::post("http://tools.internal/tools/create_refund?v=2")
        .header("content-type", "application/json")
        .header("idempotency-key", "5f0c7a4e-0000-4000-8000-000000000001")
        .body(Bytes::from_static(br#"{"order_id": "A-1001", "amount": 1200}"#))
        .unwrap();
    request.extensions_mut().insert(context.clone());
    (context, request)
}

fn sent(log: &Log) -> usize {
    log.lock().unwrap().len()
}

fn results(report: &OutcomeReport) -> Vec<AttemptResult> {
    report.attempts.iter().map(|a| a.result.clone()).collect()
}

const KEYED: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::Keyed);
const NOT_DEDUPLICATED: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::None);

#[tokio::test(start_paused = true)]
async fn every_attempt_carries_the_same_request_and_its_number() {
    let (service, log) = retrying(|n| status(if n < 3 { 503 } else { 200 }));
    let (context, request) = call(KEYED);
    let original = (
        request.method().clone(),
        request.uri().clone(),
        request.headers().clone(),
        request.body().clone(),
    );

    let response = service.oneshot(request).await.expect("an answer");

    assert_eq!(response.status(), 200);
    let seen = log.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for (i, attempt) in seen.iter().enumerate() {
        let request = &attempt.request;
        assert_eq!(
            (
                request.method().clone(),
                request.uri().clone(),
                sent_headers(request),
                request.body().clone()
            ),
            original
        );
        let number = u32::try_from(i + 1).unwrap();
        assert_eq!(
            request.extensions().get::<AttemptNumber>(),
            Some(&AttemptNumber(number))
        );
        let below = request
            .extensions()
            .get::<CallContext>()
            .expect("the context reaches below");
        assert_eq!(below.kind, KEYED);
    }
    let report = context.report.snapshot();
    assert_eq!(results(&report), [503, 503, 200].map(AttemptResult::Status));
    assert!(report.attempts.iter().all(|a| a.sent));
    assert_eq!(
        report.attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

#[tokio::test(start_paused = true)]
async fn a_400_is_never_retried() {
    let (service, log) = retrying(|_| status(400));
    let (context, request) = call(CallKind::Model);

    let response = service.oneshot(request).await.expect("the upstream's answer");

    assert_eq!(response.status(), 400);
    assert_eq!(sent(&log), 1);
    let report = context.report.snapshot();
    assert_eq!(report.stop, Some(StopReason::NotRetryable { status: 400 }));
    assert_eq!(report.code, Some(ErrorCode::UpstreamError));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_of_a_call_nothing_deduplicates_is_an_unknown_outcome() {
    let (service, log) = retrying(|_| Err(timeout()));
    let (context, request) = call(NOT_DEDUPLICATED);

    let error = service.oneshot(request).await.expect_err("no answer");

    assert!(
        matches!(
            error,
            Error::Stopped(StopReason::OutcomeUnknown { timed_out: true })
        ),
        "{error:?}"
    );
    assert_eq!(sent(&log), 1, "never sent twice: the refund may have happened");
    let report = context.report.snapshot();
    assert!(report.outcome_unknown);
    assert_eq!(report.code, Some(ErrorCode::OutcomeUnknown));
    let [attempt] = report.attempts.as_slice() else {
        panic!("{:?}", report.attempts)
    };
    assert_eq!(attempt.result, AttemptResult::Error("timeout".into()));
    assert!(attempt.sent);
    assert!(report.to_string().contains("OUTCOME UNKNOWN"), "{report}");
}

#[tokio::test(start_paused = true)]
async fn a_keyed_call_retries_a_timeout_with_the_same_key() {
    let (service, log) = retrying(|n| if n == 1 { Err(timeout()) } else { status(201) });
    let (context, request) = call(KEYED);

    let response = service.oneshot(request).await.expect("an answer");

    assert_eq!(response.status(), 201);
    let seen = log.lock().unwrap();
    let keys: Vec<_> = seen
        .iter()
        .map(|s| s.request.headers()["idempotency-key"].clone())
        .collect();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0], keys[1]);
    assert!(!context.report.snapshot().outcome_unknown);
}

#[tokio::test(start_paused = true)]
async fn exhausted_attempts_keep_each_error_in_the_report() {
    let (service, log) = retrying(|n| {
        Err(if n == 2 {
            Error::transport(false, "connection refused")
        } else {
            timeout()
        })
    });
    let (context, request) = call(CallKind::Model);

    let error = service.oneshot(request).await.expect_err("no answer");

    assert!(
        matches!(
            error,
            Error::Stopped(StopReason::AttemptsExhausted { attempts: 3 })
        ),
        "{error:?}"
    );
    assert_eq!(sent(&log), 3);
    let report = context.report.snapshot();
    let texts: Vec<_> = report
        .attempts
        .iter()
        .map(|a| match &a.result {
            AttemptResult::Error(text) => text.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(texts[0] == "timeout" && texts[2] == "timeout", "{texts:?}");
    assert!(texts[1].contains("connection refused"), "{texts:?}");
    assert_eq!(
        report.attempts.iter().map(|a| a.sent).collect::<Vec<_>>(),
        [true, false, true]
    );
}

#[tokio::test(start_paused = true)]
async fn a_local_rejection_below_stops_at_once() {
    let (service, log) = retrying(|n| {
        if n == 1 {
            status(503)
        } else {
            Err(Error::CircuitOpen {
                retry_in: Some(Duration::from_secs(5)),
            })
        }
    });
    let (context, request) = call(CallKind::ReadOnlyTool);

    let error = service.oneshot(request).await.expect_err("rejected below");

    assert!(matches!(error, Error::CircuitOpen { .. }), "{error:?}");
    assert_eq!(sent(&log), 2, "the open circuit is not retried");
    let report = context.report.snapshot();
    assert_eq!(report.attempts.len(), 2);
    assert_eq!(report.attempts[0].result, AttemptResult::Status(503));
    assert!(
        matches!(&report.attempts[1].result, AttemptResult::Error(text) if text.contains("circuit open"))
    );
    assert!(!report.attempts[1].sent);
    assert_eq!(report.code, Some(ErrorCode::CircuitOpen));
    assert_eq!(report.stop, None);
}

#[tokio::test(start_paused = true)]
async fn the_caller_that_retries_itself_gets_one_attempt() {
    let (service, log) = retrying(|_| status(503));
    let (mut context, mut request) = call(CallKind::Model);
    context.retries_here = false;
    request.extensions_mut().insert(context.clone());

    let response = service.oneshot(request).await.expect("the upstream's answer");

    assert_eq!(response.status(), 503);
    assert_eq!(sent(&log), 1);
    assert_eq!(context.report.snapshot().stop, Some(StopReason::RetriesAtCaller));
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_the_backoff_returns_at_once_and_sends_nothing_more() {
    let (service, log) = retrying(|_| with_header(503, "retry-after", "5"));
    let (context, request) = call(CallKind::Model);
    let running = tokio::spawn(service.oneshot(request));

    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(sent(&log), 1, "sleeping before the second attempt");
    let cancelled_at = clock::now();
    context.cancel.cancel();
    let result = running.await.expect("the call's task");

    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert_eq!(clock::now(), cancelled_at, "at once, not at the end of the sleep");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(sent(&log), 1);
    let report = context.report.snapshot();
    assert_eq!(report.attempts.len(), 1);
    assert_eq!(report.code, Some(Error::Cancelled.code()));
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_call_sends_nothing() {
    let (service, log) = retrying(|_| status(200));
    let (context, request) = call(CallKind::Model);
    context.cancel.cancel();

    let result = service.oneshot(request).await;

    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert_eq!(sent(&log), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_during_the_backoff_sends_nothing_more() {
    let (service, log) = retrying(|_| with_header(503, "retry-after", "5"));
    let (_context, request) = call(CallKind::Model);

    let dropped = tokio::time::timeout(Duration::from_secs(1), service.oneshot(request)).await;

    assert!(dropped.is_err(), "still sleeping when dropped");
    assert_eq!(sent(&log), 1);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(sent(&log), 1, "no attempt after the caller left");
}

#[tokio::test(start_paused = true)]
async fn a_large_failed_answer_is_freed_before_the_sleep() {
    // (A small one is kept through the wait: the call's end if the throttle refuses the retry.)
    static LARGE: [u8; 100_000] = [b' '; 100_000];
    struct Tracked(Arc<AtomicBool>);
    impl AsRef<[u8]> for Tracked {
        fn as_ref(&self) -> &[u8] {
            &LARGE
        }
    }
    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let freed = Arc::new(AtomicBool::new(false));
    let body_freed = Arc::clone(&freed);
    let (service, log) = retrying(move |n| {
        if n > 1 {
            return status(200);
        }
        Ok(Response::builder()
            .status(503)
            .header("retry-after", "5")
            .body(Bytes::from_owner(Tracked(Arc::clone(&body_freed))))
            .unwrap())
    });
    let (_context, request) = call(CallKind::Model);
    let running = tokio::spawn(service.oneshot(request));

    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(sent(&log), 1);
    assert!(
        freed.load(Ordering::SeqCst),
        "the 503's body is freed while sleeping"
    );
    let response = running.await.unwrap().expect("an answer");
    assert_eq!(response.status(), 200);
}

#[tokio::test(start_paused = true)]
async fn the_waits_follow_the_backoff() {
    let (service, log) = retrying(|n| status(if n < 3 { 502 } else { 200 }));
    let (_context, request) = call(CallKind::Model);

    service.oneshot(request).await.expect("an answer");

    let seen = log.lock().unwrap();
    let gaps: Vec<Duration> = seen
        .windows(2)
        .map(|w| w[1].at.saturating_duration_since(w[0].at))
        .collect();
    // Full jitter (base 100 ms, cap 2 s): the first wait within 100 ms, the second within 200 ms.
    assert!(gaps[0] <= Duration::from_millis(100), "{gaps:?}");
    assert!(gaps[1] <= Duration::from_millis(200), "{gaps:?}");
}

#[tokio::test(start_paused = true)]
async fn a_replayed_answer_and_the_budget_are_reported() {
    let (service, _log) = retrying(|n| {
        if n == 1 {
            status(500)
        } else {
            with_header(200, "idempotent-replayed", "true")
        }
    });
    let (context, request) = call(KEYED);
    context.report.update(|r| {
        r.stop = Some(StopReason::RetriesAtCaller);
        r.code = Some(ErrorCode::UpstreamError);
    });

    service.oneshot(request).await.expect("an answer");

    let report = context.report.snapshot();
    assert!(report.replayed);
    assert_eq!((report.stop, report.code), (None, None), "a success clears them");
    // The default budget's floor is 100 retries; one was taken.
    assert_eq!(report.budget_left, Some(99));
    assert_eq!(report.run_allowance_left, None, "no run");
}

/// Each attempt has one line in the report, the attempt layer's: the retry layer writes none of its own.
#[tokio::test(start_paused = true)]
async fn each_attempt_is_recorded_once() {
    let (service, log) = retrying(|n| status(if n == 1 { 503 } else { 200 }));
    let (context, request) = call(CallKind::Model);

    service.oneshot(request).await.expect("an answer");

    assert_eq!(sent(&log), 2);
    let report = context.report.snapshot();
    assert_eq!(results(&report), [503, 200].map(AttemptResult::Status));
    assert_eq!(
        report.attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(report.attempts.iter().all(|a| a.sent));
}

#[tokio::test(start_paused = true)]
async fn a_request_without_context_is_retried_only_when_safe() {
    let (service, log) = retrying(|n| if n == 1 { Err(timeout()) } else { status(200) });
    let post = Request::post("http://tools.internal/pay")
        .body(Bytes::new())
        .unwrap();
    let error = service.oneshot(post).await.expect_err("a POST may have acted");
    assert!(matches!(error, Error::Stopped(StopReason::OutcomeUnknown { .. })));
    assert_eq!(sent(&log), 1);

    let (service, log) = retrying(|n| if n == 1 { Err(timeout()) } else { status(200) });
    let get = Request::get("http://tools.internal/orders/1")
        .body(Bytes::new())
        .unwrap();
    let response = service.oneshot(get).await.expect("a GET is retried");
    assert_eq!(response.status(), 200);
    assert_eq!(sent(&log), 2);
    assert!(
        log.lock().unwrap()[1]
            .request
            .extensions()
            .get::<CallContext>()
            .is_some()
    );
}

// Regression tests of the review (named after the bug they pin).

/// How a double answers attempt `n`.
type Answer = fn(usize) -> Result<Response<Bytes>, Error>;

const KEYED_REPLAYS_ERRORS: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::KeyedReplaysErrors);

/// A call of `kind` in a run with `allowance` retries.
fn call_in_run(kind: CallKind, allowance: u32) -> (CallContext, Request<Bytes>, Arc<Run>) {
    let run = Arc::new(Run::new("run-1".into(), allowance));
    let (context, request) = call_in(kind, &run);
    (context, request, run)
}

/// A call of `kind` in `run`.
fn call_in(kind: CallKind, run: &Arc<Run>) -> (CallContext, Request<Bytes>) {
    let (mut context, mut request) = call(kind);
    context.run = Some(Arc::clone(run));
    request.extensions_mut().insert(context.clone());
    (context, request)
}

fn refused_below(n: usize) -> Result<Response<Bytes>, Error> {
    Err(match n {
        0 => Error::CircuitOpen { retry_in: None },
        1 => Error::DeadlineExceeded(
            Deadline::after(clock::now(), Duration::from_millis(10))
                .attempt_timeout(Duration::from_secs(1), clock::now())
                .expect_err("10 ms cannot hold an attempt"),
        ),
        _ => Error::Overloaded {
            reason: ballast::Overload::QueueFull,
            retry_after: None,
        },
    })
}

/// Bug: `outcome_unknown` was set only for `StopReason::OutcomeUnknown`, so a keyed refund whose first attempt
/// timed out after sending, and which then stopped for another reason, reported `outcome_unknown = false`.
#[tokio::test(start_paused = true)]
async fn outcome_unknown_was_under_reported_for_keyed_tools() {
    // (what stops the call, the code of what stops it, the upstream, its budget)
    let after_a_timeout: [(&str, &str, Answer, Arc<dyn RetryBudget>); 6] = [
        (
            "attempts exhausted",
            "upstream_error",
            |n| if n == 1 { Err(timeout()) } else { status(429) },
            Arc::new(RatioBudget::default()),
        ),
        (
            "a later 5xx",
            "upstream_error",
            |n| if n == 1 { Err(timeout()) } else { status(500) },
            Arc::new(RatioBudget::default()),
        ),
        (
            "409 in progress",
            "upstream_error",
            |n| {
                if n == 1 {
                    Err(timeout())
                } else {
                    Ok(Response::builder()
                        .status(409)
                        .header("content-type", "application/problem+json")
                        .body(Bytes::from_static(
                            br#"{"type": "urn:ballast:idempotency_in_progress"}"#,
                        ))
                        .unwrap())
                }
            },
            Arc::new(RatioBudget::default()),
        ),
        (
            "budget exhausted",
            "retry_budget_exhausted",
            |_| Err(timeout()),
            {
                let empty = TokenBucket::new(1, 0.0).unwrap();
                assert!(empty.try_withdraw(clock::now()));
                Arc::new(empty)
            },
        ),
        (
            "deadline",
            "deadline_exceeded",
            |n| {
                if n == 1 {
                    Err(timeout())
                } else {
                    with_header(429, "retry-after", "40")
                }
            },
            Arc::new(RatioBudget::default()),
        ),
        (
            "circuit open",
            "circuit_open",
            |n| if n == 1 { Err(timeout()) } else { refused_below(0) },
            Arc::new(RatioBudget::default()),
        ),
    ];
    for kind in [KEYED, KEYED_REPLAYS_ERRORS] {
        for (case, stopped_by, answer, budget) in after_a_timeout.clone() {
            let (service, _log) = retrying_with(budget, answer);
            let (context, request) = call(kind);
            let result = service.oneshot(request).await;
            let report = context.report.snapshot();
            // What stopped the call is still said (its stop reason, or the error), but the code is
            // `outcome_unknown` (issue 11, precedence): a caller that reads any other code must be able to trust
            // that nothing happened.
            let stop = match (&result, report.stop) {
                (_, Some(stop)) => stop.code(),
                (Err(error), None) => error.code(),
                (Ok(_), None) => panic!("{kind:?}, {case}: no stop: {report}"),
            };
            assert_eq!(stop.as_str(), stopped_by, "{kind:?}, {case}: {report}");
            assert_eq!(
                report.code,
                Some(ErrorCode::OutcomeUnknown),
                "{kind:?}, {case}: {report}"
            );
            assert!(report.outcome_unknown, "{kind:?}, {case}: {report}");
        }
        // The run's allowance spent.
        let (service, _log) = retrying(|_| Err(timeout()));
        let (context, request, _run) = call_in_run(kind, 0);
        let error = service.oneshot(request).await.expect_err("no answer");
        assert!(
            matches!(error, Error::Stopped(StopReason::RunAllowanceExhausted)),
            "{error:?}"
        );
        assert!(
            context.report.snapshot().outcome_unknown,
            "{kind:?}, run allowance"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_replay_or_a_success_after_a_lost_answer_settles_the_outcome() {
    // The upstream's stored error for the key: the operation's outcome is that answer.
    let (service, _log) = retrying(|n| {
        if n == 1 {
            Err(timeout())
        } else {
            with_header(500, "idempotent-replayed", "true")
        }
    });
    let (context, request) = call(KEYED_REPLAYS_ERRORS);
    let response = service.oneshot(request).await.expect("the stored answer");
    assert_eq!(response.status(), 500);
    let report = context.report.snapshot();
    assert!(report.replayed && !report.outcome_unknown, "{report}");

    let (service, _log) = retrying(|n| {
        if n == 1 {
            Err(Error::transport(true, "reset"))
        } else {
            status(201)
        }
    });
    let (context, request) = call(KEYED);
    service.oneshot(request).await.expect("an answer");
    assert!(!context.report.snapshot().outcome_unknown);
}

#[tokio::test(start_paused = true)]
async fn answered_or_never_sent_attempts_and_read_only_calls_are_never_outcome_unknown() {
    let cases: [(CallKind, Answer); 3] = [
        (KEYED, |_| status(503)),
        (KEYED, |n| {
            if n == 1 {
                Err(Error::transport(false, "refused"))
            } else {
                refused_below(0)
            }
        }),
        (CallKind::ReadOnlyTool, |_| Err(timeout())),
    ];
    for (kind, answer) in cases {
        let (service, _log) = retrying(answer);
        let (context, request) = call(kind);
        let _ = service.oneshot(request).await;
        let report = context.report.snapshot();
        assert!(!report.outcome_unknown, "{kind:?}: {report}");
    }
}

/// Bug: the retry layer ignored an enclosing `scope` deadline earlier than its context's, and slept a
/// `Retry-After: 5` twice under a 1 s scope.
#[tokio::test(start_paused = true)]
async fn the_retry_layer_ignored_the_scope_deadline() {
    let (service, log) = retrying(|_| with_header(503, "retry-after", "5"));
    let (context, request) = call(CallKind::ReadOnlyTool);
    let start = clock::now();

    let response = scope(
        Deadline::after(start, Duration::from_secs(1)),
        service.oneshot(request),
    )
    .await
    .expect("the upstream's own answer");

    assert_eq!(clock::now(), start, "no wait at all");
    assert_eq!(response.status(), 503);
    assert_eq!(sent(&log), 1);
    assert!(matches!(
        context.report.snapshot().stop,
        Some(StopReason::Deadline(_))
    ));
}

/// Bug: a retry the decision paid for (run allowance, budget token) and whose attempt a layer below refused
/// locally was never given back.
#[tokio::test(start_paused = true)]
async fn a_retry_refused_below_kept_its_run_allowance_and_budget_token() {
    for refusal in 0..3 {
        let budget = Arc::new(TokenBucket::new(5, 0.0).unwrap());
        let (service, log) = retrying_with(budget.clone(), move |n| {
            if n == 1 {
                status(503)
            } else {
                refused_below(refusal)
            }
        });
        let (context, request, run) = call_in_run(CallKind::ReadOnlyTool, 3);

        let error = service.oneshot(request).await.expect_err("refused below");

        assert!(error.attempt_outcome().is_none(), "{error}");
        assert_eq!(sent(&log), 2);
        assert_eq!(
            run.allowance().left(),
            3,
            "{error}: one attempt went out, no retry did"
        );
        assert_eq!(budget.available(clock::now()), 5, "{error}");
        let report = context.report.snapshot();
        assert_eq!(
            (report.run_allowance_left, report.budget_left),
            (Some(3), Some(5)),
            "{report}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_refused_by_an_open_breaker_is_given_back() {
    let upstream = service_fn(|_request: Request<Bytes>| async { status(503) });
    let config = BreakerConfig::builder().consecutive_failures(1).build().unwrap();
    let budget = Arc::new(RatioBudget::default());
    let service = RetryLayer::new(RetryPolicy::default(), budget.clone())
        .with_rng_seed(3)
        .layer(BreakerLayer::new(Arc::new(CircuitBreaker::seeded(config, Some(3)))).layer(upstream));
    let (context, request, run) = call_in_run(CallKind::ReadOnlyTool, 3);
    let before = budget.available(clock::now());

    let error = service.oneshot(request).await.expect_err("the circuit opened");

    assert!(matches!(error, Error::CircuitOpen { .. }), "{error}");
    assert_eq!(run.allowance().left(), 3);
    assert_eq!(budget.available(clock::now()), before);
    assert_eq!(context.report.snapshot().run_allowance_left, Some(3));
}

/// Bug: a retry paid for and then cancelled (or dropped) during its backoff kept its run allowance and budget
/// token.
#[tokio::test(start_paused = true)]
async fn a_cancelled_backoff_kept_its_run_allowance_and_budget_token() {
    let budget = Arc::new(TokenBucket::new(2, 0.0).unwrap());
    let (service, log) = retrying_with(budget.clone(), |_| with_header(503, "retry-after", "5"));
    let (context, request, run) = call_in_run(CallKind::Model, 3);
    let running = tokio::spawn(service.oneshot(request));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        (run.allowance().left(), budget.available(clock::now())),
        (2, 1),
        "paid, sleeping"
    );

    context.cancel.cancel();
    let result = running.await.expect("the call's task");

    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert_eq!(sent(&log), 1);
    assert_eq!((run.allowance().left(), budget.available(clock::now())), (3, 2));
    let report = context.report.snapshot();
    assert_eq!(
        (report.run_allowance_left, report.budget_left),
        (Some(3), Some(2))
    );

    // Dropped instead of cancelled.
    let (service, _log) = retrying_with(budget.clone(), |_| with_header(503, "retry-after", "5"));
    let (_context, request) = call_in(CallKind::Model, &run);
    let dropped = tokio::time::timeout(Duration::from_secs(1), service.oneshot(request)).await;
    assert!(dropped.is_err(), "still sleeping when dropped");
    assert_eq!((run.allowance().left(), budget.available(clock::now())), (3, 2));
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_went_out_stays_spent() {
    let budget = Arc::new(TokenBucket::new(5, 0.0).unwrap());
    let (service, log) = retrying_with(budget.clone(), |n| if n < 3 { status(503) } else { status(200) });
    let (_context, request, run) = call_in_run(CallKind::Model, 3);
    service.oneshot(request).await.expect("an answer");
    assert_eq!(sent(&log), 3);
    assert_eq!((run.allowance().left(), budget.available(clock::now())), (1, 3));
}

#[tokio::test(start_paused = true)]
async fn a_call_sent_again_with_its_report_is_judged_on_its_whole_history() {
    // The same operation twice through the layer (as a caller polling it would): lost, then replayed.
    let empty = TokenBucket::new(1, 0.0).unwrap();
    assert!(empty.try_withdraw(clock::now()));
    let (service, _log) = retrying_with(Arc::new(empty), |n| {
        if n == 1 {
            Err(timeout())
        } else {
            with_header(200, "idempotent-replayed", "true")
        }
    });
    let (context, request) = call(KEYED);
    let again = request.clone();

    let _ = service.clone().oneshot(request).await;
    assert!(context.report.snapshot().outcome_unknown, "lost, not retried");
    service.oneshot(again).await.expect("the stored answer");

    let report = context.report.snapshot();
    assert!(
        report.replayed && !report.outcome_unknown,
        "settled by the replay: {report}"
    );
}

/// Bug: a retry whose attempt was in flight when the caller dropped the call gave back its run allowance and
/// budget token, although the attempt had gone out. Handed below, a retry stays spent.
#[tokio::test(start_paused = true)]
async fn a_retry_in_flight_when_the_call_is_dropped_stays_spent() {
    let budget = Arc::new(TokenBucket::new(5, 0.0).unwrap());
    let log: Log = Arc::default();
    let seen = Arc::clone(&log);
    // The first attempt answers 503 at once; the retry hangs at the upstream.
    let upstream = service_fn(move |request: Request<Bytes>| {
        let n = {
            let mut seen = seen.lock().unwrap();
            seen.push(Seen {
                request,
                at: clock::now(),
            });
            seen.len()
        };
        async move {
            if n > 1 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            status(503)
        }
    });
    let service = RetryLayer::new(RetryPolicy::default(), budget.clone())
        .with_rng_seed(9)
        .layer(attempts().layer(BoxCloneService::new(upstream)));
    let (_context, request, run) = call_in_run(CallKind::Model, 3);

    let dropped = tokio::time::timeout(Duration::from_secs(5), service.oneshot(request)).await;

    assert!(dropped.is_err(), "the retry was still at the upstream");
    assert_eq!(sent(&log), 2, "the retry went out");
    assert_eq!(
        (run.allowance().left(), budget.available(clock::now())),
        (2, 4),
        "and stays paid for"
    );
}

/// The service below not ready: the retry layer waits for it at most until the deadline can no longer hold an
/// attempt, or the caller cancels — with no deadline layer above and no attempt started — and a retry paid for
/// before that wait is given back.
#[tokio::test(start_paused = true)]
async fn waiting_for_the_service_below_is_bounded_and_sends_nothing() {
    #[derive(Clone)]
    struct ReadyOnce(Arc<std::sync::atomic::AtomicU32>);
    impl tower::Service<Request<Bytes>> for ReadyOnce {
        type Response = Response<Bytes>;
        type Error = Error;
        type Future = std::future::Ready<Result<Response<Bytes>, Error>>;
        fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Error>> {
            if self.0.load(Ordering::SeqCst) == 0 {
                std::task::Poll::Ready(Ok(()))
            } else {
                std::task::Poll::Pending
            }
        }
        fn call(&mut self, _request: Request<Bytes>) -> Self::Future {
            // After its first call the service is never ready again.
            self.0.store(1, Ordering::SeqCst);
            std::future::ready(status(503))
        }
    }
    for cancelled in [false, true] {
        let budget = Arc::new(TokenBucket::new(5, 0.0).unwrap());
        let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let service = RetryLayer::new(RetryPolicy::default(), budget.clone())
            .with_rng_seed(9)
            .layer(attempts().layer(ReadyOnce(Arc::clone(&calls))));
        let (context, request, run) = call_in_run(KEYED, 3);
        let started = clock::now();
        let call = tokio::spawn(service.oneshot(request));
        if cancelled {
            tokio::time::sleep(Duration::from_secs(5)).await;
            context.cancel.cancel();
        }
        let error = call.await.unwrap().expect_err("never ready again");
        let took = clock::now().saturating_duration_since(started);
        if cancelled {
            assert!(matches!(error, Error::Cancelled), "{error}");
            assert_eq!(took, Duration::from_secs(5));
        } else {
            assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
            assert!(
                took < Duration::from_millis(29_950),
                "within the deadline, less its reserve: {took:?}"
            );
        }
        let report = context.report.snapshot();
        assert_eq!(report.attempts.len(), 1, "the wait started no attempt: {report}");
        assert!(
            !report.outcome_unknown,
            "the 503 was an answer, the retry never went out"
        );
        assert_eq!(
            (run.allowance().left(), budget.available(clock::now())),
            (3, 5),
            "the retry that never went out is given back"
        );
    }
}

/// Regression (issue 11): `Retry-After: 18446744073709551616` overflowed, was read as malformed — as if there were
/// none — and the call retried at once (3 attempts in 120 ms). Too large to represent is longer than
/// `max_retry_after`: the call stops, and a model route would move to its next deployment.
#[tokio::test(start_paused = true)]
async fn a_retry_after_too_large_to_represent_stops_the_call() {
    for (name, value) in [
        ("retry-after", "18446744073709551616"),
        ("retry-after-ms", "1e30"),
    ] {
        let (service, log) = retrying(move |_| with_header(503, name, value));
        let (context, request) = call(CallKind::Model);
        let started = clock::now();
        let response = service.oneshot(request).await.expect("the upstream's 503");
        assert_eq!(response.status(), 503);
        assert_eq!(sent(&log), 1, "{name}: not retried at once");
        assert_eq!(clock::now(), started, "{name}: nor after a wait");
        let report = context.report.snapshot();
        assert!(
            matches!(report.stop, Some(StopReason::RetryAfterTooLong { .. })),
            "{name}: {report}"
        );
        assert!(report.stop.unwrap().moves_to_fallback());
    }
}
