//! The ToolClient's wait on a 409 "in progress": polled within the deadline, never in a hot loop, without
//! spending retries, with attempt numbers that keep counting and a total that covers the wait.

use crate::support;

use std::time::Duration;

use ballast::tool::ToolError;
use ballast_core::{Deadline, StopReason};

use support::tools::{Seen, clients_over, in_progress_upstream, refund, refund_tool};

/// The gaps between the requests an upstream saw.
fn gaps(seen: &[Seen]) -> Vec<Duration> {
    seen.windows(2)
        .map(|w| w[1].at.saturating_duration_since(w[0].at))
        .collect()
}

/// A 409 "in progress" is waited out — past the attempt cap, as long as the deadline allows — until the
/// operation's answer comes.
#[tokio::test(start_paused = true)]
async fn a_409_in_progress_is_polled_until_the_answer_comes() {
    let (upstream, seen) = in_progress_upstream(5, "1");
    let tools = clients_over(&refund_tool("keyed"), upstream);
    let started = ballast::clock::now();
    let answer = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-9"))
        .await
        .expect("answered");
    assert_eq!(answer.body()["status"], "succeeded");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6, "five 409s, then the answer: {}", answer.report);
    let waited = ballast::clock::now().saturating_duration_since(started);
    assert!(
        waited >= Duration::from_secs(5),
        "each 409 asked for a second: {waited:?}"
    );
    assert!(
        gaps(&seen).iter().all(|gap| *gap >= Duration::from_secs(1)),
        "{seen:?}"
    );
}

/// An operation that stays in progress past the deadline ends with the deadline, not a 90 s wait, and its
/// outcome is unknown: it may still complete.
#[tokio::test(start_paused = true)]
async fn a_409_in_progress_is_not_polled_past_the_deadline() {
    let (upstream, seen) = in_progress_upstream(u32::MAX, "1");
    let tools = clients_over(&refund_tool("keyed"), upstream);
    let deadline = Deadline::after(ballast::clock::now(), Duration::from_secs(10));
    let error = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-10").deadline(deadline))
        .await
        .expect_err("still in progress at the deadline");
    assert!(
        matches!(error, ToolError::Upstream { status: 409, .. }),
        "{error}"
    );
    let report = error.report();
    assert!(matches!(report.stop, Some(StopReason::Deadline(_))), "{report}");
    // The deadline stopped the wait, but the operation may still complete: the code says that first.
    assert_eq!(error.code(), ballast_core::ErrorCode::OutcomeUnknown);
    assert!(
        error.outcome_unknown(),
        "the operation may still complete: {report}"
    );
    assert!(
        !deadline.is_expired(ballast::clock::now()),
        "it stopped before the deadline, not after"
    );
    assert!(seen.lock().unwrap().len() <= 11, "about one poll a second");
}

/// Regression (review): `Retry-After: 0` made the poll a hot loop — 10,001 requests in 0 ns. Every wait is now
/// at least 100 ms and grows, so a 30 s deadline holds a bounded number of polls.
#[tokio::test(start_paused = true)]
async fn regression_a_409_with_retry_after_zero_is_not_a_hot_loop() {
    let (upstream, seen) = in_progress_upstream(u32::MAX, "0");
    let tools = clients_over(&refund_tool("keyed"), upstream);
    let error = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-hot"))
        .await
        .expect_err("in progress until the 30 s default deadline");
    let seen = seen.lock().unwrap().clone();
    assert!(
        gaps(&seen).iter().all(|gap| *gap >= Duration::from_millis(100)),
        "{seen:?}"
    );
    // 100-200 ms, 200-400 ms, ... then 1-2 s, and one last poll just in time: 18 to 34 polls, not the 300 a
    // fixed 100 ms would make.
    assert!(
        seen.len() <= 36,
        "{} polls in 30 s: {}",
        seen.len(),
        error.report()
    );
    assert!(
        seen.len() >= 16,
        "it kept polling until the deadline: {}",
        seen.len()
    );
    assert!(
        error.report().total >= Duration::from_millis(29_800),
        "{}",
        error.report()
    );
}

/// A past HTTP-date asks for no wait at all, like `0`: the floor still holds.
#[tokio::test(start_paused = true)]
async fn a_409_with_a_past_http_date_waits_at_least_the_floor() {
    let (upstream, seen) = in_progress_upstream(3, "Sun, 06 Nov 1994 08:49:37 GMT");
    let tools = clients_over(&refund_tool("keyed"), upstream);
    let answer = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-date"))
        .await
        .expect("answered after three polls");
    assert_eq!(answer.status, 200);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    assert!(
        gaps(&seen).iter().all(|gap| *gap >= Duration::from_millis(100)),
        "{seen:?}"
    );
}

/// Regression (review): each poll was a new call through the stack — the retry layer retried the 409s, spending
/// the run's whole allowance on waiting, `ballast-attempt` restarted at 1 on every poll, and the report said
/// "ok in 0 ms" after 5 s. Polls spend no retry, attempts keep counting, and the total is the call's.
#[tokio::test(start_paused = true)]
async fn regression_polls_spend_no_retries_keep_counting_attempts_and_report_the_whole_wait() {
    let (upstream, seen) = in_progress_upstream(5, "1");
    let tools = clients_over(&refund_tool("keyed"), upstream);
    let tool = tools.get("create_refund").unwrap();
    let budget_before = tool.budget().available(ballast::clock::now());
    let started = ballast::clock::now();
    let answer = tool
        .call(refund("op-x").run("run-1").step("s", 0))
        .await
        .expect("answered");
    let took = ballast::clock::now().saturating_duration_since(started);
    let report = &answer.report;
    assert_eq!(
        report.run_allowance_left,
        Some(3),
        "waiting spent no retry: {report}"
    );
    assert!(
        tool.budget().available(ballast::clock::now()) >= budget_before,
        "nothing withdrawn from the budget: {report}"
    );
    let numbers: Vec<u32> = seen.lock().unwrap().iter().map(|s| s.attempt).collect();
    assert_eq!(
        numbers,
        [1, 2, 3, 4, 5, 6],
        "ballast-attempt keeps counting across polls"
    );
    let recorded: Vec<u32> = report.attempts.iter().map(|a| a.number).collect();
    assert_eq!(recorded, [1, 2, 3, 4, 5, 6], "{report}");
    assert_eq!(report.total, took, "{report}");
    assert!(report.total >= Duration::from_secs(5), "{report}");
    let millis = report.total.as_millis();
    assert!(
        report
            .to_string()
            .starts_with(&format!("create_refund: ok in {millis} ms")),
        "{report}"
    );
}

/// Bug: an operation the upstream said was in progress, whose later polls failed (503s until the retries ran out),
/// ended as a plain `upstream_error` with `outcome_unknown` false — a caller that believed it would refund again
/// while the first refund may still complete. Only a success or a replay says how it ended.
#[tokio::test(start_paused = true)]
async fn an_operation_in_progress_whose_polls_then_fail_is_unknown() {
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let upstream = tower::service_fn(move |_request: http::Request<bytes::Bytes>| {
        let response = if sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            http::Response::builder()
                .status(409)
                .header("content-type", "application/problem+json")
                .header("retry-after", "1")
                .body(bytes::Bytes::from_static(
                    br#"{"type": "urn:ballast:idempotency_in_progress"}"#,
                ))
        } else {
            http::Response::builder().status(503).body(bytes::Bytes::new())
        };
        std::future::ready(Ok::<_, ballast::Error>(response.unwrap()))
    });
    let tools = clients_over(&refund_tool("keyed"), upstream);
    let error = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-12"))
        .await
        .expect_err("503s after the 409");
    assert!(
        matches!(error, ToolError::Upstream { status: 503, .. }),
        "{error}"
    );
    assert!(
        error.outcome_unknown(),
        "the operation was in progress, and nothing since said how it ended: {}",
        error.report()
    );
}
