//! The review's regressions through the real layers over the chaos upstream (in process, paused time):
//! `deadline -> retry -> breaker -> attempt -> ServiceTransport(chaos)`, a keyed refund whose first attempt
//! commits and loses its answer. Whatever then stops the call — an empty retry budget, an open circuit — the
//! refund executed once and the report says its outcome is unknown; a retry refused by the open circuit costs
//! the run nothing.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use ballast::{
    Error, Run, clock,
    context::CallContext,
    layer::{AttemptLayer, BreakerLayer, DeadlineLayer, RetryLayer},
    report::AttemptResult,
    transport::ServiceTransport,
};
use ballast_chaos::{EndpointProfile, KeyMode, LoseMode, ScriptStep};
use ballast_core::{
    BreakerConfig, CallKind, CircuitBreaker, Deadline, RetryBudget, RetryPolicy, StopReason, TokenBucket,
    UpstreamIdempotency,
};
use serde_json::json;
use support::*;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceBuilder, ServiceExt as _};

const REFUND: &str = "create_refund";
const SECOND: Duration = Duration::from_secs(1);
const KEYED: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::Keyed);

/// A keyed chaos upstream on which operation `op` commits and then hangs, then answers.
fn router(op: &str) -> axum::Router {
    let faults = EndpointProfile {
        key_mode: KeyMode::Keyed,
        lose_with: LoseMode::Hang,
        ..EndpointProfile::default()
    };
    let steps: &[ScriptStep] = &[ScriptStep::CommitThenLose, ScriptStep::Ok, ScriptStep::Ok];
    ballast_chaos::router(scripted(REFUND, faults, &[(op, steps)]))
}

/// The tool stack over `router`: 1 s per attempt, the breaker opening after `failures` failures in a row.
fn stack(router: &axum::Router, budget: Arc<dyn RetryBudget>, failures: u32) -> Stack {
    BoxCloneService::new(
        DeadlineLayer::new(30 * SECOND)
            .kind(KEYED)
            .target(REFUND)
            .layer(below_the_deadline(router, budget, failures)),
    )
}

/// The same stack without its deadline layer: the retry layer is the outermost.
fn below_the_deadline(router: &axum::Router, budget: Arc<dyn RetryBudget>, failures: u32) -> Stack {
    let config = BreakerConfig::builder()
        .consecutive_failures(failures)
        .build()
        .unwrap();
    BoxCloneService::new(
        ServiceBuilder::new()
            .layer(RetryLayer::new(RetryPolicy::default(), budget).with_rng_seed(4))
            .layer(BreakerLayer::new(Arc::new(CircuitBreaker::seeded(
                config,
                Some(4),
            ))))
            .layer(AttemptLayer::new(SECOND))
            .service(ServiceTransport::new(router.clone()).with_body_limit(BODY_LIMIT)),
    )
}

/// A refund of `op` in a run of 3 retries.
fn refund(op: &str) -> (CallContext, http::Request<bytes::Bytes>, Arc<Run>) {
    let mut ctx = CallContext::new(KEYED, Deadline::after(clock::now(), 30 * SECOND));
    let run = Arc::new(Run::new("run-1".into(), 3));
    ctx.run = Some(Arc::clone(&run));
    let mut request = tool_request(REFUND, &json!({"op": op, "order_id": "A-1001", "amount": 1250}));
    request
        .headers_mut()
        .insert("idempotency-key", format!("key-{op}").parse().unwrap());
    (ctx.clone(), with_context(request, &ctx), run)
}

#[tokio::test(start_paused = true)]
async fn a_lost_refund_stopped_by_an_empty_budget_is_outcome_unknown() {
    let router = router("op-1");
    let empty = TokenBucket::new(1, 0.0).unwrap();
    assert!(empty.try_withdraw(clock::now()));
    let (ctx, request, _run) = refund("op-1");

    let error = stack(&router, Arc::new(empty), 5)
        .oneshot(request)
        .await
        .expect_err("no answer");

    assert!(
        matches!(error, Error::Stopped(StopReason::RetryBudgetExhausted)),
        "{error}"
    );
    assert_eq!(executions(&router, "op-1").await, 1);
    let report = ctx.report.snapshot();
    assert!(report.outcome_unknown, "{report}");
}

#[tokio::test(start_paused = true)]
async fn a_lost_refund_stopped_by_an_open_circuit_is_outcome_unknown_and_costs_no_retry() {
    let router = router("op-2");
    let budget = Arc::new(TokenBucket::new(5, 0.0).unwrap());
    let (ctx, request, run) = refund("op-2");

    let error = stack(&router, budget.clone(), 1)
        .oneshot(request)
        .await
        .expect_err("the circuit opened");

    assert!(matches!(error, Error::CircuitOpen { .. }), "{error}");
    assert_eq!(executions(&router, "op-2").await, 1);
    let report = ctx.report.snapshot();
    assert!(report.outcome_unknown, "{report}");
    assert_eq!(run.allowance().left(), 3, "the retry never went out: {report}");
    assert_eq!(budget.available(clock::now()), 5);
}

#[tokio::test(start_paused = true)]
async fn a_lost_refund_whose_retry_is_replayed_is_settled() {
    let router = router("op-3");
    let (ctx, request, run) = refund("op-3");

    let response = stack(&router, Arc::new(TokenBucket::default()), 5)
        .oneshot(request)
        .await
        .expect("the stored answer");

    assert_eq!(response.status(), 200);
    assert_eq!(executions(&router, "op-3").await, 1);
    let report = ctx.report.snapshot();
    assert!(report.replayed && !report.outcome_unknown, "{report}");
    assert_eq!(run.allowance().left(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_refund_the_caller_cancels_in_flight_is_outcome_unknown_and_still_recorded() {
    // With the deadline layer (it answers the cancellation) and without (the retry layer does).
    for (i, with_deadline_layer) in [true, false].into_iter().enumerate() {
        let op = format!("op-4{i}");
        // The refund executes 800 ms after it arrives, within its 1 s attempt.
        let router = ballast_chaos::router(scripted(REFUND, slow(SECOND * 4 / 5), &[]));
        let (ctx, request, run) = refund(&op);
        let budget = Arc::new(TokenBucket::default());
        let service = if with_deadline_layer {
            stack(&router, budget, 5)
        } else {
            below_the_deadline(&router, budget, 5)
        };
        let call = tokio::spawn(service.oneshot(request));

        tokio::time::sleep(SECOND * 2 / 5).await;
        ctx.cancel.cancel();
        let error = call.await.expect("the call's task").expect_err("cancelled");

        assert!(matches!(error, Error::Cancelled), "{error}");
        let report = ctx.report.snapshot();
        assert!(report.outcome_unknown, "the refund is in flight: {report}");
        assert_eq!(report.attempts[0].result, AttemptResult::Pending, "{report}");
        assert_eq!(run.allowance().left(), 3);
        tokio::time::sleep(SECOND).await;
        assert_eq!(executions(&router, &op).await, 1);
        let attempt = &ctx.report.snapshot().attempts[0];
        assert_eq!(attempt.result, AttemptResult::Status(200));
        assert!(attempt.sent && attempt.background);
    }
}
