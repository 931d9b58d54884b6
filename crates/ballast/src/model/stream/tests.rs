//! The reader of a committed stream, over hand-made bodies: what no chaos profile sends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ballast_core::Deadline;
use bytes::Bytes;
use futures::StreamExt as _;
use http_body::Frame;
use http_body_util::{BodyExt as _, StreamBody};

use super::*;
use crate::BoxError;

/// A reader of `frames` (after a commit), counting the frames it pulls, with events of at most `limit` bytes.
fn reader(frames: Vec<Bytes>, limit: usize, pulled: &Arc<AtomicUsize>) -> Reader<ChatChunk> {
    let pulled = Arc::clone(pulled);
    let frames = futures::stream::iter(frames).map(move |bytes| {
        pulled.fetch_add(1, Ordering::SeqCst);
        Ok::<_, BoxError>(Frame::data(bytes))
    });
    let now = clock::now();
    Reader {
        route: "agent".into(),
        decoder: SseDecoder::new(limit),
        body: Some(StreamBody::new(frames).boxed_unsync()),
        read: <crate::model::chat::Chat as crate::model::api::Streamed>::READ,
        idle: Duration::from_secs(30),
        deadline: Deadline::after(now, Duration::from_secs(60)),
        last_heard: now,
        cancel: crate::Cancel::never(),
        report: Report::default(),
        tried: Arc::new(Tried::default()),
        usage: None,
        ended: false,
        failed: None,
        permit: None,
        _slot: None,
    }
}

/// Regression: after the commit the reader buffered whatever the upstream sent, without bound — a line that
/// never ends (a broken proxy, a hostile upstream) grew the buffer until memory ran out, and ended at most as a
/// cut. It must stop reading once an unfinished event is over the limit.
#[tokio::test(start_paused = true)]
async fn an_event_over_the_limit_ends_the_stream_without_reading_on() {
    let mut frames = vec![Bytes::from_static(b"data: {\"choices\":[]}\n\ndata: \"")];
    frames.extend(std::iter::repeat_n(Bytes::from(vec![b'a'; 1024]), 64));
    let pulled = Arc::new(AtomicUsize::new(0));
    let mut reader = reader(frames, 4096, &pulled);
    let first = reader.next_item().await.expect("an item");
    assert!(first.is_ok(), "the first chunk: {first:?}");
    let error = reader
        .next_item()
        .await
        .expect("an item")
        .expect_err("an event over the limit is an error");
    assert_eq!(error.kind, StreamErrorKind::EventTooLarge { limit: 4096 });
    assert_eq!(error.code(), ErrorCode::UpstreamError);
    assert!(
        pulled.load(Ordering::SeqCst) <= 6,
        "stopped reading at the limit, pulled {} frames",
        pulled.load(Ordering::SeqCst)
    );
    assert!(reader.next_item().await.is_some_and(|item| item.is_err()));
}

/// The ends no chaos profile sends (an error event, a malformed chunk, an oversized event) are the upstream's
/// failures: the stream's breaker permit records a failure. `[DONE]` records a success.
#[tokio::test(start_paused = true)]
async fn the_breaker_learns_how_the_stream_ended() {
    use ballast_core::{BreakerConfig, BreakerState, CircuitBreaker};

    use crate::breaker::StreamPermit;

    type Kind = fn(&StreamErrorKind) -> bool;
    let cases: [(&str, Option<Kind>); 4] = [
        ("data: [DONE]\n\n", None),
        (
            "data: {\"error\": {\"message\": \"overloaded\"}}\n\n",
            Some(|k| matches!(k, StreamErrorKind::Upstream(_))),
        ),
        (
            "data: {\"choices\": 7}\n\n",
            Some(|k| matches!(k, StreamErrorKind::Malformed(_))),
        ),
        (
            "data: \"never ends",
            Some(|k| *k == StreamErrorKind::EventTooLarge { limit: 64 }),
        ),
    ];
    for (rest, failure) in cases {
        let config = BreakerConfig::builder().consecutive_failures(1).build().unwrap();
        let breaker = Arc::new(CircuitBreaker::seeded(config, Some(1)));
        let permit = breaker.try_acquire_owned(clock::now()).unwrap();
        let frames = vec![
            Bytes::from_static(b"data: {\"choices\":[]}\n\n"),
            Bytes::from(format!("{rest}{}", "a".repeat(100))),
        ];
        let mut reader = reader(frames, 64, &Arc::default());
        reader.permit = Some(Box::new(StreamPermit::new(permit, Duration::ZERO, None)));
        assert!(reader.next_item().await.expect("the first chunk").is_ok());
        let end = reader.next_item().await;
        let s = breaker.snapshot(clock::now());
        match (end, failure) {
            (None, None) => assert_eq!((s.state, s.window_calls), (BreakerState::Closed, 1), "a success"),
            (Some(Err(error)), Some(kind)) => {
                assert!(kind(&error.kind), "{rest}: {error:?}");
                assert_eq!(s.state, BreakerState::Open, "{rest}: a failure");
                assert_eq!(
                    reader.report.snapshot().breaker,
                    Some(BreakerState::Open),
                    "the report says so"
                );
            }
            (end, _) => panic!("{rest}: ended with {end:?}"),
        }
    }
}

/// The caller's side passes each event's data on as the upstream sent it — its keys in their order, its spacing,
/// an event of several `data:` lines as several lines — not the parsed chunk written out again (which sorted the
/// keys, and cost a parse's worth of CPU an event).
#[tokio::test(start_paused = true)]
async fn the_callers_side_passes_each_event_on_as_it_came() {
    let first = r#"{"id":"c1", "object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"model":"m"}"#;
    let frames = vec![
        Bytes::from(format!("data: {first}\n\n")),
        Bytes::from_static(
            b"data: {\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"!\"}}]}\n\n",
        ),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ];
    let stream = ModelStream {
        items: reader(frames, 4096, &Arc::new(AtomicUsize::new(0))).into_items(),
        tried: Arc::new(Tried::default()),
        deployment: "agent[0] m".into(),
        status: 200,
        headers: HeaderMap::new(),
    };
    let events: Vec<Bytes> = stream.into_sse().collect().await;
    assert_eq!(
        events,
        [
            Bytes::from(format!("data: {first}\n\n")),
            Bytes::from_static(
                b"data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"!\"}}]}\n\n"
            ),
            Bytes::from_static(b"data: [DONE]\n\n"),
        ]
    );
}

/// Anthropic reports a stream's input in `message_start` and its output, cumulative, in `message_delta`: the
/// stream's usage is each count's latest, the total their sum; a usage reported once (chat, Responses) is itself.
#[test]
fn a_streams_usage_is_each_counts_latest() {
    let usage = |prompt, completion, total| TokenUsage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: total,
    };
    let start = Some(usage(572, 2, 574));
    let delta = Some(usage(0, 89, 89));
    assert_eq!(super::latest(start, delta), Some(usage(572, 89, 661)));
    assert_eq!(super::latest(None, delta), delta);
    assert_eq!(super::latest(start, None), start);
    assert_eq!(
        super::latest(Some(usage(3, 4, 10)), Some(usage(3, 5, 8))),
        Some(usage(3, 5, 10)),
        "a total reported"
    );
}
