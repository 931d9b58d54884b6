//! A `ToolClient` runs its calls' deadline, admission and retry loop itself, in one future (so that it gets the
//! retry loop's outcome back as a value), over the same tower layers' code. This pins it equal to the composed
//! tower stack — `DeadlineLayer -> AdmissionLayer -> RetryLayer -> BreakerLayer -> AttemptLayer -> transport` — on
//! the same inputs: the same answer or error, and the same report (every attempt, the stop reason, the code, the
//! side effect's outcome, the replay, the breaker), for each kind of ending.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use ballast::{
    context::CallContext,
    layer::{AdmissionLayer, AttemptLayer, BreakerLayer, DeadlineLayer, RetryLayer},
    report::{AttemptRecord, OutcomeReport},
    tool::{ToolCall, ToolError},
    transport::ServiceTransport,
};
use ballast_chaos::{EndpointProfile, KeyMode, LoseMode, ScriptStep};
use ballast_config::{Config, ToolConfig};
use ballast_core::{
    AdmissionConfig, BreakerState, CallKind, CircuitBreaker, Deadline, ErrorCode, IdempotencyKey,
    RetryPolicy, StopReason,
};
use bytes::Bytes;
use serde_json::{Value, json};
use tower::{ServiceBuilder, ServiceExt as _};

use support::{BODY_LIMIT, scripted};

const KEY: &str = "0b7f4c3e-0000-4000-8000-00000000e901";

/// How a call ended, as a caller reads it.
#[derive(Debug, PartialEq)]
enum Ended {
    Answer { status: u16, body: Value },
    Upstream { status: u16, body: Value },
    Failed { code: ErrorCode },
}

/// What a report says, timings aside (each stack draws its own jitter: backoffs, a breaker's open time).
#[derive(Debug, PartialEq)]
struct Said {
    target: String,
    attempts: Vec<(u32, ballast::report::AttemptResult, bool, bool)>,
    stop: Option<StopReason>,
    code: Option<ErrorCode>,
    outcome_unknown: bool,
    replayed: bool,
    breaker: Option<BreakerState>,
}

fn said(report: &OutcomeReport) -> Said {
    Said {
        target: report.target.clone(),
        attempts: report
            .attempts
            .iter()
            .map(|a: &AttemptRecord| (a.number, untimed(&a.result), a.sent, a.background))
            .collect(),
        stop: report.stop,
        code: report.code,
        outcome_unknown: report.outcome_unknown,
        replayed: report.replayed,
        breaker: report.breaker,
    }
}

/// An attempt's result without the time a refusal names (an open breaker's jittered time left).
fn untimed(result: &ballast::report::AttemptResult) -> ballast::report::AttemptResult {
    match result {
        ballast::report::AttemptResult::Error(text) => {
            ballast::report::AttemptResult::Error(text.split("; retry").next().unwrap_or(text).to_owned())
        }
        ballast::report::AttemptResult::Refused(text) => {
            ballast::report::AttemptResult::Refused(text.split("; retry").next().unwrap_or(text).to_owned())
        }
        other => other.clone(),
    }
}

/// One tool of `toml`'s kind on the chaos upstream, with `extra` settings.
fn config(name: &str, side_effects: &str, extra: &str) -> Config {
    Config::from_toml_str(&format!(
        r#"
        version = 1
        [[tools]]
        name = "{name}"
        upstream = {{ method = "POST", url = "http://chaos/tools/{name}" }}
        per_try_timeout = "1s"
        retry = {{ max_attempts = 3, base = "100ms", cap = "1s" }}
        {side_effects}
        {extra}
        "#
    ))
    .expect("a valid config")
}

/// The call through a `ToolClient`.
async fn through_the_client(
    config: &Config,
    router: &axum::Router,
    arguments: &Value,
    deadline: Duration,
) -> (Ended, Said) {
    let tools = ballast::Clients::from_config(config)
        .build(ServiceTransport::new(router.clone()).with_body_limit(BODY_LIMIT))
        .expect("tools build")
        .tools;
    let tool = tools.iter().next().expect("one tool");
    let call = ToolCall::new(arguments.clone())
        .idempotency_key(IdempotencyKey::parse(KEY).unwrap())
        .deadline(Deadline::after(ballast::clock::now(), deadline));
    match tool.call(call).await {
        Ok(answer) => (
            Ended::Answer {
                status: answer.status,
                body: answer.body().clone(),
            },
            said(&answer.report),
        ),
        Err(error) => {
            let report = said(error.report());
            let ended = match error {
                ToolError::Upstream { status, body, .. } => Ended::Upstream { status, body },
                other => Ended::Failed { code: other.code() },
            };
            (ended, report)
        }
    }
}

/// The same call through the tower layers, composed as the client's stack, from the same settings.
async fn through_the_layers(
    config: &Config,
    router: &axum::Router,
    arguments: &Value,
    deadline: Duration,
) -> (Ended, Said) {
    let tool: &ToolConfig = &config.tools[0];
    let server = &config.server;
    let policy = RetryPolicy::new(tool.retry.max_attempts, tool.retry.backoff)
        .unwrap()
        .with_max_retry_after(server.max_retry_after);
    let admission = AdmissionConfig::new(tool.concurrency as usize, tool.queue as usize);
    let stack = ServiceBuilder::new()
        .layer(DeadlineLayer::new(server.default_timeout).target(tool.name.clone()))
        .layer(AdmissionLayer::new(admission).unwrap())
        .layer(RetryLayer::new(policy, tool.budget.build()))
        .layer(BreakerLayer::new(Arc::new(CircuitBreaker::seeded(
            tool.breaker,
            None,
        ))))
        .layer(AttemptLayer::new(tool.per_try_timeout))
        .service(ServiceTransport::new(router.clone()).with_body_limit(BODY_LIMIT));
    let deadline = Deadline::after(ballast::clock::now(), deadline)
        .with_reserve(server.reserve)
        .with_min_attempt(server.min_attempt);
    let mut ctx = CallContext::new(
        CallKind::tool(tool.side_effects, tool.upstream_idempotency),
        deadline,
    );
    ctx.priority = tool.priority;
    let mut request = http::Request::post(tool.upstream.url.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Bytes::from(arguments.to_string()))
        .unwrap();
    if tool.side_effects {
        request
            .headers_mut()
            .insert("idempotency-key", KEY.parse().unwrap());
    }
    request.extensions_mut().insert(ctx.clone());
    let result = stack.oneshot(request).await;
    let ended = match result {
        Ok(response) => {
            let status = response.status().as_u16();
            let bytes = response.body().as_bytes().cloned().unwrap_or_default();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if response.status().is_success() {
                Ended::Answer { status, body }
            } else {
                Ended::Upstream { status, body }
            }
        }
        Err(error) => Ended::Failed { code: error.code() },
    };
    (ended, said(&ctx.report.snapshot()))
}

/// Runs one scenario both ways, each against a fresh chaos upstream of the same profile, and compares.
async fn same_both_ways(
    config: Config,
    faults: EndpointProfile,
    steps: &[ScriptStep],
    deadline: Duration,
) -> Said {
    let name = config.tools[0].name.clone();
    let arguments = json!({"op": "op-1", "order_id": "A-1001", "amount": 1250});
    let router = || ballast_chaos::router(scripted(&name, faults.clone(), &[("op-1", steps)]));
    let by_client = through_the_client(&config, &router(), &arguments, deadline).await;
    let by_layers = through_the_layers(&config, &router(), &arguments, deadline).await;
    assert_eq!(by_client, by_layers, "the client and the composed layers differ");
    by_client.1
}

const LONG: Duration = Duration::from_secs(30);

#[tokio::test(start_paused = true)]
async fn a_read_only_call_retried_to_a_success() {
    let said = same_both_ways(
        config("lookup_order", "", ""),
        EndpointProfile::default(),
        &[ScriptStep::Status(503), ScriptStep::Status(503), ScriptStep::Ok],
        LONG,
    )
    .await;
    assert_eq!(said.attempts.len(), 3);
    assert_eq!(said.code, None);
}

#[tokio::test(start_paused = true)]
async fn a_bad_request_answered_at_once() {
    let said = same_both_ways(
        config("lookup_order", "", ""),
        EndpointProfile::default(),
        &[ScriptStep::Status(400)],
        LONG,
    )
    .await;
    assert_eq!(said.stop, Some(StopReason::NotRetryable { status: 400 }));
}

#[tokio::test(start_paused = true)]
async fn a_lost_refund_nothing_deduplicates_is_unknown() {
    let faults = EndpointProfile {
        lose_with: LoseMode::Hang,
        ..EndpointProfile::default()
    };
    let said = same_both_ways(
        config("create_refund", "side_effects = true", ""),
        faults,
        &[ScriptStep::CommitThenLose],
        LONG,
    )
    .await;
    assert!(said.outcome_unknown);
    assert_eq!(said.code, Some(ErrorCode::OutcomeUnknown));
}

#[tokio::test(start_paused = true)]
async fn a_lost_refund_the_upstream_deduplicates_is_replayed() {
    let faults = EndpointProfile {
        key_mode: KeyMode::Keyed,
        lose_with: LoseMode::Hang,
        ..EndpointProfile::default()
    };
    let said = same_both_ways(
        config(
            "create_refund",
            "side_effects = true\nupstream_idempotency = \"keyed\"",
            "",
        ),
        faults,
        &[ScriptStep::CommitThenLose, ScriptStep::Ok],
        LONG,
    )
    .await;
    assert!(said.replayed && !said.outcome_unknown);
}

#[tokio::test(start_paused = true)]
async fn a_retry_refused_by_an_open_breaker() {
    let said = same_both_ways(
        config(
            "lookup_order",
            "",
            "breaker = { consecutive_failures = 1, failure_rate = 0 }",
        ),
        EndpointProfile::default(),
        &[ScriptStep::Status(503), ScriptStep::Ok],
        LONG,
    )
    .await;
    assert_eq!(said.code, Some(ErrorCode::CircuitOpen));
    assert_eq!(said.attempts.len(), 2, "the refused retry is a line, not sent");
    assert!(!said.attempts[1].2);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_too_short_for_any_attempt() {
    let said = same_both_ways(
        config("lookup_order", "", ""),
        EndpointProfile::default(),
        &[ScriptStep::Ok],
        Duration::from_millis(80),
    )
    .await;
    assert_eq!(said.code, Some(ErrorCode::DeadlineExceeded));
    assert!(said.attempts.is_empty());
}
