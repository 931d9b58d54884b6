//! Cancelling a ToolClient call with a token: sleeps, 409 waits and queued work stop at once, no further attempt
//! or fallback starts, and a sent side-effecting attempt still runs to its end, recorded in the kept report.

use crate::support;

use std::time::Duration;

use ballast::{
    Error,
    report::{AttemptResult, Report},
    tool::{ToolCall, ToolError},
};
use ballast_chaos::{EndpointProfile, KeyMode, Latency};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use support::tools::{clients, clients_over, in_progress_upstream, refund, refund_tool};
use support::{executions, requests, scripted};

fn is_cancelled(result: &Result<ballast::tool::ToolAnswer, ToolError>) -> bool {
    matches!(
        result,
        Err(ToolError::Failed {
            error: Error::Cancelled,
            ..
        })
    )
}

/// The caller cancels while a refund attempt is at the upstream: the call ends at once with `Cancelled`; the
/// attempt is not abandoned — the upstream executes it once, and the kept report records its answer.
#[tokio::test(start_paused = true)]
async fn a_cancelled_call_ends_at_once_and_its_sent_refund_runs_on() {
    let faults = EndpointProfile {
        key_mode: KeyMode::Keyed,
        latency: Some(Latency {
            p50: Duration::from_millis(500),
            p99: Duration::from_millis(500),
        }),
        ..EndpointProfile::default()
    };
    let router = ballast_chaos::router(scripted("create_refund", faults, &[]));
    let tools = clients(&refund_tool("keyed"), &router);
    let token = CancellationToken::new();
    let report = Report::default();
    let tool = tools.get("create_refund").unwrap().clone();
    let call = refund("op-c").cancel_token(token.clone());
    let kept = report.clone();
    let call = tokio::spawn(async move { tool.call_with_report(call, kept).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancelled_at = ballast::clock::now();
    token.cancel();
    let result = call.await.expect("the call's task");
    assert!(is_cancelled(&result), "{result:?}");
    assert_eq!(ballast::clock::now(), cancelled_at, "ended at once");
    assert_eq!(executions(&router, "op-c").await, 0, "not executed yet");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        executions(&router, "op-c").await,
        1,
        "the sent attempt ran to its end, once"
    );
    let snapshot = report.snapshot();
    assert_eq!(snapshot.attempts.len(), 1, "no further attempt: {snapshot}");
    let attempt = &snapshot.attempts[0];
    assert!(attempt.background, "{snapshot}");
    assert_eq!(attempt.result, AttemptResult::Status(200), "{snapshot}");
}

/// Cancelled during a 409 wait: the sleep ends at once and no further poll is sent.
#[tokio::test(start_paused = true)]
async fn a_cancelled_call_stops_waiting_on_an_operation_in_progress() {
    let (upstream, seen) = in_progress_upstream(u32::MAX, "5");
    let tools = clients_over(&refund_tool("keyed"), upstream);
    let token = CancellationToken::new();
    let tool = tools.get("create_refund").unwrap().clone();
    let call = refund("op-w").cancel_token(token.clone());
    let call = tokio::spawn(async move { tool.call(call).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    token.cancel();
    let cancelled_at = ballast::clock::now();
    let result = call.await.expect("the call's task");
    assert!(is_cancelled(&result), "{result:?}");
    assert_eq!(ballast::clock::now(), cancelled_at);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(seen.lock().unwrap().len(), 1, "no poll after the cancellation");
}

/// Cancelled while queued behind another call (concurrency 1): it leaves the queue at once and never reaches the
/// upstream; a static fallback does not answer for a cancelled call.
#[tokio::test(start_paused = true)]
async fn a_cancelled_call_leaves_the_queue_and_gets_no_fallback() {
    let router = ballast_chaos::router(scripted(
        "lookup_order",
        EndpointProfile {
            latency: Some(Latency {
                p50: Duration::from_secs(1),
                p99: Duration::from_secs(1),
            }),
            ..EndpointProfile::default()
        },
        &[],
    ));
    let tools = clients(
        r#"
        version = 1
        [[tools]]
        name = "lookup_order"
        upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
        per_try_timeout = "5s"
        concurrency = 1
        queue = 4
        fallback_response = { degraded = true }
        "#,
        &router,
    );
    let tool = tools.get("lookup_order").unwrap().clone();
    let busy = tool.clone();
    let first = tokio::spawn(async move {
        busy.call(ToolCall::new(json!({"order_id": "1", "op": "op-1"})))
            .await
    });
    tokio::task::yield_now().await;
    let token = CancellationToken::new();
    let call = ToolCall::new(json!({"order_id": "2", "op": "op-2"})).cancel_token(token.clone());
    let queued = tokio::spawn(async move { tool.call(call).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    token.cancel();
    let cancelled_at = ballast::clock::now();
    let result = queued.await.expect("the queued call's task");
    assert!(is_cancelled(&result), "{result:?}");
    assert_eq!(ballast::clock::now(), cancelled_at);
    let first = first
        .await
        .expect("the first call's task")
        .expect("the first call answers");
    assert_eq!(first.status, 200);
    assert_eq!(
        requests(&router, "lookup_order").await,
        1,
        "the cancelled call was never sent"
    );
}

/// A token cancelled before the call: nothing is sent.
#[tokio::test(start_paused = true)]
async fn a_call_with_a_cancelled_token_sends_nothing() {
    let router = ballast_chaos::router(scripted("create_refund", EndpointProfile::default(), &[]));
    let tools = clients(&refund_tool("keyed"), &router);
    let token = CancellationToken::new();
    token.cancel();
    let result = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-0").cancel_token(token))
        .await;
    assert!(is_cancelled(&result), "{result:?}");
    assert_eq!(requests(&router, "create_refund").await, 0);
}

/// Cancelled while a read-only attempt waits on a hung upstream: the call ends at once with `Cancelled` (the
/// deadline layer's watch drops it; the attempt does not watch the token a second time), and the attempt is
/// recorded as cancelled, sent, and not left pending.
#[tokio::test(start_paused = true)]
async fn a_cancelled_read_only_attempt_ends_at_once_and_is_recorded_cancelled() {
    let hung = tower::service_fn(|_request: http::Request<bytes::Bytes>| {
        std::future::pending::<Result<http::Response<bytes::Bytes>, Error>>()
    });
    let tools = clients_over(
        r#"
        version = 1
        [[tools]]
        name = "lookup_order"
        upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
        per_try_timeout = "5s"
        "#,
        hung,
    );
    let tool = tools.get("lookup_order").unwrap().clone();
    let token = CancellationToken::new();
    let report = Report::default();
    let kept = report.clone();
    let call = ToolCall::new(json!({"order_id": "1", "op": "op-r"})).cancel_token(token.clone());
    let call = tokio::spawn(async move { tool.call_with_report(call, kept).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancelled_at = ballast::clock::now();
    token.cancel();
    let result = call.await.expect("the call's task");
    assert!(is_cancelled(&result), "{result:?}");
    assert_eq!(
        ballast::clock::now(),
        cancelled_at,
        "ended at once, not at the 5 s attempt timeout"
    );
    let snapshot = report.snapshot();
    assert_eq!(snapshot.attempts.len(), 1, "{snapshot}");
    let attempt = &snapshot.attempts[0];
    assert_eq!(
        attempt.result,
        AttemptResult::Error("cancelled".into()),
        "{snapshot}"
    );
    assert!(attempt.sent && !attempt.background, "{snapshot}");
    assert_eq!(attempt.duration, Duration::from_millis(100), "{snapshot}");
}
