//! ToolClient end to end, in process: the chaos router as the upstream (no sockets), paused time, fixed seeds.
//! The 409 "in progress" wait is in `tool_polling.rs`, cancellation in `tool_cancel.rs`.

use crate::support;

use std::time::Duration;

use ballast::{
    Error,
    report::{AttemptResult, Report},
    tool::{ToolCall, ToolError},
};
use ballast_chaos::{EndpointProfile, KeyMode, LoseMode, Profile, ScriptStep};
use ballast_core::{ErrorCode, IdempotencyKey};
use serde_json::json;

use support::tools::{clients, refund, refund_tool};
use support::{executions, get_json, requests, scripted};

/// A profile where `tool` has `mode` (losing answers by hanging) and `op` meets `steps`, attempt by attempt.
fn profile(tool: &str, mode: KeyMode, op: &str, steps: &[ScriptStep]) -> Profile {
    let faults = EndpointProfile {
        key_mode: mode,
        lose_with: LoseMode::Hang,
        ..EndpointProfile::default()
    };
    scripted(tool, faults, &[(op, steps)])
}

/// Issue 4, test 2: the response of a committed refund is lost; the retry carries the same key and the
/// upstream, which deduplicates, answers with the stored success. One execution.
#[tokio::test(start_paused = true)]
async fn commit_then_lose_on_a_keyed_tool_is_retried_with_the_same_key_and_executes_once() {
    let router = ballast_chaos::router(profile(
        "create_refund",
        KeyMode::Keyed,
        "op-2",
        &[ScriptStep::CommitThenLose, ScriptStep::Ok],
    ));
    let tools = clients(&refund_tool("keyed"), &router);
    let answer = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-2"))
        .await
        .expect("the retry is answered");
    assert_eq!(answer.status, 200);
    let report = &answer.report;
    assert_eq!(report.attempts.len(), 2, "{report}");
    assert!(report.replayed, "the second answer is the stored one: {report}");
    assert!(!report.outcome_unknown);
    assert!(report.idempotency_key.is_some());
    assert_eq!(executions(&router, "op-2").await, 1, "one refund, not two");
    let keys = get_json(&router, "/ledger").await["ops"]["op-2"]["keys"].clone();
    assert_eq!(
        keys.as_array().map(Vec::len),
        Some(1),
        "every attempt carried the same key: {keys}"
    );
}

/// Issue 4, test 3: the same loss on an upstream that does not deduplicate: no retry, the outcome is unknown.
#[tokio::test(start_paused = true)]
async fn commit_then_lose_on_a_none_tool_is_not_retried_and_reports_outcome_unknown() {
    let router = ballast_chaos::router(profile(
        "create_refund",
        KeyMode::None,
        "op-3",
        &[ScriptStep::CommitThenLose, ScriptStep::Ok],
    ));
    let tools = clients(&refund_tool("none"), &router);
    let error = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-3"))
        .await
        .expect_err("no answer came");
    assert!(error.outcome_unknown(), "{error}");
    assert_eq!(error.code(), ErrorCode::OutcomeUnknown);
    assert_eq!(
        error.report().attempts.len(),
        1,
        "never retried: {}",
        error.report()
    );
    assert_eq!(executions(&router, "op-3").await, 1);
}

/// A re-run step re-sends the same derived key, so the upstream replays instead of refunding again.
#[tokio::test(start_paused = true)]
async fn a_rerun_step_sends_the_same_derived_key() {
    let router = ballast_chaos::router(profile("create_refund", KeyMode::Keyed, "op-4", &[]));
    let tools = clients(&refund_tool("keyed"), &router);
    let tool = tools.get("create_refund").unwrap();
    let first = tool
        .call(refund("op-4").run("run-1").step("step-3", 0))
        .await
        .expect("first");
    let again = tool
        .call(refund("op-4").run("run-1").step("step-3", 0))
        .await
        .expect("re-run");
    assert_eq!(first.report.idempotency_key, again.report.idempotency_key);
    let expected = IdempotencyKey::derived("run-1", "step-3", "create_refund", 0);
    assert_eq!(first.report.idempotency_key.as_deref(), Some(expected.as_str()));
    assert!(again.report.replayed);
    assert_eq!(executions(&router, "op-4").await, 1);
}

/// A read-only tool with a static fallback answers with it when its upstream keeps failing.
#[tokio::test(start_paused = true)]
async fn a_failing_tool_answers_with_its_static_fallback() {
    // The chaos upstream serves lookup_order; the search tool is configured onto it.
    let router = ballast_chaos::router(profile(
        "lookup_order",
        KeyMode::None,
        "op-5",
        &[ScriptStep::Status(503), ScriptStep::Status(503)],
    ));
    let tools = clients(
        r#"
        version = 1
        [[tools]]
        name = "search_products"
        upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
        per_try_timeout = "1s"
        retry = { max_attempts = 2 }
        fallback_response = { results = [], degraded = true }
        "#,
        &router,
    );
    let answer = tools
        .get("search_products")
        .unwrap()
        .call(ToolCall::new(
            json!({"order_id": "1", "query": "shoes", "op": "op-5"}),
        ))
        .await
        .expect("the fallback answers");
    assert_eq!(*answer.body(), json!({"results": [], "degraded": true}));
    assert_eq!(answer.report.fallback.as_deref(), Some("static response"));
    assert_eq!(answer.report.attempts.len(), 2);
}

/// Issue 4, test 7 (second half) at the client: the caller gives up during a sent refund attempt; the attempt
/// is not abandoned: the upstream executes it and the report, kept by the caller, records its outcome.
#[tokio::test(start_paused = true)]
async fn dropping_the_call_during_a_sent_side_effect_lets_it_finish_and_records_it() {
    let mut profile = profile("create_refund", KeyMode::Keyed, "op-7", &[]);
    if let Some(endpoint) = profile.endpoints.get_mut("create_refund") {
        endpoint.latency = Some(ballast_chaos::Latency {
            p50: Duration::from_millis(500),
            p99: Duration::from_millis(500),
        });
    }
    let router = ballast_chaos::router(profile);
    let tools = clients(&refund_tool("keyed"), &router);
    let report = Report::default();
    let call = tools
        .get("create_refund")
        .unwrap()
        .call_with_report(refund("op-7"), report.clone());
    // The caller gives up 100 ms in, while the attempt is at the upstream.
    let gave_up = tokio::time::timeout(Duration::from_millis(100), call).await;
    assert!(gave_up.is_err(), "the call was still running");
    assert_eq!(executions(&router, "op-7").await, 0, "not executed yet");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        executions(&router, "op-7").await,
        1,
        "the sent attempt ran to its end"
    );
    let snapshot = report.snapshot();
    let attempt = snapshot.attempts.first().expect("the attempt is recorded");
    assert!(attempt.background, "{snapshot}");
    assert_eq!(
        attempt.result,
        ballast::report::AttemptResult::Status(200),
        "{snapshot}"
    );
}

/// Two side-effecting tools on the chaos upstream: `create_refund` (breaker opening on one failure, with
/// `fallback`) and `process_payment`, both keyed.
fn refund_with_fallback(fallback: &str) -> String {
    format!(
        r#"
        version = 1
        [[tools]]
        name = "create_refund"
        upstream = {{ method = "POST", url = "http://chaos/tools/create_refund" }}
        side_effects = true
        upstream_idempotency = "keyed"
        per_try_timeout = "1s"
        breaker = {{ consecutive_failures = 1 }}
        {fallback}
        [[tools]]
        name = "process_payment"
        upstream = {{ method = "POST", url = "http://chaos/tools/process_payment" }}
        side_effects = true
        upstream_idempotency = "keyed"
        per_try_timeout = "1s"
        "#
    )
}

/// Regression (review, critical): a keyed refund whose first attempt committed and lost its answer opened the
/// breaker; the retry met `circuit_open` and the client fell back to another side-effecting tool, which refunded
/// again. The fallback must not run after a sent attempt: one execution, and the error says the outcome is
/// unknown.
#[tokio::test(start_paused = true)]
async fn regression_a_fallback_tool_never_runs_after_a_sent_attempt_of_a_side_effect() {
    let mut profile = profile(
        "create_refund",
        KeyMode::Keyed,
        "op-f",
        &[ScriptStep::CommitThenLose, ScriptStep::Ok],
    );
    profile.endpoints.insert(
        "process_payment".into(),
        EndpointProfile {
            key_mode: KeyMode::Keyed,
            ..EndpointProfile::default()
        },
    );
    let router = ballast_chaos::router(profile);
    let tools = clients(
        &refund_with_fallback(r#"fallback_tool = "process_payment""#),
        &router,
    );
    let error = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-f"))
        .await
        .expect_err("the breaker is open and nothing may answer in the refund's place");
    assert_eq!(
        executions(&router, "op-f").await,
        1,
        "the refund ran once: {error}"
    );
    assert_eq!(requests(&router, "process_payment").await, 0);
    assert!(
        matches!(
            error,
            ToolError::Failed {
                error: Error::CircuitOpen { .. },
                ..
            }
        ),
        "{error}"
    );
    assert!(error.outcome_unknown(), "{}", error.report());
    let report = error.report();
    assert_eq!(report.fallback, None, "{report}");
    assert!(report.attempts[0].sent, "{report}");
    assert!(
        report.to_string().starts_with("create_refund: OUTCOME UNKNOWN"),
        "{report}"
    );
}

/// Regression (review, probe 2): a sent attempt timed out, the retry was refused by the empty budget, and the
/// static fallback answered 200 `refunded` for a refund that may have happened. A static answer on a tool with side
/// effects is now refused by the configuration (issue 11); the same call without it is `outcome_unknown` — its
/// code too, though the budget stopped it.
#[tokio::test(start_paused = true)]
async fn regression_a_static_fallback_never_answers_for_a_side_effect() {
    let tool = |fallback: &str| {
        format!(
            r#"
            version = 1
            [[tools]]
            name = "create_refund"
            upstream = {{ method = "POST", url = "http://chaos/tools/create_refund" }}
            side_effects = true
            upstream_idempotency = "keyed"
            per_try_timeout = "1s"
            budget = {{ kind = "token_bucket", capacity = 1, refill_per_sec = 0.001 }}
            {fallback}
            "#
        )
    };
    let refused =
        ballast_config::Config::from_toml_str(&tool(r#"fallback_response = { status = "refunded" }"#))
            .expect_err("a static answer for a side effect");
    let text = refused.to_string();
    assert!(
        text.contains("tools[0].fallback_response") && text.contains("side_effects"),
        "{text}"
    );

    let router = ballast_chaos::router(profile(
        "create_refund",
        KeyMode::Keyed,
        "op-s",
        &[ScriptStep::CommitThenLose, ScriptStep::Ok],
    ));
    let tools = clients(&tool(""), &router);
    let tool = tools.get("create_refund").unwrap();
    // Another operation spent the single retry.
    assert!(tool.budget().try_withdraw(ballast::clock::now()));
    let error = tool
        .call(refund("op-s"))
        .await
        .expect_err("a refund that may have happened");
    assert_eq!(
        error.report().stop,
        Some(ballast_core::StopReason::RetryBudgetExhausted)
    );
    assert!(error.outcome_unknown(), "{}", error.report());
    assert_eq!(
        error.code(),
        ErrorCode::OutcomeUnknown,
        "precedence: {}",
        error.report()
    );
    assert_eq!(executions(&router, "op-s").await, 1);
}

/// A side-effecting attempt that was answered (a 503) is not unknown, and still blocks the fallback: the
/// upstream saw the request. A later call that sends nothing (the breaker is open) does go to the fallback tool,
/// and the report keeps the refused attempt next to the fallback's.
#[tokio::test(start_paused = true)]
async fn a_side_effect_falls_back_only_when_nothing_was_sent_and_the_report_keeps_both_calls() {
    let mut profile = profile(
        "create_refund",
        KeyMode::Keyed,
        "op-a",
        &[ScriptStep::Status(503)],
    );
    profile.endpoints.insert(
        "process_payment".into(),
        EndpointProfile {
            key_mode: KeyMode::Keyed,
            ..EndpointProfile::default()
        },
    );
    let router = ballast_chaos::router(profile);
    let tools = clients(
        &refund_with_fallback(r#"fallback_tool = "process_payment""#),
        &router,
    );
    let tool = tools.get("create_refund").unwrap();

    let error = tool
        .call(refund("op-a"))
        .await
        .expect_err("503, then circuit open");
    assert!(
        !error.outcome_unknown(),
        "the upstream answered 503: {}",
        error.report()
    );
    assert_eq!(error.report().fallback, None, "{}", error.report());

    let answer = tool.call(refund("op-b")).await.expect("the fallback answers");
    assert_eq!(executions(&router, "op-b").await, 1);
    assert_eq!(answer.status, 200);
    let report = &answer.report;
    assert_eq!(report.target, "create_refund", "{report}");
    assert_eq!(report.attempts.len(), 1, "{report}");
    assert!(!report.attempts[0].sent, "refused by the open breaker: {report}");
    assert_eq!(
        report.code,
        Some(ErrorCode::CircuitOpen),
        "why the tool itself failed"
    );
    assert_eq!(report.fallback.as_deref(), Some("process_payment"));
    assert!(report.answered_by_fallback());
    let fallback = report.fallback_report.as_deref().expect("the fallback's report");
    assert_eq!(fallback.target, "process_payment");
    assert_eq!(fallback.attempts[0].result, AttemptResult::Status(200));
    let text = report.to_string();
    assert!(
        text.starts_with("create_refund: answered by fallback process_payment (failed here: circuit_open)"),
        "{text}"
    );
    assert!(text.contains("\n  fallback process_payment: ok in"), "{text}");
    assert!(!text.contains(": failed ("), "{text}");
}

/// A read-only tool falls back after sent attempts, as before; the returned report holds the tool's own attempts
/// and the fallback tool's report, and its total covers both.
#[tokio::test(start_paused = true)]
async fn a_read_only_tool_falls_back_after_sent_attempts_and_keeps_them_in_the_report() {
    let mut profile = profile(
        "lookup_order",
        KeyMode::None,
        "op-r",
        &[ScriptStep::Status(503), ScriptStep::Status(503)],
    );
    if let Some(endpoint) = profile.endpoints.get_mut("lookup_order") {
        endpoint.latency = Some(ballast_chaos::Latency {
            p50: Duration::from_millis(200),
            p99: Duration::from_millis(200),
        });
    }
    let router = ballast_chaos::router(profile);
    let tools = clients(
        r#"
        version = 1
        [[tools]]
        name = "search_products"
        upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
        per_try_timeout = "1s"
        retry = { max_attempts = 2 }
        fallback_tool = "search_cache"
        [[tools]]
        name = "search_cache"
        upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
        per_try_timeout = "1s"
        "#,
        &router,
    );
    let started = ballast::clock::now();
    let answer = tools
        .get("search_products")
        .unwrap()
        .call(ToolCall::new(json!({"order_id": "1", "op": "op-r"})))
        .await
        .expect("the fallback answers");
    let took = ballast::clock::now().saturating_duration_since(started);
    let report = &answer.report;
    assert_eq!(report.attempts.len(), 2, "{report}");
    assert!(report.attempts.iter().all(|a| a.sent), "{report}");
    assert_eq!(report.fallback.as_deref(), Some("search_cache"));
    let fallback = report.fallback_report.as_deref().expect("nested");
    // The chaos script is per attempt number: the fallback's first two attempts meet the 503s too.
    let last = fallback.attempts.last().expect("the fallback's attempts");
    assert_eq!(last.result, AttemptResult::Status(200), "{report}");
    assert_eq!(report.total, took, "the whole call, fallback included: {report}");
    assert!(report.total > fallback.total, "{report}");
}

/// Arguments larger than `server.body_limit` are refused before anything is sent.
#[tokio::test(start_paused = true)]
async fn arguments_over_the_body_limit_are_refused_before_anything_is_sent() {
    let router = ballast_chaos::router(profile("create_refund", KeyMode::Keyed, "op-big", &[]));
    let toml = format!("[server]\nbody_limit = \"1KiB\"\n{}", refund_tool("keyed"));
    let toml = toml.replacen("\n        version = 1", "", 1);
    let tools = clients(&format!("version = 1\n{toml}"), &router);
    let tool = tools.get("create_refund").unwrap();
    let big = ToolCall::new(json!({"order_id": "1234", "note": "x".repeat(2000), "op": "op-big"}));
    let error = tool.call(big).await.expect_err("too large");
    assert!(
        matches!(
            error,
            ToolError::Failed {
                error: Error::BodyTooLarge { limit: 1024 },
                ..
            }
        ),
        "{error}"
    );
    assert!(error.report().attempts.is_empty(), "{}", error.report());
    assert!(!error.outcome_unknown());
    assert_eq!(requests(&router, "create_refund").await, 0);
    let small = tool.call(refund("op-big")).await.expect("under the limit");
    assert_eq!(small.status, 200);
}
