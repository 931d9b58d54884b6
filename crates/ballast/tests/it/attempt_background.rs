//! Cancellation (issue 4, test 7, second half): a sent side-effecting attempt is never abandoned. Dropping the
//! caller's future (or cancelling its token) while a refund is in flight leaves the attempt running to its own
//! end: the chaos ledger shows the execution once the attempt completes in the background, and the call's
//! report records it, marked background. A read-only attempt, by contrast, is dropped with its caller.

use crate::support;

use std::time::Duration;

use ballast::{
    Error, clock,
    context::CallContext,
    layer::{AttemptLayer, DeadlineLayer},
    report::AttemptResult,
};
use ballast_chaos::{EndpointProfile, LoseMode, ScriptStep};
use ballast_core::{CallKind, Deadline, UpstreamIdempotency};
use serde_json::json;
use support::*;
use tower::{Layer, ServiceExt as _, service_fn};

const REFUND: &str = "create_refund";
const SECOND: Duration = Duration::from_secs(1);

fn refund(op: &str, key: &str) -> http::Request<bytes::Bytes> {
    let mut request = tool_request(REFUND, &json!({"op": op, "order_id": "A-1001", "amount": 1250}));
    request
        .headers_mut()
        .insert("idempotency-key", key.parse().expect("a header value"));
    request
}

fn side_effecting() -> CallContext {
    CallContext::new(
        CallKind::SideEffectingTool(UpstreamIdempotency::None),
        Deadline::after(clock::now(), 30 * SECOND),
    )
}

#[tokio::test(start_paused = true)]
async fn dropping_the_caller_during_a_sent_refund_does_not_abort_it_and_its_outcome_is_recorded() {
    // The refund executes 2 s after it arrives.
    let router = ballast_chaos::router(scripted(REFUND, slow(2 * SECOND), &[]));
    let service = stack(router.clone(), DeadlineLayer::new(30 * SECOND), 10 * SECOND);
    let ctx = side_effecting();

    let call = service.oneshot(with_context(refund("refund-7", "key-7"), &ctx));
    let gave_up = tokio::time::timeout(SECOND, call).await;
    assert!(
        gave_up.is_err(),
        "the caller gives up after 1 s and drops the call"
    );
    assert_eq!(executions(&router, "refund-7").await, 0, "not executed yet");
    let pending = &ctx.report.snapshot().attempts[0];
    assert_eq!(pending.result, AttemptResult::Pending, "still running");

    tokio::time::sleep(2 * SECOND).await;
    assert_eq!(
        executions(&router, "refund-7").await,
        1,
        "the attempt went on without its caller"
    );
    let report = ctx.report.snapshot();
    let attempt = &report.attempts[0];
    assert_eq!(attempt.result, AttemptResult::Status(200));
    assert_eq!(attempt.duration, 2 * SECOND);
    assert!(attempt.sent && attempt.background, "{report}");
    assert!(
        report.to_string().contains("finished after the caller left"),
        "{report}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refund_whose_answer_is_lost_runs_to_its_own_timeout_after_the_caller_left() {
    let lost: &[ScriptStep] = &[ScriptStep::CommitThenLose];
    let faults = EndpointProfile {
        lose_with: LoseMode::Hang,
        ..EndpointProfile::default()
    };
    let router = ballast_chaos::router(scripted(REFUND, faults, &[("refund-8", lost)]));
    let service = stack(router.clone(), DeadlineLayer::new(30 * SECOND), 3 * SECOND);
    let ctx = side_effecting();

    let call = service.oneshot(with_context(refund("refund-8", "key-8"), &ctx));
    assert!(tokio::time::timeout(SECOND, call).await.is_err());
    tokio::time::sleep(5 * SECOND).await;

    assert_eq!(executions(&router, "refund-8").await, 1);
    let attempt = &ctx.report.snapshot().attempts[0];
    assert_eq!(attempt.result, AttemptResult::Error("timeout".into()));
    assert_eq!(
        attempt.duration,
        3 * SECOND,
        "its own timeout, not the caller's 1 s"
    );
    assert!(attempt.sent && attempt.background);
    let report = ctx.report.snapshot();
    assert!(report.outcome_unknown, "nobody saw an answer: {report}");
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_refund_answers_the_caller_at_once_and_lets_the_attempt_finish() {
    let router = ballast_chaos::router(scripted(REFUND, slow(2 * SECOND), &[]));
    let service = stack(router.clone(), DeadlineLayer::new(30 * SECOND), 10 * SECOND);
    let ctx = side_effecting();
    let cancel = ctx.cancel.clone();

    let call = tokio::spawn(service.oneshot(with_context(refund("refund-9", "key-9"), &ctx)));
    tokio::time::sleep(SECOND).await;
    cancel.cancel();
    let error = call.await.expect("the call's task").expect_err("cancelled");
    assert!(matches!(error, Error::Cancelled), "{error}");
    assert_eq!(executions(&router, "refund-9").await, 0);

    tokio::time::sleep(2 * SECOND).await;
    assert_eq!(executions(&router, "refund-9").await, 1);
    let attempt = &ctx.report.snapshot().attempts[0];
    assert_eq!(attempt.result, AttemptResult::Status(200));
    assert!(attempt.background);
}

#[tokio::test(start_paused = true)]
async fn a_read_only_attempt_is_dropped_with_its_caller() {
    let router = ballast_chaos::router(scripted("lookup_order", slow(2 * SECOND), &[]));
    let service = stack(router.clone(), DeadlineLayer::new(30 * SECOND), 10 * SECOND);
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), 30 * SECOND));
    let lookup = tool_request("lookup_order", &json!({"op": "o-1", "order_id": "A-1"}));

    let call = service.oneshot(with_context(lookup, &ctx));
    assert!(tokio::time::timeout(SECOND, call).await.is_err());
    tokio::time::sleep(5 * SECOND).await;

    let stats = get_json(&router, "/stats").await;
    assert_eq!(
        stats["endpoints"]["lookup_order"]["statuses"],
        json!({"client_gone": 1})
    );
    let attempt = &ctx.report.snapshot().attempts[0];
    assert!(
        matches!(&attempt.result, AttemptResult::Error(e) if e.starts_with("abandoned")),
        "{attempt:?}"
    );
    assert_eq!(attempt.duration, SECOND);
    assert!(!attempt.background);
}

/// Bug: cancelling a read-only attempt by its token was untested at the attempt layer (awaiting the attempt
/// instead of racing it against the token passed every test). A hung GET, cancelled after 1 s, ends then.
#[tokio::test(start_paused = true)]
async fn cancelling_a_hung_read_only_attempt_ends_it_at_once() {
    let hung = service_fn(|_request: http::Request<bytes::Bytes>| {
        std::future::pending::<Result<http::Response<bytes::Bytes>, Error>>()
    });
    let service = AttemptLayer::new(10 * SECOND).layer(hung);
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), 30 * SECOND));
    let lookup = http::Request::get("http://tools.internal/orders/A-1")
        .body(bytes::Bytes::new())
        .expect("a request");
    let started = clock::now();
    let call = tokio::spawn(service.oneshot(with_context(lookup, &ctx)));

    tokio::time::sleep(SECOND).await;
    ctx.cancel.cancel();
    let result = call.await.expect("the call's task");

    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert_eq!(clock::now().saturating_duration_since(started), SECOND, "at once");
    let attempt = &ctx.report.snapshot().attempts[0];
    assert_eq!(attempt.result, AttemptResult::Error("cancelled".into()));
    assert!(!attempt.background);
}

/// A refund upstream that answers at once, after cancelling the call's token (as a caller giving up at that very
/// moment would): the answer and the cancellation reach the caller in the same poll.
fn answers_as_the_caller_cancels(
    ctx: &CallContext,
) -> impl tower::Service<
    http::Request<bytes::Bytes>,
    Response = http::Response<bytes::Bytes>,
    Error = Error,
    Future = impl Send + 'static,
> + Clone
+ Send
+ 'static {
    let cancel = ctx.cancel.clone();
    service_fn(move |_request: http::Request<bytes::Bytes>| {
        cancel.cancel();
        std::future::ready(Ok(http::Response::new(bytes::Bytes::from_static(b"{}"))))
    })
}

/// Bug: when the attempt's task delivered its outcome in the same poll as the cancellation fired, the caller
/// got `Cancelled` although the refund had been answered, and the attempt was never marked background.
#[tokio::test(start_paused = true)]
async fn an_outcome_delivered_as_the_caller_cancelled_was_lost() {
    let ctx = side_effecting();
    let service = AttemptLayer::new(10 * SECOND).layer(answers_as_the_caller_cancels(&ctx));

    let result = service
        .oneshot(with_context(refund("refund-10", "key-10"), &ctx))
        .await;

    let response = result.expect("the answer, delivered before the caller looked at its token");
    assert_eq!(response.status(), 200);
    let report = ctx.report.snapshot();
    assert_eq!(report.attempts[0].result, AttemptResult::Status(200));
    assert!(!report.attempts[0].background, "it reached the caller");
    assert!(!report.outcome_unknown);
}

#[tokio::test(start_paused = true)]
async fn an_outcome_delivered_but_never_read_is_marked_background() {
    let ctx = side_effecting();
    let answers = service_fn(|_request: http::Request<bytes::Bytes>| {
        std::future::ready(Ok::<_, Error>(http::Response::new(bytes::Bytes::from_static(
            b"{}",
        ))))
    });
    let service = AttemptLayer::new(10 * SECOND).layer(answers);
    let mut call = Box::pin(service.oneshot(with_context(refund("refund-11", "key-11"), &ctx)));
    assert!(
        futures::poll!(&mut call).is_pending(),
        "the attempt's task is spawned"
    );
    // The task runs and delivers; the caller's future is never polled again, then dropped.
    while ctx.report.snapshot().attempts[0].result == AttemptResult::Pending {
        tokio::task::yield_now().await;
    }
    drop(call);

    let attempt = &ctx.report.snapshot().attempts[0];
    assert_eq!(attempt.result, AttemptResult::Status(200));
    assert!(attempt.background, "its outcome reached no caller");
}
