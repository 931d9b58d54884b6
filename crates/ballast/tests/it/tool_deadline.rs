//! A ToolClient's stack holds every wait to the call's deadline: each wait below the deadline ends on a timer of its
//! own before it (a hung attempt at its timeout, a queued call when the deadline can no longer hold an attempt),
//! and the deadline's own timer is there besides. Both end by the deadline, never later, with what they know.

use crate::support;

use std::time::Duration;

use ballast::{
    Error, clock,
    tool::{ToolCall, ToolError},
};
use ballast_core::Deadline;
use serde_json::json;

use support::tools::clients_over;

/// An upstream that answers `{"status": "shipped"}` after `delay`, or never (`None`: it hangs).
fn upstream(
    delay: Option<Duration>,
) -> impl tower::Service<
    http::Request<bytes::Bytes>,
    Response = http::Response<bytes::Bytes>,
    Error = Error,
    Future = impl Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(move |_request: http::Request<bytes::Bytes>| async move {
        let Some(delay) = delay else {
            return std::future::pending().await;
        };
        tokio::time::sleep(delay).await;
        Ok::<_, Error>(http::Response::new(bytes::Bytes::from_static(
            b"{\"status\":\"shipped\"}",
        )))
    })
}

const TOOL: &str = r#"
    version = 1
    [[tools]]
    name = "lookup_order"
    upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
    per_try_timeout = "10s"
    concurrency = 1
    queue = 4
    retry = { max_attempts = 1 }
"#;

fn lookup(deadline: Duration) -> ToolCall {
    ToolCall::new(json!({"order_id": "1", "op": "op-d"})).deadline(Deadline::after(clock::now(), deadline))
}

#[tokio::test(start_paused = true)]
async fn a_hung_attempt_ends_at_the_deadline_minus_the_reserve() {
    let tools = clients_over(TOOL, upstream(None));
    let tool = tools.get("lookup_order").unwrap();
    let started = clock::now();
    let error = tool.call(lookup(Duration::from_secs(3))).await.unwrap_err();
    let took = clock::now().saturating_duration_since(started);
    assert_eq!(took, Duration::from_millis(2_950), "{error}");
    assert!(matches!(error, ToolError::Failed { .. }), "{error}");
    let attempt = &error.report().attempts[0];
    assert_eq!(
        attempt.duration,
        Duration::from_millis(2_950),
        "{}",
        error.report()
    );
}

#[tokio::test(start_paused = true)]
async fn a_queued_call_ends_when_its_deadline_can_no_longer_hold_an_attempt() {
    let tools = clients_over(TOOL, upstream(None));
    let tool = tools.get("lookup_order").unwrap().clone();
    let busy = tool.clone();
    let holder = tokio::spawn(async move { busy.call(lookup(Duration::from_secs(60))).await });
    tokio::task::yield_now().await;
    let started = clock::now();
    let error = tool.call(lookup(Duration::from_secs(2))).await.unwrap_err();
    let took = clock::now().saturating_duration_since(started);
    assert!(
        took <= Duration::from_secs(2),
        "ended by its deadline, not later: {took:?} {error}"
    );
    assert!(
        error.report().attempts.is_empty(),
        "never ran: {}",
        error.report()
    );
    holder.abort();
}

/// Callers whose own deadlines (1 s) are shorter than a healthy tool's answers (4 s, under its 10 s per-try
/// timeout): each is ended by its deadline, and none of it is held against the tool — its breaker stays closed,
/// its throttle counts nothing — so the next caller, with time to spare, is served.
#[tokio::test(start_paused = true)]
async fn callers_in_a_hurry_never_open_a_slow_healthy_tools_breaker() {
    let toml = r#"
        version = 1
        [[tools]]
        name = "lookup_order"
        upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
        per_try_timeout = "10s"
    "#;
    let tools = clients_over(toml, upstream(Some(Duration::from_secs(4))));
    let tool = tools.get("lookup_order").unwrap();
    for round in 0..3 {
        let hurried = (0..10).map(|_| tool.call(lookup(Duration::from_secs(1))));
        for result in futures::future::join_all(hurried).await {
            let error = result.expect_err("a 1 s deadline cannot wait 4 s");
            assert!(
                matches!(error, ToolError::Failed { .. }),
                "round {round}: {error}"
            );
        }
    }
    let breaker = tool.breaker().snapshot(clock::now());
    assert_eq!(
        (breaker.state, breaker.consecutive_failures),
        (ballast_core::BreakerState::Closed, 0)
    );
    if let Some(throttle) = tool.throttle() {
        let throttle = throttle.snapshot(clock::now());
        assert_eq!(
            (throttle.requests, throttle.refused_total),
            (0, 0),
            "{throttle:?}"
        );
    }
    let answer = tool.call(lookup(Duration::from_secs(30))).await;
    assert!(answer.is_ok(), "the next caller with time to spare: {answer:?}");
}
