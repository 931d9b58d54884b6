//! The spans of a request, from a report made by hand: names, kinds, ids, times and attributes.

use std::time::{Duration, SystemTime};

use ballast::report::{AttemptRecord, AttemptResult, OutcomeReport, TokenUsage, Tokens};
use ballast_config::Api;
use ballast_core::{BreakerState, ErrorCode, Instant};
use http::{HeaderMap, HeaderValue};
use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry_sdk::trace::SpanData;

use super::*;

const TRACE: u128 = 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736;
const CALLER: u64 = 0x00f0_67aa_0ba9_02b7;

fn at(ms: u64) -> Instant {
    Instant::from_nanos(1_000_000_000 + ms * 1_000_000)
}

fn timeline() -> Timeline {
    Timeline {
        trace_id: TRACE,
        span_id: 0xaaaa,
        parent: Some(CALLER),
        started: (at(0), SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)),
        answered: at(300),
        ended: at(320),
    }
}

fn attempt(number: u32, result: AttemptResult, start_ms: u64, ms: u64, span_id: u64) -> AttemptRecord {
    AttemptRecord {
        number,
        sent: !matches!(result, AttemptResult::Refused(_)),
        result,
        duration: Duration::from_millis(ms),
        background: false,
        started: Some(at(start_ms)),
        span_id: Some(span_id),
    }
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> String {
    attribute(span, key)
        .unwrap_or_else(|| panic!("{key} missing from {}", span.name))
        .to_string()
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.insert(*name, HeaderValue::from_static(value));
    }
    headers
}

fn draw(facts: &RequestFacts<'_>, call: Option<(&Called, &OutcomeReport)>) -> Vec<SpanData> {
    let mut next = 0x100;
    spans(facts, call, &Deployments::default(), &mut || {
        next += 1;
        next
    })
}

#[test]
fn a_tool_call_with_one_retry_is_a_server_span_and_two_client_spans_under_it() {
    let answer = headers(&[
        ("x-request-id", "req-1"),
        ("ballast-attempts", "2"),
        ("ballast-remaining-ms", "700"),
    ]);
    let facts = RequestFacts {
        timeline: timeline(),
        method: "POST",
        path: "/v1/tools/lookup_order",
        run_id: Some("run-7"),
        status: 200,
        headers: &answer,
    };
    let report = OutcomeReport {
        target: "lookup_order".into(),
        attempts: vec![
            attempt(1, AttemptResult::Status(503), 10, 40, 0x11),
            attempt(2, AttemptResult::Status(200), 150, 30, 0x22),
        ],
        breaker: Some(BreakerState::Closed),
        budget_left: Some(9),
        ..OutcomeReport::default()
    };
    let spans = draw(&facts, Some((&Called::Tool, &report)));
    assert_eq!(spans.len(), 3);

    let request = &spans[0];
    assert_eq!(request.name, "execute_tool lookup_order");
    assert_eq!(request.span_kind, SpanKind::Server);
    assert_eq!(request.span_context.trace_id(), TraceId::from(TRACE));
    assert_eq!(request.span_context.span_id(), SpanId::from(0xaaaa));
    assert_eq!(request.parent_span_id, SpanId::from(CALLER));
    assert!(request.parent_span_is_remote);
    assert_eq!(
        request.end_time.duration_since(request.start_time).unwrap(),
        Duration::from_millis(320)
    );
    assert_eq!(request.status, Status::Unset);
    for (key, value) in [
        ("http.request.method", "POST"),
        ("url.path", "/v1/tools/lookup_order"),
        ("http.response.status_code", "200"),
        ("ballast.request_id", "req-1"),
        ("ballast.run_id", "run-7"),
        ("ballast.code", "ok"),
        ("ballast.attempts", "2"),
        ("ballast.retries", "1"),
        ("ballast.breaker", "closed"),
        ("ballast.retry_budget_left", "9"),
        ("ballast.deadline_left_ms", "700"),
        ("ballast.deadline_ms", "1000"),
        ("ballast.idempotency.replayed", "false"),
        ("ballast.outcome_unknown", "false"),
        ("ballast.deferred", "false"),
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "lookup_order"),
        ("ballast.target", "lookup_order"),
    ] {
        assert_eq!(text(request, key), value, "{key}");
    }

    let (first, second) = (&spans[1], &spans[2]);
    for (span, id) in [(first, 0x11), (second, 0x22)] {
        assert_eq!(span.span_kind, SpanKind::Client);
        assert_eq!(span.name, "execute_tool lookup_order");
        assert_eq!(span.span_context.trace_id(), TraceId::from(TRACE));
        assert_eq!(
            span.span_context.span_id(),
            SpanId::from(id),
            "the id it sent upstream"
        );
        assert_eq!(span.parent_span_id, SpanId::from(0xaaaa));
    }
    assert_eq!(
        first.start_time.duration_since(request.start_time).unwrap(),
        Duration::from_millis(10)
    );
    assert_eq!(
        first.end_time.duration_since(first.start_time).unwrap(),
        Duration::from_millis(40)
    );
    assert_eq!(text(first, "ballast.attempt"), "1");
    assert_eq!(text(first, "http.response.status_code"), "503");
    assert_eq!(text(first, "ballast.attempt.sent"), "true");
    assert_eq!(text(first, "ballast.retry"), "true");
    assert_eq!(text(first, "ballast.retry.reason"), "503");
    assert_eq!(first.status, Status::error("503"));
    assert_eq!(text(second, "ballast.retry"), "false");
    assert_eq!(text(second, "ballast.retry.why_not"), "succeeded");
}

#[test]
fn a_failed_call_says_why_it_stopped_and_is_an_error() {
    let answer = headers(&[("ballast-attempts", "1"), ("ballast-code", "circuit_open")]);
    let facts = RequestFacts {
        timeline: Timeline {
            parent: None,
            ..timeline()
        },
        method: "POST",
        path: "/v1/tools/create_refund",
        run_id: None,
        status: 503,
        headers: &answer,
    };
    let report = OutcomeReport {
        target: "create_refund".into(),
        attempts: vec![
            attempt(1, AttemptResult::Error("timeout".into()), 0, 2000, 0x11),
            AttemptRecord {
                started: None,
                span_id: None,
                ..attempt(2, AttemptResult::Refused("circuit open".into()), 0, 0, 0)
            },
        ],
        breaker: Some(BreakerState::Open),
        stop: Some(ballast_core::StopReason::RetryBudgetExhausted),
        code: Some(ErrorCode::CircuitOpen),
        outcome_unknown: true,
        ..OutcomeReport::default()
    };
    let spans = draw(&facts, Some((&Called::Tool, &report)));
    let request = &spans[0];
    assert_eq!(
        request.parent_span_id,
        SpanId::INVALID,
        "a trace started here has no parent"
    );
    assert_eq!(request.status, Status::error("circuit_open"));
    assert_eq!(text(request, "ballast.code"), "circuit_open");
    assert_eq!(text(request, "ballast.breaker"), "open");
    assert_eq!(text(request, "ballast.outcome_unknown"), "true");
    assert!(attribute(request, "ballast.stop").is_some());
    let (timed_out, refused) = (&spans[1], &spans[2]);
    assert_eq!(text(timed_out, "ballast.attempt.result"), "error");
    assert_eq!(text(timed_out, "ballast.attempt.why"), "timeout");
    assert_eq!(text(timed_out, "ballast.retry"), "true");
    assert_eq!(text(refused, "ballast.attempt.result"), "refused");
    assert_eq!(text(refused, "ballast.attempt.why"), "circuit open");
    assert_eq!(text(refused, "ballast.attempt.sent"), "false");
    assert_eq!(text(refused, "ballast.retry"), "false");
    assert_eq!(
        text(refused, "ballast.retry.why_not"),
        text(request, "ballast.stop")
    );
    assert_eq!(
        refused.span_context.span_id(),
        SpanId::from(0x101),
        "a refused attempt sent no id: a new one"
    );
    assert_eq!(
        refused.start_time, timed_out.end_time,
        "placed where the attempt before it ended"
    );
}

#[test]
fn a_model_call_carries_the_gen_ai_attributes_and_its_fallback_deployment() {
    let answer = headers(&[("ballast-fallback", "agent[1] backup-model")]);
    let facts = RequestFacts {
        timeline: timeline(),
        method: "POST",
        path: "/v1/chat/completions",
        run_id: None,
        status: 200,
        headers: &answer,
    };
    let backup = OutcomeReport {
        target: "agent[1] backup-model".into(),
        attempts: vec![attempt(1, AttemptResult::Status(200), 60, 100, 0x33)],
        tokens: Some(Tokens {
            answered: TokenUsage {
                prompt_tokens: 12,
                completion_tokens: 34,
                total_tokens: 46,
            },
            failed: TokenUsage::default(),
        }),
        ..OutcomeReport::default()
    };
    let report = OutcomeReport {
        target: "agent[0] main-model".into(),
        attempts: vec![attempt(1, AttemptResult::Status(500), 5, 50, 0x11)],
        code: Some(ErrorCode::UpstreamError),
        fallback: Some(backup.target.clone()),
        fallback_report: Some(Box::new(backup)),
        ..OutcomeReport::default()
    };
    let mut deployments = Deployments::default();
    deployments
        .0
        .insert("agent[0] main-model".into(), "main-model".into());
    deployments
        .0
        .insert("agent[1] backup-model".into(), "backup-model".into());
    let called = Called::Model {
        api: Api::Messages,
        route: "agent".into(),
    };
    let spans = spans(&facts, Some((&called, &report)), &deployments, &mut || 1);
    let request = &spans[0];
    assert_eq!(request.name, "chat agent");
    assert_eq!(text(request, "gen_ai.operation.name"), "chat");
    assert_eq!(text(request, "gen_ai.provider.name"), "anthropic");
    assert_eq!(text(request, "gen_ai.request.model"), "agent");
    assert_eq!(text(request, "gen_ai.response.model"), "backup-model");
    assert_eq!(text(request, "gen_ai.usage.input_tokens"), "12");
    assert_eq!(text(request, "gen_ai.usage.output_tokens"), "34");
    assert_eq!(text(request, "ballast.code"), "fallback");
    assert_eq!(text(request, "ballast.fallback"), "agent[1] backup-model");
    assert_eq!(request.status, Status::Unset, "answered");
    assert_eq!(spans.len(), 3);
    assert_eq!(spans[1].name, "chat main-model");
    assert_eq!(text(&spans[1], "gen_ai.request.model"), "main-model");
    assert_eq!(text(&spans[1], "ballast.retry.why_not"), "upstream_error");
    assert_eq!(spans[2].name, "chat backup-model");
    assert_eq!(text(&spans[2], "ballast.target"), "agent[1] backup-model");
}

#[test]
fn a_request_without_a_call_is_named_by_its_method() {
    let answer = headers(&[("ballast-code", "unauthorized")]);
    let facts = RequestFacts {
        timeline: timeline(),
        method: "GET",
        path: "/v1/operations/k",
        run_id: None,
        status: 401,
        headers: &answer,
    };
    let spans = draw(&facts, None);
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].name, "GET");
    assert_eq!(text(&spans[0], "ballast.code"), "unauthorized");
    assert_eq!(
        spans[0].status,
        Status::Unset,
        "a 4xx is the caller's: not a server error"
    );
}
