//! Streamed model answers (server-sent events), with their faults: a cut after N chunks (no `[DONE]`, the
//! connection ends mid-stream) and a stall after N chunks.
//!
//! A stream is planned first ([`plan`], pure: what to send and when to wait) and then played; the plan is what
//! the tests check without a clock. A cut fails the body: hyper abandons the response and closes the connection,
//! so the client sees the chunks sent so far and then an error — never a clean end that looks like success.

use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;

use crate::Fault;

use crate::model::{SSE_DONE, sse_data};

/// One step of a planned stream.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Send(Bytes),
    Wait(Duration),
    Cut,
}

/// The steps of streaming `chunks` under `fault` with `interval` between chunks. The stall or cut comes after
/// `after_chunks` chunks (after all of them when there are fewer, so it always happens before `[DONE]`).
fn plan(chunks: &[Value], fault: Fault, interval: Duration) -> Vec<Step> {
    let (cut_at, stall) = match fault {
        Fault::StreamCut { after_chunks } => (Some(after_chunks as usize), None),
        Fault::StreamStall { after_chunks, stall } => (None, Some((after_chunks as usize, stall))),
        _ => (None, None),
    };
    let mut steps = Vec::with_capacity(chunks.len() * 2 + 2);
    for index in 0..=chunks.len() {
        if index > 0 && !interval.is_zero() {
            steps.push(Step::Wait(interval));
        }
        let last = index == chunks.len();
        if let Some((after, pause)) = stall
            && (index == after || (last && after > index))
        {
            steps.push(Step::Wait(pause));
        }
        if cut_at.is_some_and(|after| index == after || (last && after > index)) {
            steps.push(Step::Cut);
            return steps;
        }
        steps.push(Step::Send(match chunks.get(index) {
            Some(chunk) => Bytes::from(sse_data(chunk)),
            None => Bytes::from_static(SSE_DONE.as_bytes()),
        }));
    }
    steps
}

/// The streamed answer of `chunks` under `fault`. `guard` (the request's stats visit and capacity slot) lives as
/// long as the stream, so the request counts as in flight until its last byte.
pub(crate) fn stream(
    chunks: &[Value],
    fault: Fault,
    interval: Duration,
    guard: impl Send + 'static,
) -> Response {
    let steps = plan(chunks, fault, interval).into_iter();
    let events = futures::stream::unfold((steps, guard), |(mut steps, guard)| async move {
        loop {
            match steps.next()? {
                Step::Wait(pause) => tokio::time::sleep(pause).await,
                Step::Send(event) => return Some((Ok(event), (steps, guard))),
                Step::Cut => {
                    // Let hyper flush the chunks sent so far before the failure closes the connection.
                    tokio::task::yield_now().await;
                    let cut = io::Error::new(io::ErrorKind::ConnectionAborted, "stream cut (chaos fault)");
                    return Some((Err(cut), (steps, guard)));
                }
            }
        }
    });
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;
    use serde_json::json;

    use super::*;

    fn chunks(n: usize) -> Vec<Value> {
        (0..n).map(|i| json!({"i": i})).collect()
    }

    fn sent(steps: &[Step]) -> Vec<String> {
        let text = |s: &Step| match s {
            Step::Send(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        };
        steps.iter().filter_map(text).collect()
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_normal_stream_sends_every_chunk_then_done() {
        let steps = plan(&chunks(2), Fault::None, MS);
        let expected = [
            Step::Send(Bytes::from(sse_data(&json!({"i": 0})))),
            Step::Wait(MS),
            Step::Send(Bytes::from(sse_data(&json!({"i": 1})))),
            Step::Wait(MS),
            Step::Send(Bytes::from_static(SSE_DONE.as_bytes())),
        ];
        assert_eq!(steps, expected);
    }

    #[test]
    fn a_cut_sends_n_chunks_and_never_done() {
        let steps = plan(&chunks(3), Fault::StreamCut { after_chunks: 1 }, Duration::ZERO);
        assert_eq!(sent(&steps), ["data: {\"i\":0}\n\n"]);
        assert_eq!(steps.last(), Some(&Step::Cut));
    }

    #[test]
    fn a_cut_past_the_last_chunk_still_comes_before_done() {
        let steps = plan(&chunks(2), Fault::StreamCut { after_chunks: 9 }, Duration::ZERO);
        assert_eq!(sent(&steps).len(), 2);
        assert_eq!(steps.last(), Some(&Step::Cut));
    }

    #[test]
    fn a_stall_waits_after_n_chunks_and_goes_on() {
        let stall = Duration::from_secs(2);
        let fault = Fault::StreamStall {
            after_chunks: 1,
            stall,
        };
        let steps = plan(&chunks(2), fault, Duration::ZERO);
        assert_eq!(steps[1], Step::Wait(stall));
        assert_eq!(sent(&steps).last().map(String::as_str), Some("data: [DONE]\n\n"));
    }

    #[tokio::test]
    async fn a_played_cut_yields_its_chunks_then_fails() {
        let response = stream(
            &chunks(3),
            Fault::StreamCut { after_chunks: 2 },
            Duration::ZERO,
            (),
        );
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let items: Vec<_> = response.into_body().into_data_stream().collect().await;
        assert_eq!(items.len(), 3);
        assert!(items[..2].iter().all(Result::is_ok));
        assert!(items[2].is_err());
    }
}
