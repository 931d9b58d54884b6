//! ModelClient streaming against chaos upstreams in process (paused time): retries and fallbacks until the first
//! chunk, then an error item — never a clean end — for a cut, a stall or the deadline; tokens of a failed stream.

use crate::support;

use std::time::Duration;

use ballast::{
    clock,
    model::{ChatStream, StreamError, StreamErrorKind},
};
use ballast_core::ErrorCode;
use futures::StreamExt as _;
use serde_json::Value;
use support::chat::{Upstreams, call, client, config, first_turn, profile};

/// Reads the stream to its end: the chunks, and the error it ended with, if any.
async fn drain(mut stream: ChatStream) -> (Vec<Value>, Option<StreamError>) {
    let mut chunks = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => chunks.push(serde_json::to_value(&chunk).unwrap()),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing after the error");
                return (chunks, Some(error));
            }
        }
    }
    (chunks, None)
}

fn with_usage(mut body: Value) -> Value {
    body["stream_options"] = serde_json::json!({"include_usage": true});
    body
}

/// A stream that goes well: every chunk, a clean end, and the usage chunk's tokens as the answer's.
#[tokio::test(start_paused = true)]
async fn a_clean_stream_ends_after_done_with_its_tokens() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .stream(call(&with_usage(first_turn("op-s1"))))
        .await
        .expect("committed");
    assert_eq!(stream.deployment(), "agent[0] mock");
    assert_eq!(stream.status(), 200);
    let reports_before = stream.report();
    let (chunks, error) = drain_keep(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert!(chunks.len() >= 4, "{chunks:?}");
    let usage = chunks.last().expect("a usage chunk")["usage"].clone();
    assert!(usage["total_tokens"].as_u64().is_some_and(|t| t > 0), "{usage}");
    assert_eq!(upstreams.seen()[0].body["stream"], true);
    assert!(reports_before.tokens.is_none(), "no tokens before the end");
}

/// Reads the stream to its end and returns its chunks, its error and its final report.
async fn drain_keep(mut stream: ChatStream) -> (Vec<Value>, Option<StreamError>) {
    let mut chunks = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => chunks.push(serde_json::to_value(&chunk).unwrap()),
            Err(error) => return (chunks, Some(error)),
        }
    }
    let report = stream.report();
    let tokens = report.tokens.expect("the answer's tokens");
    let usage = &chunks.last().expect("a chunk")["usage"];
    assert_eq!(Some(tokens.answered.total_tokens), usage["total_tokens"].as_u64());
    assert_eq!(tokens.failed.total_tokens, 0);
    (chunks, None)
}

/// Issue 6, test 6a: a hang and a reset before the first chunk are retried transparently; the per-try timeout
/// bounds the time to the first chunk.
#[tokio::test(start_paused = true)]
async fn faults_before_the_first_chunk_are_retried() {
    let script = "[[scripts]]\nendpoint = \"model\"\nop = \"op-s2\"\nsteps = [\"hang\", \"reset\", \"ok\"]";
    let upstreams = Upstreams::new(&[("primary", profile(script)), ("fallback", profile(""))]);
    let route = client(&config("per_try_timeout = \"2s\""), &upstreams);
    let started = clock::now();
    let stream = route
        .stream(call(&first_turn("op-s2")))
        .await
        .expect("committed on the third attempt");
    let to_first = clock::now().saturating_duration_since(started);
    assert!(
        to_first >= Duration::from_secs(2) && to_first < Duration::from_secs(5),
        "{to_first:?}"
    );
    let report = stream.report();
    let (chunks, error) = drain(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert!(chunks.len() >= 4);
    assert_eq!(upstreams.count("primary"), 3);
    assert_eq!(upstreams.count("fallback"), 0);
    assert_eq!(report.attempts.len(), 3, "{report}");
    assert_eq!(
        report.attempts[0].result,
        ballast::report::AttemptResult::Error("timeout".into())
    );
    assert_eq!(report.attempts[0].duration, Duration::from_secs(2));
}

/// Issue 6, test 6b: a cut after the first chunk is an error item, never a clean end, and is not retried.
#[tokio::test(start_paused = true)]
async fn a_cut_after_the_first_chunk_is_an_error() {
    let cut = "[endpoints.model]\nstream = { cut = 1.0, cut_after_chunks = 2 }";
    let upstreams = Upstreams::new(&[("primary", profile(cut)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route.stream(call(&first_turn("op-s3"))).await.expect("committed");
    let (chunks, error) = drain(stream).await;
    assert_eq!(chunks.len(), 2);
    let error = error.expect("an error, not a clean end");
    assert_eq!(error.kind, StreamErrorKind::Cut);
    assert_eq!(error.code(), ErrorCode::UpstreamError);
    assert_eq!(error.report.code, Some(ErrorCode::UpstreamError));
    assert_eq!(upstreams.count("primary"), 1, "never retried after the commit");
    assert_eq!(upstreams.count("fallback"), 0);

    // The caller's side as server-sent events: the chunks, then an error event, and no [DONE].
    let sse = route
        .stream(call(&first_turn("op-s3")))
        .await
        .expect("committed")
        .into_sse();
    let events: Vec<String> = sse
        .map(|b| String::from_utf8(b.to_vec()).unwrap())
        .collect()
        .await;
    assert_eq!(events.len(), 3, "{events:?}");
    let last: Value = serde_json::from_str(events[2].strip_prefix("data: ").unwrap().trim()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_error");
    assert!(events.iter().all(|e| e != "data: [DONE]\n\n"), "{events:?}");
}

/// A clean stream's events end with `[DONE]`.
#[tokio::test(start_paused = true)]
async fn a_clean_stream_as_sse_ends_with_done() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let sse = route
        .stream(call(&first_turn("op-s4")))
        .await
        .expect("committed")
        .into_sse();
    let events: Vec<String> = sse
        .map(|b| String::from_utf8(b.to_vec()).unwrap())
        .collect()
        .await;
    assert_eq!(events.last().map(String::as_str), Some("data: [DONE]\n\n"));
    assert!(events.iter().all(|e| !e.contains("\"error\"")));
}

/// Issue 6, test 6c: a stall longer than the idle timeout is an error.
#[tokio::test(start_paused = true)]
async fn a_stall_longer_than_the_idle_timeout_is_an_error() {
    let stall = "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 2, stall_for = \"5s\" }";
    let upstreams = Upstreams::new(&[("primary", profile(stall)), ("fallback", profile(""))]);
    let route = client(&config("stream_idle_timeout = \"1s\""), &upstreams);
    let mut stream = route.stream(call(&first_turn("op-s5"))).await.expect("committed");
    assert!(stream.next().await.expect("first").is_ok());
    assert!(stream.next().await.expect("second").is_ok());
    let second_at = clock::now();
    let error = stream
        .next()
        .await
        .expect("an item")
        .expect_err("the stall is an error");
    assert_eq!(error.kind, StreamErrorKind::Idle(Duration::from_secs(1)));
    assert_eq!(
        clock::now().saturating_duration_since(second_at),
        Duration::from_secs(1)
    );
    assert!(stream.next().await.is_none());
}

/// A stall shorter than the idle timeout is waited out.
#[tokio::test(start_paused = true)]
async fn a_stall_shorter_than_the_idle_timeout_is_waited_out() {
    let stall = "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 2, stall_for = \"500ms\" }";
    let upstreams = Upstreams::new(&[("primary", profile(stall)), ("fallback", profile(""))]);
    let route = client(&config("stream_idle_timeout = \"1s\""), &upstreams);
    let stream = route.stream(call(&first_turn("op-s6"))).await.expect("committed");
    let (_, error) = drain(stream).await;
    assert!(error.is_none(), "{error:?}");
}

/// The deadline bounds a stream after its commit too — less its reserve, so the caller hears of it before its
/// deadline (regression, issue 11: it ended at the deadline itself).
#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_committed_stream() {
    let stall = "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 1, stall_for = \"60s\" }";
    let upstreams = Upstreams::new(&[("primary", profile(stall)), ("fallback", profile(""))]);
    let route = client(&config("stream_idle_timeout = \"30s\""), &upstreams);
    let started = clock::now();
    let stream = route.stream(call(&first_turn("op-s7"))).await.expect("committed");
    let (chunks, error) = drain(stream).await;
    assert_eq!(chunks.len(), 1);
    let error = error.expect("the deadline");
    assert_eq!(error.kind, StreamErrorKind::Deadline);
    assert_eq!(error.code(), ErrorCode::DeadlineExceeded);
    assert_eq!(
        clock::now().saturating_duration_since(started),
        Duration::from_secs(10) - ballast_core::DEFAULT_RESERVE
    );
}

/// Tokens the upstream reported on a stream that then failed count as a failed attempt's.
#[tokio::test(start_paused = true)]
async fn tokens_of_a_stream_cut_after_its_usage_count_as_failed() {
    // Cut after every chunk, the usage chunk included: before [DONE].
    let cut = "[endpoints.model]\nstream = { cut = 1.0, cut_after_chunks = 100 }";
    let upstreams = Upstreams::new(&[("primary", profile(cut)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .stream(call(&with_usage(first_turn("op-s8"))))
        .await
        .expect("committed");
    let (chunks, error) = drain(stream).await;
    let error = error.expect("cut before [DONE]");
    assert_eq!(error.kind, StreamErrorKind::Cut);
    let usage = &chunks.last().expect("the usage chunk")["usage"];
    let tokens = error.report.tokens.expect("tokens recorded");
    assert_eq!(Some(tokens.failed.total_tokens), usage["total_tokens"].as_u64());
    assert!(tokens.failed.total_tokens > 0);
    assert_eq!(tokens.answered.total_tokens, 0);
}

/// Before the commit a streamed call falls back like any other: a spent quota on the primary, the fallback
/// streams.
#[tokio::test(start_paused = true)]
async fn a_stream_falls_back_before_its_first_chunk() {
    let quota = "[endpoints.model]\ninsufficient_quota = 1.0";
    let upstreams = Upstreams::new(&[("primary", profile(quota)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .stream(call(&first_turn("op-s9")))
        .await
        .expect("the fallback commits");
    assert_eq!(stream.deployment(), "agent[1] gpt-4.1");
    let report = stream.report();
    assert_eq!(
        report.attempts[0].result,
        ballast::report::AttemptResult::Status(429)
    );
    assert!(report.answered_by_fallback(), "{report}");
    let (chunks, error) = drain(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert!(
        chunks.iter().all(|c| c["model"] == "gpt-4.1"),
        "the fallback's model: {chunks:?}"
    );
}

/// Regression: a streamed attempt told the upstream its first-chunk timeout in `ballast-timeout-ms`, so an
/// upstream that honours the header (another Ballast) would cut a long stream at the per-try timeout. A stream
/// runs until the call's deadline, and says so; a completion still announces its per-try timeout.
#[tokio::test(start_paused = true)]
async fn a_stream_announces_the_calls_remaining_time_not_its_first_chunk_timeout() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config("per_try_timeout = \"2s\""), &upstreams);
    let stream = route.stream(call(&first_turn("op-s9"))).await.expect("committed");
    drain(stream).await;
    route
        .complete(call(&first_turn("op-s10")))
        .await
        .expect("answered");
    let told: Vec<_> = upstreams
        .seen()
        .iter()
        .map(|s| s.headers["ballast-timeout-ms"].clone())
        .collect();
    assert_eq!(
        told,
        ["9950", "2000"],
        "the stream: 10 s deadline less the 50 ms reserve; the completion: its per-try"
    );
}

/// Regression: a committed stream ignored the call's cancellation token (only dropping the stream stopped it),
/// so a cancelled agent step kept reading a stalled upstream until the idle timeout. It now ends at once with a
/// `Cancelled` error item — never a clean end.
#[tokio::test(start_paused = true)]
async fn cancelling_the_token_ends_a_committed_stream_at_once() {
    let stall = "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 1, stall_for = \"60s\" }";
    let upstreams = Upstreams::new(&[("primary", profile(stall)), ("fallback", profile(""))]);
    let route = client(&config("stream_idle_timeout = \"30s\""), &upstreams);
    let token = tokio_util::sync::CancellationToken::new();
    let mut stream = route
        .stream(call(&first_turn("op-s11")).cancel_token(token.clone()))
        .await
        .expect("committed");
    assert!(stream.next().await.expect("first").is_ok());
    let cancelled_at = clock::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    });
    let error = stream.next().await.expect("an item").expect_err("cancelled");
    assert_eq!(error.kind, StreamErrorKind::Cancelled);
    assert_eq!(
        clock::now().saturating_duration_since(cancelled_at),
        Duration::from_millis(200)
    );
    assert!(stream.next().await.is_none());
}

/// A call's future is moved whole at each step up (the route's loop, the span, the caller's own future, a
/// spawned task), so its size is paid in copies on every call. Regression: one attempt's state was held four
/// times over — by the primary's deadline scope, the route's loop and the stream's commit scope — and a streamed
/// call's future had grown to 36 KB (a whole call, 9 KB): a fifth of the gateway's instructions on a model route
/// went to copying it. The attempt is boxed once per trip now.
#[test]
fn a_model_calls_future_stays_small() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let turn = first_turn("op-size");
    let sizes = [
        ("stream", std::mem::size_of_val(&route.stream(call(&turn)))),
        ("complete", std::mem::size_of_val(&route.complete(call(&turn)))),
    ];
    for (name, size) in sizes {
        assert!(size <= 4 * 1024, "{name}: {size} bytes");
    }
}
