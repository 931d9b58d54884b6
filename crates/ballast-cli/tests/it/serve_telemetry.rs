//! Traces over OTLP (`[telemetry]`), as a collector receives them: a test OTLP/HTTP receiver in this process gets
//! the spans of `ballast serve`'s calls — a tool call with one retry, a streamed chat completion — with the
//! attributes that explain them, the caller's trace continued, each attempt's span id the parent id its upstream
//! was sent; and a SIGTERM right after a call loses none of its spans.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::json;

use crate::support::gateway::{Gateway, call, chaos, client, eventually};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The spans a receiver got, each with its service's name.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// `app` served on 127.0.0.1 in this process; its base URL.
async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// An OTLP/HTTP receiver (`POST /v1/traces`, protobuf): its base URL and what it got.
async fn otlp_receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let kept = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| async move {
            let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                return StatusCode::BAD_REQUEST;
            };
            let mut kept = kept.lock().unwrap();
            for resource in request.resource_spans {
                let service = (resource.resource.iter())
                    .flat_map(|r| &r.attributes)
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                    .map(text_of)
                    .unwrap_or_default();
                for scope in resource.scope_spans {
                    kept.extend(scope.spans.into_iter().map(|span| (service.clone(), span)));
                }
            }
            StatusCode::OK
        }),
    );
    (serve(app).await, received)
}

/// A tool upstream that answers 503 to its first request and 200 after, keeping the `traceparent` of each.
async fn flaky_tool() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = Arc::clone(&seen);
    let calls = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/tool",
        post(move |headers: HeaderMap| async move {
            let traceparent = headers
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            kept.lock().unwrap().push(traceparent.to_owned());
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                (StatusCode::SERVICE_UNAVAILABLE, "{\"error\": \"busy\"}")
            } else {
                (StatusCode::OK, "{\"order\": \"A-1\", \"status\": \"shipped\"}")
            }
        }),
    );
    (serve(app).await, seen)
}

fn text_of(value: &Any) -> String {
    match value {
        Any::StringValue(s) => s.clone(),
        Any::IntValue(n) => n.to_string(),
        Any::BoolValue(b) => b.to_string(),
        Any::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// A span's attribute as text (`""` when absent).
fn attribute(span: &Span, key: &str) -> String {
    (span.attributes.iter())
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(text_of)
        .unwrap_or_default()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of the trace `trace_id` once the request span and `attempts` attempt spans have arrived (bounded).
async fn trace_of(received: &Received, trace_id: &str, attempts: usize) -> (Span, Vec<Span>) {
    eventually("the request's spans reach the collector", || {
        let spans: Vec<Span> = (received.lock().unwrap().iter())
            .filter(|(_, span)| hex(&span.trace_id) == trace_id)
            .map(|(_, span)| span.clone())
            .collect();
        let server = spans.iter().find(|s| s.kind == SpanKind::Server as i32).cloned();
        let mut clients: Vec<Span> = spans
            .into_iter()
            .filter(|s| s.kind == SpanKind::Client as i32)
            .collect();
        clients.sort_by_key(|s| attribute(s, "ballast.attempt"));
        std::future::ready(
            server
                .filter(|_| clients.len() == attempts)
                .map(|server| (server, clients)),
        )
    })
    .await
}

fn config(otlp: &str, tool: &str) -> String {
    format!(
        r#"version = 1
[store]
url = "sqlite://{{dir}}/ballast.db"
[telemetry]
endpoint = "{otlp}"
service_name = "gateway-under-test"
[[models]]
name = "agent"
deployments = [ {{ base_url = "{{chaos}}/v1", model = "mock" }} ]
[[tools]]
name = "lookup_order"
upstream = {{ method = "POST", url = "{tool}/tool" }}
retry = {{ max_attempts = 3, base = "10ms", cap = "20ms" }}
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_with_one_retry_is_traced_under_the_callers_trace() {
    let (otlp, received) = otlp_receiver().await;
    let (tool, seen) = flaky_tool().await;
    let upstream = chaos("").await;
    let gateway = Gateway::start(
        &config(&otlp, &tool),
        &upstream,
        &[("OTEL_BSP_SCHEDULE_DELAY", "50")],
    );
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let response = call(
        &client(),
        &gateway,
        "lookup_order",
        &json!({"order_id": "A-1"}),
        &[
            ("traceparent", traceparent.as_str()),
            ("ballast-run-id", "run-42"),
        ],
    )
    .await;
    assert_eq!(response.status(), 200);

    let (request, attempts) = trace_of(&received, CALLER_TRACE, 2).await;
    assert_eq!(
        hex(&request.parent_span_id),
        CALLER_SPAN,
        "the caller's span is the parent"
    );
    assert_eq!(request.name, "execute_tool lookup_order");
    for (key, value) in [
        ("http.request.method", "POST"),
        ("url.path", "/v1/tools/lookup_order"),
        ("http.response.status_code", "200"),
        ("ballast.code", "ok"),
        ("ballast.attempts", "2"),
        ("ballast.retries", "1"),
        ("ballast.breaker", "closed"),
        ("ballast.run_id", "run-42"),
        ("ballast.target", "lookup_order"),
        ("ballast.idempotency.replayed", "false"),
        ("ballast.outcome_unknown", "false"),
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "lookup_order"),
    ] {
        assert_eq!(attribute(&request, key), value, "{key}");
    }
    assert!(!attribute(&request, "ballast.request_id").is_empty());
    assert!(
        attribute(&request, "ballast.deadline_left_ms")
            .parse::<u64>()
            .is_ok()
    );
    assert!(!attribute(&request, "ballast.retry_budget_left").is_empty());

    let (first, second) = (&attempts[0], &attempts[1]);
    assert_eq!(attribute(first, "http.response.status_code"), "503");
    assert_eq!(attribute(first, "ballast.retry"), "true");
    assert_eq!(attribute(first, "ballast.retry.reason"), "503");
    assert_eq!(attribute(second, "http.response.status_code"), "200");
    assert_eq!(attribute(second, "ballast.retry"), "false");
    for attempt in &attempts {
        assert_eq!(
            attempt.parent_span_id, request.span_id,
            "an attempt is a child of its request"
        );
        assert_eq!(attribute(attempt, "ballast.attempt.sent"), "true");
        assert!(attempt.start_time_unix_nano >= request.start_time_unix_nano);
        assert!(attempt.end_time_unix_nano <= request.end_time_unix_nano);
    }
    // What the upstream was sent: the caller's trace, each attempt's span as the parent.
    let seen = seen.lock().unwrap().clone();
    let sent: Vec<String> = attempts
        .iter()
        .map(|a| format!("00-{CALLER_TRACE}-{}-01", hex(&a.span_id)))
        .collect();
    assert_eq!(seen, sent);
    let services: Vec<String> = received.lock().unwrap().iter().map(|(s, _)| s.clone()).collect();
    assert!(services.iter().all(|s| s == "gateway-under-test"), "{services:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_chat_completion_is_traced_with_its_tokens_when_its_stream_ends() {
    let (otlp, received) = otlp_receiver().await;
    let (tool, _) = flaky_tool().await;
    let upstream = chaos("").await;
    let gateway = Gateway::start(
        &config(&otlp, &tool),
        &upstream,
        &[("OTEL_BSP_SCHEDULE_DELAY", "50")],
    );
    let response = client()
        .post(gateway.url("/v1/chat/completions"))
        .json(&json!({"model": "agent", "stream": true, "messages": [{"role": "user", "content": "where is A-1?"}]}))
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let body = response.text().await.expect("the stream is read to its end");
    assert!(body.contains("data: [DONE]"), "{body}");

    // A request without a traceparent starts a trace of its own: find it by its request id.
    let trace_id = eventually("the stream's request span arrives", || {
        let found = (received.lock().unwrap().iter())
            .find(|(_, s)| {
                s.kind == SpanKind::Server as i32 && attribute(s, "ballast.request_id") == request_id
            })
            .map(|(_, s)| hex(&s.trace_id));
        std::future::ready(found)
    })
    .await;
    let (request, attempts) = trace_of(&received, &trace_id, 1).await;
    assert!(
        request.parent_span_id.is_empty(),
        "a trace that starts here has no parent"
    );
    assert_eq!(request.name, "chat agent");
    for (key, value) in [
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.provider.name", "openai"),
        ("gen_ai.request.model", "agent"),
        ("gen_ai.response.model", "mock"),
        ("ballast.route", "agent"),
        ("ballast.code", "ok"),
        ("http.response.status_code", "200"),
    ] {
        assert_eq!(attribute(&request, key), value, "{key}");
    }
    let input: u64 = attribute(&request, "gen_ai.usage.input_tokens")
        .parse()
        .expect("input tokens");
    let output: u64 = attribute(&request, "gen_ai.usage.output_tokens")
        .parse()
        .expect("output tokens");
    assert!(
        input > 0 && output > 0,
        "the usage the stream reported at its end: {input} in, {output} out"
    );
    let attempt = &attempts[0];
    assert_eq!(attempt.name, "chat mock");
    assert_eq!(attribute(attempt, "gen_ai.request.model"), "mock");
    assert_eq!(attempt.parent_span_id, request.span_id);
    assert!(request.end_time_unix_nano >= attempt.end_time_unix_nano);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigterm_right_after_a_call_loses_none_of_its_spans() {
    let (otlp, received) = otlp_receiver().await;
    let (tool, _) = flaky_tool().await;
    let upstream = chaos("").await;
    // Batches go every minute: only the shutdown's flush can deliver these spans in time.
    let gateway = Gateway::start(
        &config(&otlp, &tool),
        &upstream,
        &[("OTEL_BSP_SCHEDULE_DELAY", "60000")],
    );
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let response = call(
        &client(),
        &gateway,
        "lookup_order",
        &json!({"order_id": "A-1"}),
        &[("traceparent", traceparent.as_str())],
    )
    .await;
    assert_eq!(response.status(), 200);
    gateway.signal("-TERM");
    assert_eq!(gateway.wait_for_exit(), Some(0), "{}", gateway.stderr());
    let spans = received.lock().unwrap().len();
    assert_eq!(
        spans,
        3,
        "the request's span and its two attempts': {}",
        gateway.stderr()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unsampled_callers_trace_is_not_recorded() {
    let (otlp, received) = otlp_receiver().await;
    let (tool, seen) = flaky_tool().await;
    let upstream = chaos("").await;
    let gateway = Gateway::start(
        &config(&otlp, &tool),
        &upstream,
        &[("OTEL_BSP_SCHEDULE_DELAY", "50")],
    );
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-00");
    let response = call(
        &client(),
        &gateway,
        "lookup_order",
        &json!({"order_id": "A-1"}),
        &[("traceparent", traceparent.as_str())],
    )
    .await;
    assert_eq!(response.status(), 200);
    gateway.signal("-TERM");
    assert_eq!(gateway.wait_for_exit(), Some(0), "{}", gateway.stderr());
    assert!(
        received.lock().unwrap().is_empty(),
        "the caller decided: not sampled"
    );
    // Still carried on, as without telemetry: the caller's trace and flags, each attempt's own parent id.
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .all(|t| t.starts_with(&format!("00-{CALLER_TRACE}-")) && t.ends_with("-00")),
        "{seen:?}"
    );
}
