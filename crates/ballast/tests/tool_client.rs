//! ToolClient end to end, in process: the chaos router as the upstream (no sockets), paused time, fixed seeds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ballast::{Report, ServiceTransport, ToolCall, ToolClients};
use ballast_chaos::{EndpointProfile, KeyMode, LoseMode, Profile, Script, ScriptStep};
use ballast_config::Config;
use ballast_core::{ErrorCode, IdempotencyKey};
use serde_json::{Value, json};
use tower::ServiceExt as _;

const BODY_LIMIT: usize = 1 << 20;

/// A profile where `tool` has `mode` and `op` meets `steps`, attempt by attempt.
fn profile(tool: &str, mode: KeyMode, op: &str, steps: &[ScriptStep]) -> Profile {
    let mut profile = Profile::default();
    profile.endpoints.insert(
        tool.to_owned(),
        EndpointProfile {
            key_mode: mode,
            lose_with: LoseMode::Hang,
            ..EndpointProfile::default()
        },
    );
    profile.scripts.push(Script {
        endpoint: tool.to_owned(),
        op: op.to_owned(),
        steps: steps.to_vec(),
    });
    profile
}

/// The tools of `toml` over `router` in process.
fn clients(toml: &str, router: &axum::Router) -> ToolClients {
    let config = Config::from_toml_str(toml).unwrap_or_else(|e| panic!("test config is invalid:\n{e}"));
    ToolClients::from_config(&config, ServiceTransport::new(router.clone(), BODY_LIMIT)).expect("tools build")
}

fn refund_tool(upstream_idempotency: &str) -> String {
    format!(
        r#"
        version = 1
        [[tools]]
        name = "create_refund"
        upstream = {{ method = "POST", url = "http://chaos/tools/create_refund" }}
        side_effects = true
        upstream_idempotency = "{upstream_idempotency}"
        per_try_timeout = "1s"
        retry = {{ max_attempts = 3, base = "100ms", cap = "1s" }}
        "#
    )
}

async fn get_json(router: &axum::Router, path: &str) -> Value {
    let response = router
        .clone()
        .oneshot(http::Request::get(path).body(axum::body::Body::empty()).unwrap())
        .await
        .expect("the router answers");
    let bytes = axum::body::to_bytes(response.into_body(), BODY_LIMIT)
        .await
        .expect("body");
    serde_json::from_slice(&bytes).expect("json")
}

async fn executions(router: &axum::Router, op: &str) -> u64 {
    get_json(router, "/ledger").await["ops"][op]["executions"]
        .as_u64()
        .unwrap_or(0)
}

fn refund(op: &str) -> ToolCall {
    ToolCall::new(json!({"order_id": "1234", "amount": 42.5, "op": op}))
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
    assert_eq!(answer.body, json!({"results": [], "degraded": true}));
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
    assert_eq!(attempt.result, ballast::AttemptResult::Status(200), "{snapshot}");
}

/// An upstream that answers 409 "in progress" for this key `busy` times (each with `Retry-After: 1`), then 200.
fn busy_upstream(
    busy: u32,
    sent: Arc<AtomicU32>,
) -> impl tower::Service<
    http::Request<bytes::Bytes>,
    Response = http::Response<bytes::Bytes>,
    Error = ballast::Error,
    Future = std::future::Ready<Result<http::Response<bytes::Bytes>, ballast::Error>>,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(move |request: http::Request<bytes::Bytes>| {
        assert!(request.headers().contains_key("idempotency-key"));
        let n = sent.fetch_add(1, Ordering::SeqCst);
        let response = if n < busy {
            http::Response::builder()
                .status(409)
                .header("content-type", "application/problem+json")
                .header("retry-after", "1")
                .body(bytes::Bytes::from_static(
                    br#"{"type": "urn:ballast:idempotency-in-progress"}"#,
                ))
        } else {
            http::Response::builder()
                .status(200)
                .body(bytes::Bytes::from_static(br#"{"status": "succeeded"}"#))
        };
        std::future::ready(Ok(response.expect("a valid response")))
    })
}

/// A 409 "in progress" is waited out — past the attempt cap, as long as the deadline allows — until the
/// operation's answer comes.
#[tokio::test(start_paused = true)]
async fn a_409_in_progress_is_polled_until_the_answer_comes() {
    let sent = Arc::new(AtomicU32::new(0));
    let config = Config::from_toml_str(&refund_tool("keyed")).unwrap();
    let tools = ToolClients::from_config(&config, busy_upstream(5, Arc::clone(&sent))).unwrap();
    let started = ballast::clock::now();
    let answer = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-9"))
        .await
        .expect("answered");
    assert_eq!(answer.body["status"], "succeeded");
    assert_eq!(
        sent.load(Ordering::SeqCst),
        6,
        "five 409s, then the answer: {}",
        answer.report
    );
    let waited = ballast::clock::now().saturating_duration_since(started);
    assert!(
        waited >= Duration::from_secs(5),
        "each 409 asked for a second: {waited:?}"
    );
}

/// An operation that stays in progress past the deadline ends with the deadline, not a 90 s wait.
#[tokio::test(start_paused = true)]
async fn a_409_in_progress_is_not_polled_past_the_deadline() {
    let sent = Arc::new(AtomicU32::new(0));
    let config = Config::from_toml_str(&refund_tool("keyed")).unwrap();
    let tools = ToolClients::from_config(&config, busy_upstream(u32::MAX, Arc::clone(&sent))).unwrap();
    let deadline = ballast_core::Deadline::after(ballast::clock::now(), Duration::from_secs(10));
    let error = tools
        .get("create_refund")
        .unwrap()
        .call(refund("op-10").deadline(deadline))
        .await
        .expect_err("still in progress at the deadline");
    assert!(
        matches!(error, ballast::ToolError::Upstream { status: 409, .. }),
        "{error}"
    );
    assert!(
        matches!(error.report().stop, Some(ballast_core::StopReason::Deadline(_))),
        "{}",
        error.report()
    );
    assert!(
        !deadline.is_expired(ballast::clock::now()),
        "it stopped before the deadline, not after"
    );
    assert!(sent.load(Ordering::SeqCst) <= 11, "about one poll a second");
}
