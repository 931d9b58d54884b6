//! The retry layer against the chaos upstream, in process with paused time (issue 4, tests 4, 6 and 9).
//!
//! The chaos router is called directly through a small adapter below (`Request<Bytes>` to axum's body and the
//! answer's body collected), under an attempt layer (an hour per try) that writes each attempt's report line.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ballast::{
    Error, Run, clock,
    context::{AttemptNumber, CallContext},
    layer::{AttemptLayer, RetryLayer},
    report::{AttemptResult, OutcomeReport},
};
use ballast_chaos::{EndpointProfile, ErrorRate, Profile, RetryAfterForm, Script, ScriptStep};
use ballast_core::{BALLAST_ATTEMPT, CallKind, Deadline, RatioBudget, RetryBudget, RetryPolicy, StopReason};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use serde_json::json;
use tower::{Layer, Service, ServiceExt, service_fn};

/// The largest answer body the adapter collects.
const BODY_LIMIT: usize = 1 << 20;

/// The attempt layer over the chaos router, counting the attempts that reach it.
fn chaos(
    profile: Profile,
    sent: Arc<AtomicUsize>,
) -> impl Service<
    Request<Bytes>,
    Response = Response<ballast::Body>,
    Error = Error,
    Future = BoxFuture<'static, Result<Response<ballast::Body>, Error>>,
> + Clone
+ Send
+ 'static {
    AttemptLayer::new(Duration::from_secs(3600)).layer(router(profile, sent))
}

/// The chaos router as the transport, counting the attempts that reach it. Sets `ballast-attempt` from the
/// [`AttemptNumber`], as the attempt layer does.
fn router(
    profile: Profile,
    sent: Arc<AtomicUsize>,
) -> impl Service<
    Request<Bytes>,
    Response = Response<Bytes>,
    Error = Error,
    Future = BoxFuture<'static, Result<Response<Bytes>, Error>>,
> + Clone
+ Send
+ 'static {
    let router = ballast_chaos::router(profile);
    service_fn(move |request: Request<Bytes>| {
        let router = router.clone();
        sent.fetch_add(1, Ordering::SeqCst);
        let future: BoxFuture<'static, _> = Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            if let Some(AttemptNumber(n)) = parts.extensions.get::<AttemptNumber>().copied() {
                parts.headers.insert(BALLAST_ATTEMPT, n.into());
            }
            let request = Request::from_parts(parts, axum::body::Body::from(body));
            let Ok(response) = router.oneshot(request).await;
            let (parts, body) = response.into_parts();
            let body = axum::body::to_bytes(body, BODY_LIMIT)
                .await
                .map_err(|lost| Error::transport(true, lost))?;
            Ok(Response::from_parts(parts, body))
        });
        future
    })
}

/// A profile where `lookup_order` meets `faults` and, for operation `op`, `steps`.
fn lookup_profile(faults: EndpointProfile, op: &str, steps: &[ScriptStep]) -> Profile {
    let mut profile = Profile::default();
    profile.endpoints.insert("lookup_order".into(), faults);
    profile.scripts = vec![Script {
        endpoint: "lookup_order".into(),
        op: op.into(),
        steps: steps.to_vec(),
    }];
    profile
}

/// An upstream that answers every tool call 503.
fn always_503() -> Profile {
    let mut profile = Profile::default();
    profile.default.errors = vec![ErrorRate {
        status: 503,
        rate: 1.0,
    }];
    profile
}

/// A read-only call of operation `op` under a deadline `timeout` from now, and its request.
fn lookup(op: &str, timeout: Duration) -> (CallContext, Request<Bytes>) {
    let context = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), timeout));
    let body = json!({"op": op, "order_id": "A-1001"}).to_string();
    let mut request = Request::post("http://chaos.internal/tools/lookup_order")
        .header("content-type", "application/json")
        .body(Bytes::from(body))
        .expect("a valid request");
    request.extensions_mut().insert(context.clone());
    (context, request)
}

fn layer(budget: Arc<dyn RetryBudget>) -> RetryLayer {
    RetryLayer::new(RetryPolicy::default(), budget).with_rng_seed(4)
}

fn statuses(report: &OutcomeReport) -> Vec<AttemptResult> {
    report.attempts.iter().map(|a| a.result.clone()).collect()
}

const THIRTY_SECONDS: Duration = Duration::from_secs(30);

#[tokio::test(start_paused = true)]
async fn unavailable_twice_then_answered() {
    let sent = Arc::new(AtomicUsize::new(0));
    let profile = lookup_profile(
        EndpointProfile::default(),
        "op-1",
        &[ScriptStep::Status(503), ScriptStep::Status(503), ScriptStep::Ok],
    );
    let service = layer(Arc::new(RatioBudget::default())).layer(chaos(profile, Arc::clone(&sent)));
    let (context, request) = lookup("op-1", THIRTY_SECONDS);

    let response = service.oneshot(request).await.expect("an answer");

    assert_eq!(response.status(), 200);
    let body: serde_json::Value =
        serde_json::from_slice(response.body().as_bytes().expect("a whole answer")).unwrap();
    assert_eq!(body["order_id"], "A-1001");
    assert_eq!(sent.load(Ordering::SeqCst), 3);
    let report = context.report.snapshot();
    assert_eq!(statuses(&report), [503, 503, 200].map(AttemptResult::Status));
    assert_eq!(report.stop, None);
    assert_eq!(report.code, None);
}

#[tokio::test(start_paused = true)]
async fn retry_after_2_is_waited_for_plus_jitter() {
    let faults = EndpointProfile {
        retry_after: Some(RetryAfterForm::Seconds(2)),
        ..EndpointProfile::default()
    };
    let profile = lookup_profile(faults, "op-2", &[ScriptStep::Status(503), ScriptStep::Ok]);
    let sent = Arc::new(AtomicUsize::new(0));
    let service = layer(Arc::new(RatioBudget::default())).layer(chaos(profile, Arc::clone(&sent)));
    let (_context, request) = lookup("op-2", THIRTY_SECONDS);

    let started = clock::now();
    let response = service.oneshot(request).await.expect("an answer");
    let waited = clock::now().saturating_duration_since(started);

    assert_eq!(response.status(), 200);
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    assert!(
        waited > Duration::from_secs(2) && waited <= Duration::from_millis(2_200),
        "waited {waited:?}: never earlier than asked, plus a jitter (non-zero with this seed) of at most 10%"
    );
}

#[tokio::test(start_paused = true)]
async fn an_http_date_retry_after_is_waited_for() {
    let faults = EndpointProfile {
        retry_after: Some(RetryAfterForm::HttpDate(Duration::from_secs(3))),
        ..EndpointProfile::default()
    };
    let profile = lookup_profile(faults, "op-3", &[ScriptStep::Status(503), ScriptStep::Ok]);
    let service = layer(Arc::new(RatioBudget::default())).layer(chaos(profile, Arc::default()));
    let (_context, request) = lookup("op-3", THIRTY_SECONDS);

    let started = clock::now();
    let response = service.oneshot(request).await.expect("an answer");
    let waited = clock::now().saturating_duration_since(started);

    assert_eq!(response.status(), 200);
    // The date is whole seconds, rounded up by the server, and read against the real wall clock.
    assert!(
        waited >= Duration::from_millis(2_900) && waited <= Duration::from_millis(4_400),
        "waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_120_with_30_seconds_left_stops_at_once() {
    let faults = EndpointProfile {
        retry_after: Some(RetryAfterForm::Seconds(120)),
        ..EndpointProfile::default()
    };
    let profile = lookup_profile(faults, "op-4", &[ScriptStep::Status(503), ScriptStep::Ok]);
    let sent = Arc::new(AtomicUsize::new(0));
    let service = layer(Arc::new(RatioBudget::default())).layer(chaos(profile, Arc::clone(&sent)));
    let (context, request) = lookup("op-4", THIRTY_SECONDS);

    let started = clock::now();
    let response = service.oneshot(request).await.expect("the upstream's own answer");

    assert_eq!(clock::now(), started, "no wait at all");
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "120");
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    let report = context.report.snapshot();
    assert_eq!(
        report.stop,
        Some(StopReason::RetryAfterTooLong {
            asked: Duration::from_secs(120),
            max: Duration::from_secs(60),
        })
    );
    assert_eq!(report.code.map(|c| c.as_str()), Some("upstream_error"));
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_beyond_the_deadline_stops_at_once() {
    // Within max_retry_after, but 40 s do not fit in 30 s: the deadline stops the call before any wait.
    let faults = EndpointProfile {
        retry_after: Some(RetryAfterForm::Seconds(40)),
        ..EndpointProfile::default()
    };
    let profile = lookup_profile(faults, "op-5", &[ScriptStep::Status(503), ScriptStep::Ok]);
    let service = layer(Arc::new(RatioBudget::default())).layer(chaos(profile, Arc::default()));
    let (context, request) = lookup("op-5", THIRTY_SECONDS);

    let started = clock::now();
    let response = service.oneshot(request).await.expect("the upstream's own answer");

    assert_eq!(clock::now(), started);
    assert_eq!(response.status(), 503);
    let report = context.report.snapshot();
    assert!(
        matches!(report.stop, Some(StopReason::Deadline(_))),
        "{:?}",
        report.stop
    );
    assert_eq!(report.code.map(|c| c.as_str()), Some("deadline_exceeded"));
}

#[tokio::test(start_paused = true)]
async fn a_thousand_calls_to_an_always_503_upstream_stay_within_the_budget() {
    const CALLS: usize = 1_000;
    let sent = Arc::new(AtomicUsize::new(0));
    let budget = Arc::new(RatioBudget::default());
    let service = layer(budget.clone()).layer(chaos(always_503(), Arc::clone(&sent)));

    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let service = service.clone();
            let (context, request) = lookup(&format!("op-{i}"), THIRTY_SECONDS);
            tokio::spawn(async move {
                let response = service.oneshot(request).await.expect("the upstream's 503");
                (response.status(), context.report.snapshot())
            })
        })
        .collect();
    let mut refused_calls = 0;
    for call in calls {
        let (status, report) = call.await.expect("the call's task");
        assert_eq!(status, 503);
        refused_calls += usize::from(report.stop == Some(StopReason::RetryBudgetExhausted));
    }

    let attempts = sent.load(Ordering::SeqCst);
    let ratio = RatioBudget::DEFAULT_RATIO;
    let floor = RatioBudget::DEFAULT_MIN_PER_SEC as usize * RatioBudget::DEFAULT_WINDOW.as_secs() as usize;
    let allowed = (ratio * CALLS as f64) as usize + floor;
    println!(
        "{CALLS} calls to an always-503 upstream: {attempts} attempts, amplification {:.3} \
         (without a budget: up to 3.000; the budget allows {allowed} retries; {refused_calls} calls stopped by it, \
         {} refusals)",
        attempts as f64 / CALLS as f64,
        budget.refused()
    );
    // Paused time and seeded jitter make the run deterministic, and the budget grants exactly its floor plus
    // 20% of the calls: never more (the bound), and no fewer — every call's first attempt is deposited (a budget
    // that dropped deposits would grant only its floor).
    assert_eq!(
        attempts,
        CALLS + allowed,
        "{attempts} attempts for {CALLS} calls: the budget allows exactly {allowed} retries"
    );
    assert!(refused_calls > 0 && budget.refused() > 0);
}

#[tokio::test(start_paused = true)]
async fn a_runs_allowance_is_shared_by_its_calls() {
    const CALLS: usize = 10;
    let sent = Arc::new(AtomicUsize::new(0));
    let service = layer(Arc::new(RatioBudget::default())).layer(chaos(always_503(), Arc::clone(&sent)));
    let run = Arc::new(Run::new("run-9".into(), 3));
    let call_of_the_run = |op: String| {
        let (mut context, mut request) = lookup(&op, THIRTY_SECONDS);
        context.run = Some(Arc::clone(&run));
        request.extensions_mut().insert(context.clone());
        let service = service.clone();
        async move {
            let response = service.oneshot(request).await.expect("the upstream's 503");
            assert_eq!(response.status(), 503);
            context.report.snapshot()
        }
    };

    let reports = futures::future::join_all((0..CALLS).map(|i| call_of_the_run(format!("op-{i}")))).await;

    assert_eq!(
        sent.load(Ordering::SeqCst),
        CALLS + 3,
        "three retries across the whole run"
    );
    assert_eq!(run.allowance().left(), 0);
    let retried: usize = reports.iter().map(|r| r.attempts.len() - 1).sum();
    assert_eq!(retried, 3);
    for report in &reports {
        assert!(
            matches!(
                report.stop,
                Some(StopReason::RunAllowanceExhausted | StopReason::AttemptsExhausted { .. })
            ),
            "{:?}",
            report.stop
        );
        assert_eq!(report.run_allowance_left, Some(0));
    }
    // Once spent, no call of the run retries.
    let later = call_of_the_run("op-later".into()).await;
    assert_eq!(later.attempts.len(), 1);
    assert_eq!(later.stop, Some(StopReason::RunAllowanceExhausted));
    assert_eq!(later.code.map(|c| c.as_str()), Some("run_allowance_exhausted"));
}
