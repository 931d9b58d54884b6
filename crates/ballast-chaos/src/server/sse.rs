//! Streamed model answers (server-sent events), with their faults: a cut after N events (the connection ends
//! mid-stream, before `[DONE]`, `response.completed` or `message_stop`) and a stall after N events, silent or
//! filled with keep-alive comments. A stream error after content is the endpoint's to frame (its events, then its
//! API's error event): it reaches this module as the frames to send, played as they are.
//!
//! A stream is planned first ([`plan`], pure: what to send and when to wait) and then played; the plan is what
//! the tests check without a clock. A stream is its frames, already framed as SSE (`data: ...`, or `event: ...`
//! and `data: ...`), the last one the frame that ends it (`[DONE]`, `response.completed`): faults count every frame
//! sent, the preamble included, and always fall before that last one, so a faulted stream never ends the way a
//! good one does. A cut fails the body: hyper abandons the response and closes the connection, so the client sees
//! the frames sent so far and then an error — never a clean end that looks like success.

use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;

use crate::Fault;
use crate::model::SSE_KEEP_ALIVE;

/// The timing of a stream: the pause between frames, and the keep-alive interval during a stall.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pace {
    /// Between two frames (the profile's `model.chunk_interval`).
    pub(crate) interval: Duration,
    /// A `: keep-alive` comment this often while the stream stalls (`stream.keep_alive`); `None`: silence.
    pub(crate) keep_alive: Option<Duration>,
}

impl Pace {
    /// The pace of `endpoint`'s streams under `profile`.
    pub(crate) fn of(profile: &crate::Profile, endpoint: &str) -> Pace {
        Pace {
            interval: profile.model.chunk_interval,
            keep_alive: profile.endpoint(endpoint).stream.keep_alive,
        }
    }
}

/// One step of a planned stream.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Send(Bytes),
    Wait(Duration),
    /// A stall of this long, with a keep-alive comment this often (played as waits and comments, lazily: a long
    /// stall with a short interval is not a long list).
    Stall(Duration, Option<Duration>),
    Cut,
}

/// The steps of streaming `frames` under `fault` at `pace`. The stall or cut comes after `after_chunks` frames
/// (before the last frame when there are not that many).
fn plan(frames: &[Bytes], fault: Fault, pace: Pace) -> Vec<Step> {
    let last = frames.len().saturating_sub(1);
    let (cut_at, stall) = match fault {
        Fault::StreamCut { after_chunks } => (Some((after_chunks as usize).min(last)), None),
        Fault::StreamStall { after_chunks, stall } => {
            (None, Some(((after_chunks as usize).min(last), stall)))
        }
        _ => (None, None),
    };
    let mut steps = Vec::with_capacity(frames.len() * 2 + 1);
    for (index, frame) in frames.iter().enumerate() {
        if index > 0 && !pace.interval.is_zero() {
            steps.push(Step::Wait(pace.interval));
        }
        if let Some((at, pause)) = stall
            && index == at
        {
            steps.push(Step::Stall(pause, pace.keep_alive));
        }
        if cut_at == Some(index) {
            steps.push(Step::Cut);
            return steps;
        }
        steps.push(Step::Send(frame.clone()));
    }
    steps
}

/// A stall of `stall` as waits and keep-alive comments: a comment every `keep_alive` strictly inside the stall,
/// then the rest of it; without keep-alives (or with an interval of 0), one wait.
fn stall_steps(stall: Duration, keep_alive: Option<Duration>) -> impl Iterator<Item = Step> {
    let (every, comments, rest) = match keep_alive.filter(|every| !every.is_zero()) {
        None => (Duration::ZERO, 0, stall),
        Some(every) => {
            let (total, step) = (stall.as_nanos(), every.as_nanos());
            // Comments at every, 2 every, ... strictly before the stall ends.
            let comments = total.saturating_sub(1) / step;
            let rest = total - comments * step;
            let rest = Duration::from_nanos(u64::try_from(rest).unwrap_or(u64::MAX));
            (every, u64::try_from(comments).unwrap_or(u64::MAX), rest)
        }
    };
    (0..comments)
        .flat_map(move |_| {
            [
                Step::Wait(every),
                Step::Send(Bytes::from_static(SSE_KEEP_ALIVE.as_bytes())),
            ]
        })
        .chain(std::iter::once(Step::Wait(rest)))
}

/// The plan with its stalls spelled out, lazily.
fn played(steps: Vec<Step>) -> impl Iterator<Item = Step> {
    steps
        .into_iter()
        .flat_map(|step| -> Box<dyn Iterator<Item = Step> + Send> {
            match step {
                Step::Stall(stall, keep_alive) => Box::new(stall_steps(stall, keep_alive)),
                step => Box::new(std::iter::once(step)),
            }
        })
}

/// The streamed answer of `frames` under `fault` at `pace`. `guard` (the request's stats visit and capacity
/// slot) lives as long as the stream, so the request counts as in flight until its last byte.
pub(crate) fn stream(frames: &[Bytes], fault: Fault, pace: Pace, guard: impl Send + 'static) -> Response {
    let steps = played(plan(frames, fault, pace));
    let events = futures::stream::unfold((steps, guard), |(mut steps, guard)| async move {
        loop {
            match steps.next()? {
                Step::Wait(pause) if pause.is_zero() => {}
                Step::Wait(pause) => tokio::time::sleep(pause).await,
                Step::Send(event) => return Some((Ok(event), (steps, guard))),
                // `played` spells stalls out.
                Step::Stall(..) => {}
                Step::Cut => {
                    // Let hyper flush the frames sent so far before the failure closes the connection.
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

    use super::*;
    use crate::model::SSE_DONE;

    /// `n` frames, then `[DONE]`.
    fn frames(n: usize) -> Vec<Bytes> {
        (0..n)
            .map(|i| Bytes::from(format!("data: {{\"i\":{i}}}\n\n")))
            .chain(std::iter::once(Bytes::from_static(SSE_DONE.as_bytes())))
            .collect()
    }

    fn sent(steps: &[Step]) -> Vec<String> {
        let text = |s: &Step| match s {
            Step::Send(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            _ => None,
        };
        steps.iter().filter_map(text).collect()
    }

    const MS: Duration = Duration::from_millis(1);

    fn paced(interval: Duration) -> Pace {
        Pace {
            interval,
            keep_alive: None,
        }
    }

    #[test]
    fn a_normal_stream_sends_every_frame() {
        let steps = plan(&frames(2), Fault::None, paced(MS));
        let expected = [
            Step::Send(frames(2)[0].clone()),
            Step::Wait(MS),
            Step::Send(frames(2)[1].clone()),
            Step::Wait(MS),
            Step::Send(Bytes::from_static(SSE_DONE.as_bytes())),
        ];
        assert_eq!(steps, expected);
    }

    #[test]
    fn a_cut_sends_n_frames_and_never_the_last() {
        let steps = plan(&frames(3), Fault::StreamCut { after_chunks: 1 }, Pace::default());
        assert_eq!(sent(&steps), ["data: {\"i\":0}\n\n"]);
        assert_eq!(steps.last(), Some(&Step::Cut));
    }

    #[test]
    fn a_cut_past_the_last_frame_still_comes_before_it() {
        let steps = plan(&frames(2), Fault::StreamCut { after_chunks: 9 }, Pace::default());
        assert_eq!(sent(&steps).len(), 2);
        assert_eq!(steps.last(), Some(&Step::Cut));
    }

    #[test]
    fn a_stall_waits_after_n_frames_and_goes_on() {
        let stall = Duration::from_secs(2);
        let fault = Fault::StreamStall {
            after_chunks: 1,
            stall,
        };
        let steps: Vec<Step> = played(plan(&frames(2), fault, Pace::default())).collect();
        assert_eq!(steps[1], Step::Wait(stall));
        assert_eq!(sent(&steps).last().map(String::as_str), Some(SSE_DONE));
    }

    #[test]
    fn a_stall_with_keep_alives_sends_only_comments_while_it_lasts() {
        let stall = Duration::from_secs(2);
        let fault = Fault::StreamStall {
            after_chunks: 1,
            stall,
        };
        let pace = Pace {
            interval: MS,
            keep_alive: Some(Duration::from_millis(500)),
        };
        let steps: Vec<Step> = played(plan(&frames(2), fault, pace)).collect();
        let comment = Step::Send(Bytes::from_static(SSE_KEEP_ALIVE.as_bytes()));
        let half = Duration::from_millis(500);
        assert_eq!(
            steps[..10],
            [
                Step::Send(frames(2)[0].clone()),
                Step::Wait(MS),
                Step::Wait(half),
                comment.clone(),
                Step::Wait(half),
                comment.clone(),
                Step::Wait(half),
                comment,
                Step::Wait(half),
                Step::Send(frames(2)[1].clone()),
            ]
        );
        let waited: Duration = steps[2..9]
            .iter()
            .map(|s| match s {
                Step::Wait(d) => *d,
                _ => Duration::ZERO,
            })
            .sum();
        assert_eq!(waited, stall);
    }

    #[test]
    fn a_stall_before_the_first_frame_is_a_stream_of_keep_alives_at_first() {
        let fault = Fault::StreamStall {
            after_chunks: 0,
            stall: Duration::from_millis(2_500),
        };
        let pace = Pace {
            interval: Duration::ZERO,
            keep_alive: Some(Duration::from_secs(1)),
        };
        let steps: Vec<Step> = played(plan(&frames(1), fault, pace)).collect();
        assert_eq!(
            sent(&steps),
            [SSE_KEEP_ALIVE, SSE_KEEP_ALIVE, "data: {\"i\":0}\n\n", SSE_DONE]
        );
        assert_eq!(steps[4], Step::Wait(Duration::from_millis(500)));
    }

    #[test]
    fn a_long_stall_with_a_short_interval_is_planned_as_one_step() {
        let fault = Fault::StreamStall {
            after_chunks: 0,
            stall: Duration::from_secs(3_600),
        };
        let pace = Pace {
            interval: Duration::ZERO,
            keep_alive: Some(Duration::from_micros(1)),
        };
        assert_eq!(plan(&frames(1), fault, pace).len(), 3);
        assert_eq!(stall_steps(Duration::from_secs(1), Some(MS)).count(), 999 * 2 + 1);
        // An interval that divides the stall exactly sends no comment at its very end.
        assert_eq!(
            stall_steps(Duration::from_secs(1), Some(Duration::from_secs(1))).count(),
            1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_played_cut_yields_its_frames_then_fails() {
        let response = stream(&frames(3), Fault::StreamCut { after_chunks: 2 }, paced(MS), ());
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let items: Vec<_> = response.into_body().into_data_stream().collect().await;
        assert_eq!(items.len(), 3);
        assert!(items[..2].iter().all(Result::is_ok));
        assert!(items[2].is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_played_stall_sends_its_keep_alives() {
        let fault = Fault::StreamStall {
            after_chunks: 1,
            stall: Duration::from_secs(3),
        };
        let pace = Pace {
            interval: Duration::ZERO,
            keep_alive: Some(Duration::from_secs(1)),
        };
        let body = stream(&frames(1), fault, pace, ()).into_body();
        let bytes = axum::body::to_bytes(body, 1 << 16).await.expect("a whole body");
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            format!("data: {{\"i\":0}}\n\n{SSE_KEEP_ALIVE}{SSE_KEEP_ALIVE}{SSE_DONE}")
        );
    }
}
