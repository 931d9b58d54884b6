//! One deadline over many steps (issue 4, test 1, at the layer level): three sequential tool calls through
//! `DeadlineLayer -> AttemptLayer -> ServiceTransport(chaos router)` under one 30 s deadline, the second
//! upstream hanging. The request must fail at about 30 s minus the reserve — not 90 s — and the third step must
//! never reach the upstream.

use crate::support;

use std::time::Duration;

use ballast::{
    Error, clock,
    context::{CallContext, scope},
    layer::DeadlineLayer,
};
use ballast_chaos::{EndpointProfile, ScriptStep};
use ballast_core::{CallKind, DEFAULT_RESERVE, Deadline, ErrorCode, Refused, StopReason};
use serde_json::json;
use support::*;
use tower::ServiceExt as _;

const LOOKUP: &str = "lookup_order";
const THIRTY: Duration = Duration::from_secs(30);

fn lookup(op: &str) -> http::Request<bytes::Bytes> {
    tool_request(LOOKUP, &json!({"op": op, "order_id": "A-1001"}))
}

#[tokio::test(start_paused = true)]
async fn three_steps_under_one_deadline_fail_at_the_deadline_minus_the_reserve_and_the_third_never_starts() {
    let hang: &[ScriptStep] = &[ScriptStep::Hang];
    let router = ballast_chaos::router(scripted(LOOKUP, EndpointProfile::default(), &[("step-2", hang)]));
    // Each step alone would get 30 s: the per-step timeouts that add up to 90 s.
    let layer = DeadlineLayer::new(THIRTY).kind(CallKind::ReadOnlyTool);
    let service = stack(router.clone(), layer, THIRTY);
    let started = clock::now();
    let deadline = Deadline::after(clock::now(), THIRTY);

    let (first, second, third) = scope(deadline, async {
        let first = service.clone().oneshot(lookup("step-1")).await;
        let second = service.clone().oneshot(lookup("step-2")).await;
        let failed_at = clock::now().saturating_duration_since(started);
        let third = service.clone().oneshot(lookup("step-3")).await;
        assert_eq!(
            clock::now().saturating_duration_since(started),
            failed_at,
            "the third step is refused at once"
        );
        (first, (second, failed_at), third)
    })
    .await;

    assert_eq!(first.expect("step 1 answers").status(), 200);
    let (second, failed_at) = second;
    assert_eq!(
        failed_at,
        THIRTY - DEFAULT_RESERVE,
        "not 90 s: one deadline for all steps"
    );
    match second {
        Err(Error::Timeout { after, .. }) => assert_eq!(after, THIRTY - DEFAULT_RESERVE),
        other => panic!("step 2 times out at the deadline minus the reserve: {other:?}"),
    }
    match third {
        Err(Error::DeadlineExceeded(exceeded)) => {
            assert_eq!(exceeded.remaining, DEFAULT_RESERVE);
            assert_eq!(exceeded.refused, Refused::Attempt);
        }
        other => panic!("step 3 is refused: {other:?}"),
    }
    assert_eq!(
        requests(&router, LOOKUP).await,
        2,
        "step 3 never reached the upstream"
    );
    let stats = get_json(&router, "/stats").await;
    assert_eq!(
        stats["endpoints"][LOOKUP]["statuses"],
        json!({"200": 1, "hang": 1})
    );
}

#[tokio::test(start_paused = true)]
async fn one_reused_context_holds_every_step_to_its_deadline_and_reports_the_stop() {
    let hang: &[ScriptStep] = &[ScriptStep::Hang];
    let router = ballast_chaos::router(scripted(LOOKUP, EndpointProfile::default(), &[("step-2", hang)]));
    let service = stack(router.clone(), DeadlineLayer::new(THIRTY), THIRTY);
    let ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), THIRTY));
    let started = clock::now();

    let first = service
        .clone()
        .oneshot(with_context(lookup("step-1"), &ctx))
        .await;
    let second = service
        .clone()
        .oneshot(with_context(lookup("step-2"), &ctx))
        .await;
    let third = service
        .clone()
        .oneshot(with_context(lookup("step-3"), &ctx))
        .await;

    assert!(first.is_ok());
    assert!(matches!(second, Err(Error::Timeout { .. })), "{second:?}");
    assert!(matches!(third, Err(Error::DeadlineExceeded(_))), "{third:?}");
    assert_eq!(
        clock::now().saturating_duration_since(started),
        THIRTY - DEFAULT_RESERVE
    );
    assert_eq!(requests(&router, LOOKUP).await, 2);
    let report = ctx.report.snapshot();
    assert_eq!(
        report.attempts.len(),
        2,
        "the refused step made no attempt: {report}"
    );
    assert_eq!(
        report.code,
        Some(ErrorCode::UpstreamError),
        "the first failure's code is kept"
    );
    assert_eq!(
        report.target, "/tools/lookup_order",
        "unnamed, the report names the URI path"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_call_reports_the_deadline_stop_with_its_numbers() {
    let router = ballast_chaos::router(scripted(LOOKUP, EndpointProfile::default(), &[]));
    let service = stack(
        router.clone(),
        DeadlineLayer::new(THIRTY).target("lookup"),
        THIRTY,
    );
    // 80 ms left: 30 ms after the 50 ms reserve, under the 50 ms an attempt needs.
    let ctx = CallContext::new(
        CallKind::ReadOnlyTool,
        Deadline::after(clock::now(), Duration::from_millis(80)),
    );
    let error = service
        .oneshot(with_context(lookup("late"), &ctx))
        .await
        .expect_err("refused");
    let Error::DeadlineExceeded(exceeded) = error else {
        panic!("a deadline error: {error:?}");
    };
    assert_eq!(exceeded.remaining, Duration::from_millis(80));
    assert_eq!(exceeded.needed(), Duration::from_millis(100));
    assert_eq!(requests(&router, LOOKUP).await, 0);
    let report = ctx.report.snapshot();
    assert_eq!(report.code, Some(ErrorCode::DeadlineExceeded));
    assert_eq!(report.stop, Some(StopReason::Deadline(exceeded)));
    assert_eq!(report.target, "lookup");
    assert_eq!(report.total, Duration::ZERO);
    assert!(report.attempts.is_empty());
}
