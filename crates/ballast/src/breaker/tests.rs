//! The breaker layer over `service_fn` doubles: what each outcome tells the breaker, latency on the clock, the
//! report. The breaker scenario against the chaos upstream is in `tests/it/breaker_chaos.rs`.

use std::sync::Arc;
use std::time::Duration;

use ballast_core::{BreakerConfig, BreakerState, CallKind, CallResult, CircuitBreaker, Deadline};
use bytes::Bytes;
use tower::{Layer, ServiceExt, service_fn};

use super::BreakerLayer;
use super::attempt::breaker_result;
use crate::{Body, CallContext, Error, clock};

const OPEN_FOR: Duration = Duration::from_secs(30);

type Answer = Result<http::Response<Body>, Error>;

/// A breaker opening on `failures` in a row (at any spread: the tests' calls share an instant), open exactly
/// `OPEN_FOR`, one probe closing it.
fn breaker(failures: u32, slow_call: Option<Duration>) -> Arc<CircuitBreaker> {
    let config = BreakerConfig::builder()
        .consecutive_failures(failures)
        .consecutive_spread(Duration::ZERO)
        .failure_rate(None)
        .open_for(OPEN_FOR)
        .open_jitter(0.0)
        .half_open_probes(1)
        .success_threshold(1)
        .slow_call(slow_call)
        .build()
        .unwrap();
    Arc::new(CircuitBreaker::seeded(config, Some(11)))
}

fn answer(status: u16, replayed: bool) -> http::Response<Body> {
    let mut builder = http::Response::builder().status(status);
    if replayed {
        builder = builder.header("Idempotent-Replayed", "true");
    }
    builder.body(Body::empty()).unwrap()
}

/// A 2xx whose body is a stream after its commit point, as a transport reads a streamed call's answer.
fn streamed(status: u16) -> http::Response<Body> {
    use http_body_util::BodyExt as _;
    let rest = http_body_util::Full::new(Bytes::from_static(b"data: [DONE]\n\n"))
        .map_err(|never| match never {})
        .boxed_unsync();
    let body = Body::stream(Bytes::from_static(b"data: {}\n\n"), rest, 1024);
    http::Response::builder().status(status).body(body).unwrap()
}

/// The permit a streamed answer carries.
fn permit_of(response: http::Response<Body>) -> Box<dyn crate::body::StreamEnd> {
    let stream = response.into_body().into_stream().expect("a stream");
    stream.permit.expect("the permit travels in the body")
}

/// One call through the layer to an upstream that waits `latency`, then gives `result()`.
async fn call_once(
    breaker: &Arc<CircuitBreaker>,
    latency: Duration,
    result: impl Fn() -> Answer + Clone + Send + 'static,
    ctx: Option<&CallContext>,
) -> Answer {
    let upstream = service_fn(move |_request: http::Request<Bytes>| {
        let result = result.clone();
        async move {
            tokio::time::sleep(latency).await;
            result()
        }
    });
    let mut request = http::Request::new(Bytes::new());
    if let Some(ctx) = ctx {
        request.extensions_mut().insert(ctx.clone());
    }
    BreakerLayer::new(Arc::clone(breaker))
        .layer(upstream)
        .oneshot(request)
        .await
}

/// [`call_once`] of a streamed attempt: its 2xx is a stream.
async fn call_streamed(
    breaker: &Arc<CircuitBreaker>,
    latency: Duration,
    result: impl Fn() -> Answer + Clone + Send + 'static,
) -> Answer {
    call_once(breaker, latency, result, None).await
}

#[test]
fn results_map_as_the_design_says() {
    let cases: Vec<(Answer, Option<CallResult>)> = vec![
        (Ok(answer(200, false)), Some(CallResult::Success)),
        (Ok(streamed(200)), Some(CallResult::Success)),
        (Ok(answer(404, false)), Some(CallResult::Success)),
        (Ok(answer(429, false)), Some(CallResult::Overloaded)),
        (Ok(answer(503, false)), Some(CallResult::Failure)),
        (
            Ok(http::Response::builder()
                .status(503)
                .header("retry-after", "1")
                .body(Body::empty())
                .unwrap()),
            Some(CallResult::Overloaded),
        ),
        (
            Ok(http::Response::builder()
                .status(503)
                .header("retry-after-ms", "10")
                .body(Body::empty())
                .unwrap()),
            Some(CallResult::Overloaded),
        ),
        (Ok(answer(529, false)), Some(CallResult::Overloaded)),
        (Ok(answer(200, true)), Some(CallResult::Ignored)),
        (Ok(answer(500, true)), Some(CallResult::Ignored)),
        (
            Err(Error::timeout(Duration::from_secs(1))),
            Some(CallResult::Failure),
        ),
        (Err(Error::transport(true, "reset")), Some(CallResult::Failure)),
        (Err(Error::transport(false, "refused")), Some(CallResult::Failure)),
        (Err(Error::Cancelled), None),
        (Err(Error::CircuitOpen { retry_in: None }), None),
        (
            Err(Error::Overloaded {
                reason: crate::Overload::QueueFull,
                retry_after: None,
            }),
            None,
        ),
        (Err(Error::BodyTooLarge { limit: 10 }), None),
    ];
    for (result, expected) in cases {
        assert_eq!(breaker_result(&result), expected, "{result:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn local_errors_and_cancellations_are_not_counted() {
    let breaker = breaker(2, None);
    for _ in 0..10 {
        let result = call_once(&breaker, Duration::ZERO, || Err(Error::Cancelled), None).await;
        assert!(matches!(result, Err(Error::Cancelled)));
    }
    assert_eq!(breaker.snapshot(clock::now()).consecutive_failures, 0);
    let timeout = || Err(Error::timeout(Duration::from_secs(1)));
    for _ in 0..2 {
        let _ = call_once(&breaker, Duration::ZERO, timeout, None).await;
    }
    assert_eq!(
        breaker.state(clock::now()),
        BreakerState::Open,
        "timeouts are failures"
    );
}

/// An attempt the caller's deadline cut is no failure (a caller in a hurry says nothing about the upstream) —
/// unless it had already run longer than `slow_call`, when it would have been a slow call however it ended.
#[tokio::test(start_paused = true)]
async fn attempts_cut_by_the_callers_deadline_count_only_past_slow_call() {
    let cut = |after: Duration| {
        move || {
            Err(Error::Timeout {
                after,
                by_deadline: true,
            })
        }
    };
    let quick = Duration::from_millis(500);
    for slow_call in [None, Some(Duration::from_secs(1))] {
        let breaker = breaker(2, slow_call);
        for _ in 0..5 {
            let result = call_once(&breaker, quick, cut(quick), None).await;
            assert!(matches!(result, Err(Error::Timeout { .. })), "{result:?}");
        }
        let snapshot = breaker.snapshot(clock::now());
        assert_eq!(
            (snapshot.state, snapshot.consecutive_failures),
            (BreakerState::Closed, 0),
            "{slow_call:?}"
        );
    }
    let breaker = breaker(2, Some(Duration::from_secs(1)));
    let long = Duration::from_secs(2);
    for _ in 0..2 {
        let _ = call_once(&breaker, long, cut(long), None).await;
    }
    assert_eq!(
        breaker.state(clock::now()),
        BreakerState::Open,
        "cut after 2 s, past slow_call"
    );
}

#[tokio::test(start_paused = true)]
async fn replays_are_not_counted_and_free_their_probe_slot() {
    let breaker = breaker(1, None);
    let _ = call_once(&breaker, Duration::ZERO, || Ok(answer(503, false)), None).await;
    tokio::time::advance(OPEN_FOR).await;
    for _ in 0..3 {
        let replay = call_once(&breaker, Duration::ZERO, || Ok(answer(200, true)), None).await;
        assert_eq!(replay.unwrap().status(), 200, "the replay passes through");
        let snapshot = breaker.snapshot(clock::now());
        assert_eq!(
            snapshot.state,
            BreakerState::HalfOpen,
            "a replay is no probe success"
        );
        assert_eq!(snapshot.probes_in_flight, 0, "its probe slot is free again");
    }
    let _ = call_once(&breaker, Duration::ZERO, || Ok(answer(200, false)), None).await;
    assert_eq!(breaker.state(clock::now()), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn latency_runs_from_the_permit_to_the_answer_on_the_clock() {
    let breaker = breaker(1, Some(Duration::from_secs(1)));
    let ok = || Ok(answer(200, false));
    let _ = call_once(&breaker, Duration::from_millis(900), ok, None).await;
    assert_eq!(
        breaker.state(clock::now()),
        BreakerState::Closed,
        "900 ms is not slow"
    );
    let answered = call_once(&breaker, Duration::from_millis(1500), ok, None).await;
    assert_eq!(answered.unwrap().status(), 200);
    assert_eq!(
        breaker.state(clock::now()),
        BreakerState::Open,
        "a 1.5 s success is a slow call, a failure"
    );
}

#[tokio::test(start_paused = true)]
async fn the_report_says_the_state_after_each_attempt() {
    let breaker = breaker(1, None);
    let deadline = Deadline::after(clock::now(), Duration::from_secs(60));
    let ctx = CallContext::new(CallKind::ReadOnlyTool, deadline);
    let _ = call_once(&breaker, Duration::ZERO, || Ok(answer(200, false)), Some(&ctx)).await;
    assert_eq!(ctx.report.snapshot().breaker, Some(BreakerState::Closed));
    let _ = call_once(&breaker, Duration::ZERO, || Ok(answer(502, false)), Some(&ctx)).await;
    assert_eq!(ctx.report.snapshot().breaker, Some(BreakerState::Open));

    let refused = call_once(&breaker, Duration::ZERO, || Ok(answer(200, false)), Some(&ctx)).await;
    match refused {
        Err(Error::CircuitOpen { retry_in }) => assert_eq!(retry_in, Some(OPEN_FOR)),
        other => panic!("expected a fail-fast refusal, got {other:?}"),
    }
    assert_eq!(ctx.report.snapshot().breaker, Some(BreakerState::Open));
    tokio::time::advance(OPEN_FOR).await;
    let _ = call_once(&breaker, Duration::ZERO, || Ok(answer(200, false)), Some(&ctx)).await;
    assert_eq!(ctx.report.snapshot().breaker, Some(BreakerState::Closed));
}

/// A streamed 2xx records nothing at once: its permit travels with the answer and counts when recorded, with
/// the time to first byte as the latency.
#[tokio::test(start_paused = true)]
async fn a_streamed_2xx_hands_its_permit_on_instead_of_recording() {
    let breaker = breaker(2, Some(Duration::from_secs(1)));
    let ok = || Ok(streamed(200));
    let mut permits = Vec::new();
    for _ in 0..2 {
        let answered = call_streamed(&breaker, Duration::from_millis(300), ok)
            .await
            .unwrap();
        permits.push(permit_of(answered));
    }
    let s = breaker.snapshot(clock::now());
    assert_eq!(
        (s.state, s.window_calls),
        (BreakerState::Closed, 0),
        "nothing counted yet"
    );
    // The streams die long after their first byte: failures. (A permit is a value: recorded once, by its owner.)
    tokio::time::advance(Duration::from_secs(20)).await;
    let mut permits = permits.into_iter();
    let first = permits.next().unwrap();
    assert_eq!(
        first.record(CallResult::Failure, clock::now()),
        BreakerState::Closed
    );
    let second = permits.next().unwrap();
    assert_eq!(
        second.record(CallResult::Failure, clock::now()),
        BreakerState::Open
    );
}

#[tokio::test(start_paused = true)]
async fn a_streamed_success_is_slow_only_by_its_time_to_first_byte() {
    let breaker = breaker(1, Some(Duration::from_secs(1)));
    let ok = || Ok(streamed(200));
    let quick = call_streamed(&breaker, Duration::from_millis(900), ok)
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(
        permit_of(quick).record(CallResult::Success, clock::now()),
        BreakerState::Closed,
        "a 30 s stream whose first byte came in 900 ms is not slow"
    );
    let slow = call_streamed(&breaker, Duration::from_millis(1500), ok)
        .await
        .unwrap();
    assert_eq!(
        permit_of(slow).record(CallResult::Success, clock::now()),
        BreakerState::Open,
        "a first byte after 1.5 s is a slow call"
    );
}

/// Error answers and errors before the first chunk of a stream count at once, as for any attempt.
#[tokio::test(start_paused = true)]
async fn a_streamed_error_counts_at_once() {
    let breaker = breaker(2, None);
    let failed = call_streamed(&breaker, Duration::ZERO, || Ok(answer(503, false)))
        .await
        .unwrap();
    assert!(
        !failed.body().is_stream(),
        "an error answer is read whole: counted at once"
    );
    let reset = call_streamed(&breaker, Duration::ZERO, || Err(Error::transport(true, "reset"))).await;
    assert!(reset.is_err());
    assert_eq!(breaker.state(clock::now()), BreakerState::Open);
}

/// A half-open probe stream holds its slot while its permit lives; dropped unrecorded, it frees it and counts
/// nothing.
#[tokio::test(start_paused = true)]
async fn a_streamed_probe_holds_its_slot_until_its_permit_goes() {
    let breaker = breaker(1, None);
    let _ = call_once(&breaker, Duration::ZERO, || Ok(answer(503, false)), None).await;
    tokio::time::advance(OPEN_FOR).await;
    let probe = call_streamed(&breaker, Duration::ZERO, || Ok(streamed(200)))
        .await
        .unwrap();
    let refused = call_once(&breaker, Duration::ZERO, || Ok(answer(200, false)), None).await;
    assert!(matches!(refused, Err(Error::CircuitOpen { .. })), "{refused:?}");
    drop(probe);
    let s = breaker.snapshot(clock::now());
    assert_eq!(
        (s.state, s.probes_in_flight, s.probe_successes),
        (BreakerState::HalfOpen, 0, 0)
    );
    let _ = call_once(&breaker, Duration::ZERO, || Ok(answer(200, false)), None).await;
    assert_eq!(breaker.state(clock::now()), BreakerState::Closed);
}

/// Through the layer with a throttle: `status` answered at once.
async fn through_with_throttle(
    breaker: &Arc<CircuitBreaker>,
    throttle: &Arc<ballast_core::AdaptiveThrottle>,
    status: u16,
) -> Answer {
    let upstream =
        service_fn(
            move |_request: http::Request<Bytes>| async move { Ok::<_, Error>(answer(status, false)) },
        );
    BreakerLayer::new(Arc::clone(breaker))
        .with_throttle(Some(Arc::clone(throttle)))
        .layer(upstream)
        .oneshot(http::Request::new(Bytes::new()))
        .await
}

/// When the breaker closes after successful probes, the throttle forgets what it counted: the timeouts of
/// attempts sent before the breaker opened, which end while it is open or half-open, must not throttle the
/// recovered upstream (they did, for seconds, in the bench's dead-upstream run with hangs).
#[tokio::test(start_paused = true)]
async fn a_breaker_closing_after_its_probes_restarts_the_throttle() {
    use ballast_core::{AdaptiveThrottle, ThrottleConfig, ThrottleOutcome};
    let breaker = breaker(1, None);
    let throttle = Arc::new(AdaptiveThrottle::seeded(ThrottleConfig::default(), Some(1)));
    let _ = through_with_throttle(&breaker, &throttle, 500).await;
    assert_eq!(breaker.state(clock::now()), BreakerState::Open);
    tokio::time::advance(OPEN_FOR).await;
    // Late timeouts of attempts sent before it opened.
    for _ in 0..20 {
        throttle.record(ThrottleOutcome::Unanswered, clock::now());
    }
    assert!(throttle.snapshot(clock::now()).probability > 0.9);
    let probe = through_with_throttle(&breaker, &throttle, 200)
        .await
        .expect("the probe is not throttled");
    assert_eq!(probe.status(), 200);
    assert_eq!(breaker.state(clock::now()), BreakerState::Closed);
    let after = throttle.snapshot(clock::now());
    assert_eq!(
        (after.requests, after.refused_total),
        (0, 0),
        "restarted, and the probe was never refused"
    );
}
