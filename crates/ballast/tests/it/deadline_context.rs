//! The deadline layer's context: what a call without one gets, how a call's deadline is shortened (the enclosing
//! scope, the run, nested stacks — the earliest always wins), refusal without calling the inner service, and
//! cancellation.

use crate::support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast::{
    Error, Run, clock,
    context::{CallContext, current_deadline, scope},
    layer::{AttemptLayer, DeadlineLayer},
};
use ballast_core::{BALLAST_TIMEOUT_MS, CallKind, Deadline, ErrorCode, Priority, UpstreamIdempotency};
use bytes::Bytes;
use support::*;
use tower::util::BoxCloneService;
use tower::{Layer as _, ServiceBuilder, ServiceExt as _, service_fn};

const SECOND: Duration = Duration::from_secs(1);

/// What an upstream saw of one call.
#[derive(Clone, Debug)]
struct Seen {
    context: Option<CallContext>,
    scoped: Option<Deadline>,
    timeout_ms: Option<String>,
}

/// An upstream answering 200 at once and keeping what it saw.
fn recording() -> (Upstream, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let service = service_fn(move |request: http::Request<Bytes>| {
        let log = Arc::clone(&log);
        async move {
            log.lock().unwrap().push(Seen {
                context: request.extensions().get::<CallContext>().cloned(),
                scoped: current_deadline(),
                timeout_ms: request
                    .headers()
                    .get(BALLAST_TIMEOUT_MS)
                    .map(|v| v.to_str().unwrap().to_owned()),
            });
            Ok::<_, Error>(http::Response::new(Bytes::new()))
        }
    });
    (BoxCloneService::new(service), seen)
}

fn get() -> http::Request<Bytes> {
    http::Request::get("http://upstream.test/orders/1")
        .body(Bytes::new())
        .unwrap()
}

fn post() -> http::Request<Bytes> {
    http::Request::post("http://upstream.test/refunds")
        .body(Bytes::new())
        .unwrap()
}

fn last(seen: &Arc<Mutex<Vec<Seen>>>) -> Seen {
    seen.lock()
        .unwrap()
        .last()
        .cloned()
        .expect("the upstream was called")
}

#[tokio::test(start_paused = true)]
async fn a_call_without_a_context_gets_the_default_timeout_and_a_kind_read_from_its_method() {
    let (upstream, seen) = recording();
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(30 * SECOND))
        .service(upstream);
    let now = clock::now();
    service.clone().oneshot(get()).await.unwrap();
    let ctx = last(&seen).context.expect("a context");
    assert_eq!(ctx.deadline.instant(), now + 30 * SECOND);
    assert_eq!(ctx.kind, CallKind::ReadOnlyTool);
    assert_eq!(ctx.priority, Priority::default());
    assert_eq!(last(&seen).scoped.map(|d| d.instant()), Some(now + 30 * SECOND));
    service.oneshot(post()).await.unwrap();
    let ctx = last(&seen).context.expect("a context");
    assert_eq!(
        ctx.kind,
        CallKind::SideEffectingTool(UpstreamIdempotency::None),
        "a POST may act: never repeated"
    );
}

#[tokio::test(start_paused = true)]
async fn the_layer_settings_name_the_kind_priority_and_target_of_calls_without_a_context() {
    let (upstream, seen) = recording();
    let layer = DeadlineLayer::new(30 * SECOND)
        .kind(CallKind::Model)
        .priority(Priority::SheddablePlus)
        .target("gpt-4.1");
    let service = ServiceBuilder::new().layer(layer).service(upstream);
    service.oneshot(post()).await.unwrap();
    let ctx = last(&seen).context.expect("a context");
    assert_eq!(ctx.kind, CallKind::Model);
    assert_eq!(ctx.priority, Priority::SheddablePlus);
    assert_eq!(ctx.report.snapshot().target, "gpt-4.1");
}

#[tokio::test(start_paused = true)]
async fn a_call_without_a_context_inside_a_scope_gets_the_scope_deadline() {
    let (upstream, seen) = recording();
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(30 * SECOND))
        .service(upstream);
    let scoped = Deadline::after(clock::now(), 5 * SECOND);
    scope(scoped, service.oneshot(get())).await.unwrap();
    let ctx = last(&seen).context.expect("a context");
    assert_eq!(ctx.deadline.instant(), scoped.instant());
}

#[tokio::test(start_paused = true)]
async fn nested_scopes_and_stacks_keep_the_earliest_deadline() {
    // An outer stack whose upstream calls through an inner stack (a tool that calls a tool).
    let (innermost, seen) = recording();
    let inner_stack = ServiceBuilder::new()
        .layer(DeadlineLayer::new(60 * SECOND))
        .layer(AttemptLayer::new(120 * SECOND))
        .service(innermost);
    let nested = service_fn(move |_outer: http::Request<Bytes>| {
        let inner_stack = inner_stack.clone();
        async move { inner_stack.oneshot(get()).await }
    });
    let outer_stack = ServiceBuilder::new()
        .layer(DeadlineLayer::new(30 * SECOND))
        .service(nested);
    let now = clock::now();

    // The scope (10 s) is earlier than the outer call's context (30 s) and the inner default (60 s).
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(now, 30 * SECOND));
    let call = outer_stack.clone().oneshot(with_context(get(), &ctx));
    scope(Deadline::after(now, 10 * SECOND), call).await.unwrap();
    let inner = last(&seen);
    assert_eq!(inner.scoped.map(|d| d.instant()), Some(now + 10 * SECOND));
    assert_eq!(
        inner.timeout_ms.as_deref(),
        Some("9950"),
        "10 s minus the reserve"
    );

    // A later scope (60 s) never extends the call's own 5 s.
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(now, 5 * SECOND));
    let call = outer_stack.oneshot(with_context(get(), &ctx));
    scope(Deadline::after(now, 60 * SECOND), call).await.unwrap();
    let inner = last(&seen);
    assert_eq!(inner.scoped.map(|d| d.instant()), Some(now + 5 * SECOND));
    assert_eq!(inner.timeout_ms.as_deref(), Some("4950"));
}

#[tokio::test(start_paused = true)]
async fn a_run_keeps_the_earliest_deadline_of_its_calls() {
    let (upstream, seen) = recording();
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(30 * SECOND))
        .layer(AttemptLayer::new(120 * SECOND))
        .service(upstream);
    let now = clock::now();
    let run = Arc::new(Run::new("run-1".into(), 3));

    // The first call of the run brings a 5 s deadline: the run keeps it.
    let mut first = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(now, 5 * SECOND));
    first.run = Some(Arc::clone(&run));
    service
        .clone()
        .oneshot(with_context(get(), &first))
        .await
        .unwrap();
    assert_eq!(run.deadline().map(|d| d.instant()), Some(now + 5 * SECOND));

    // A later call of the run asks for 30 s: it gets the run's 5 s.
    let mut second = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(now, 30 * SECOND));
    second.run = Some(Arc::clone(&run));
    service.oneshot(with_context(get(), &second)).await.unwrap();
    let seen = last(&seen);
    assert_eq!(seen.timeout_ms.as_deref(), Some("4950"));
    let ctx = seen.context.expect("a context");
    assert_eq!(
        ctx.deadline.instant(),
        now + 5 * SECOND,
        "the context below carries the run's deadline"
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_deadline_refuses_without_calling_the_inner_service() {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let upstream = service_fn(move |_request: http::Request<Bytes>| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Error>(http::Response::new(Bytes::new())) }
    });
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(30 * SECOND))
        .service(upstream);
    tokio::time::advance(10 * SECOND).await;
    let passed = Deadline::at(clock::now() - 5 * SECOND);
    let ctx = CallContext::new(CallKind::Model, passed);
    let error = service
        .clone()
        .oneshot(with_context(get(), &ctx))
        .await
        .expect_err("refused");
    assert!(
        matches!(error, Error::DeadlineExceeded(e) if e.remaining == Duration::ZERO),
        "{error}"
    );
    // Inside a scope that has passed, a call without a context is refused too.
    let error = scope(passed, service.oneshot(get())).await.expect_err("refused");
    assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(ctx.report.snapshot().code, Some(ErrorCode::DeadlineExceeded));
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_token_ends_the_call_at_once() {
    let hung = service_fn(|_request: http::Request<Bytes>| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, Error>(http::Response::new(Bytes::new()))
    });
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(30 * SECOND))
        .layer(AttemptLayer::new(20 * SECOND))
        .service(hung);
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), 30 * SECOND));
    let cancel = ctx.cancel.clone();
    let started = clock::now();
    let call = tokio::spawn(service.oneshot(with_context(get(), &ctx)));
    tokio::time::sleep(2 * SECOND).await;
    cancel.cancel();
    let error = call.await.unwrap().expect_err("cancelled");
    assert!(matches!(error, Error::Cancelled), "{error}");
    assert_eq!(clock::now().saturating_duration_since(started), 2 * SECOND);
    let report = ctx.report.snapshot();
    assert_eq!(report.total, 2 * SECOND);
    assert_eq!(report.attempts.len(), 1);
    assert_eq!(
        report.attempts[0].result,
        ballast::report::AttemptResult::Error("cancelled".into())
    );
    // A cancelled context starts nothing more.
    let (upstream, seen) = recording();
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(30 * SECOND))
        .service(upstream);
    let error = service
        .oneshot(with_context(get(), &ctx))
        .await
        .expect_err("cancelled");
    assert!(matches!(error, Error::Cancelled), "{error}");
    assert!(seen.lock().unwrap().is_empty());
}

/// A service below the deadline layer that reads the deadline in its `call` itself (not in its future) sees it:
/// the layer calls it in the deadline's scope, whether it calls it at once or once it is ready.
#[tokio::test(start_paused = true)]
async fn a_service_reading_the_deadline_in_its_call_sees_it() {
    let seen: Arc<Mutex<Option<Deadline>>> = Arc::default();
    let record = Arc::clone(&seen);
    let service = ServiceBuilder::new()
        .layer(DeadlineLayer::new(2 * SECOND))
        .service(service_fn(move |_request: http::Request<Bytes>| {
            *record.lock().unwrap() = current_deadline();
            std::future::ready(Ok::<_, Error>(http::Response::new(Bytes::new())))
        }));
    let started = clock::now();
    service.oneshot(http::Request::new(Bytes::new())).await.unwrap();
    let deadline = seen.lock().unwrap().expect("the deadline in scope");
    assert_eq!(deadline.remaining(started), 2 * SECOND);
}

/// The deadline holds on its own timer, whatever waits below it: a side-effecting call whose service below waits
/// with no bound of its own ends at the deadline. What the dropped work had sent is not the deadline layer's to
/// know, so the report says the outcome is unknown (a caller checks before doing it again); a read-only call's is
/// never unknown.
#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_call_whatever_waits_below_and_a_side_effect_it_dropped_is_unknown() {
    let unbounded = service_fn(|_request: http::Request<Bytes>| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, Error>(http::Response::new(Bytes::new()))
    });
    let service = DeadlineLayer::new(30 * SECOND).layer(unbounded);
    for (kind, unknown) in [
        (CallKind::SideEffectingTool(UpstreamIdempotency::None), true),
        (CallKind::ReadOnlyTool, false),
    ] {
        let ctx = CallContext::new(kind, Deadline::after(clock::now(), 2 * SECOND));
        let started = clock::now();
        let error = service
            .clone()
            .oneshot(with_context(post(), &ctx))
            .await
            .expect_err("dropped at the deadline");
        assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
        // Less its reserve: the caller has its error before its deadline.
        assert_eq!(
            clock::now().saturating_duration_since(started),
            2 * SECOND - ballast_core::DEFAULT_RESERVE
        );
        let report = ctx.report.snapshot();
        let code = if unknown {
            ErrorCode::OutcomeUnknown
        } else {
            ErrorCode::DeadlineExceeded
        };
        assert_eq!(report.code, Some(code));
        assert_eq!(report.outcome_unknown, unknown, "{kind:?}: {report}");
    }
}
