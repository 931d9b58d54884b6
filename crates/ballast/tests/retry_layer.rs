//! The retry layer over scripted test doubles (`tower::service_fn`), paused time and a seeded generator: what
//! each attempt carries, what is never retried, local rejections, cancellation (issue 4, test 7's first half),
//! and the report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast::{
    AttemptNumber, AttemptResult, CallContext, Error, OutcomeReport, Report, Retry, RetryLayer, clock,
};
use ballast_core::{
    CallKind, Deadline, ErrorCode, RatioBudget, RetryPolicy, StopReason, UpstreamIdempotency,
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

fn retrying<F>(answer: F) -> (Retry<Upstream>, Log)
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
    let layer = RetryLayer::new(RetryPolicy::default(), Arc::new(RatioBudget::default())).with_rng_seed(9);
    (layer.layer(BoxCloneService::new(upstream)), log)
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
    Error::Timeout {
        after: Duration::from_secs(2),
    }
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
                request.headers().clone(),
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
    assert_eq!(attempt.result, AttemptResult::Error(timeout().to_string()));
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
    assert!(
        texts[0].contains("timed out") && texts[2].contains("timed out"),
        "{texts:?}"
    );
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
async fn the_failed_answer_is_freed_before_the_sleep() {
    struct Tracked(Arc<AtomicBool>);
    impl AsRef<[u8]> for Tracked {
        fn as_ref(&self) -> &[u8] {
            b"{\"error\": {\"code\": \"overloaded\"}}"
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

#[tokio::test(start_paused = true)]
async fn attempts_recorded_below_are_not_recorded_twice() {
    // A double that records its own attempts, as the attempt layer does: the first one left pending.
    let upstream = service_fn(|request: Request<Bytes>| async move {
        let report: Report = request.extensions().get::<CallContext>().unwrap().report.clone();
        let AttemptNumber(n) = *request.extensions().get::<AttemptNumber>().unwrap();
        let index = report.start_attempt(n);
        if n == 1 {
            return status(503);
        }
        report.finish_attempt(index, AttemptResult::Status(200), Duration::from_millis(7), true);
        status(200)
    });
    let service = RetryLayer::new(RetryPolicy::default(), Arc::new(RatioBudget::default()))
        .with_rng_seed(1)
        .layer(upstream);
    let (context, request) = call(CallKind::Model);

    service.oneshot(request).await.expect("an answer");

    let report = context.report.snapshot();
    assert_eq!(results(&report), [503, 200].map(AttemptResult::Status));
    assert_eq!(
        report.attempts[1].duration,
        Duration::from_millis(7),
        "kept as recorded below"
    );
    assert!(report.attempts[0].sent, "the pending record is completed");
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
