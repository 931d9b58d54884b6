//! A streamed answer's breaker permit lives as long as the stream (chaos upstreams in process, paused time):
//! the deployment's breaker counts a stream when it ends — a failure when the upstream cut or stalled it after
//! the first chunk, a success at `[DONE]`, nothing when the caller's side ended it — so a deployment whose
//! streams always die after their first chunk opens its breaker and the route moves to its fallback.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use ballast::{
    clock,
    model::{ChatStream, ModelClient, StreamError, StreamErrorKind},
};
use ballast_core::{BreakerSnapshot, BreakerState, CircuitBreaker};
use futures::StreamExt as _;
use support::chat::{Upstreams, call, client, config, first_turn, profile};
use tokio_util::sync::CancellationToken;

/// The primary's breaker: 3 failures in a row open it for exactly 30 s, one probe at a time closes it; its
/// window (rate trigger kept out of the way) outlasts every test, so its counts show every call counted.
const BREAKER: &str = r#"breaker = { consecutive_failures = 3, consecutive_spread = "0s", failure_rate = 1.0, min_calls = 100, window = "10m", open_for = "30s", open_jitter = 0.0, half_open_probes = 1 }
stream_idle_timeout = "1s""#;

const CUT_AFTER_FIRST: &str = "[endpoints.model]\nstream = { cut = 1.0, cut_after_chunks = 1 }";
const STALL_AFTER_FIRST: &str =
    "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 1, stall_for = \"60s\" }";

/// The `agent` route over `primary` (with `primary_profile`) and a clean `fallback`.
fn route(primary_profile: &str) -> (ModelClient, Upstreams) {
    let upstreams = Upstreams::new(&[("primary", profile(primary_profile)), ("fallback", profile(""))]);
    (client(&config(BREAKER), &upstreams), upstreams)
}

fn primary(route: &ModelClient) -> &Arc<CircuitBreaker> {
    route.breaker(0).expect("the primary's breaker")
}

fn snapshot(route: &ModelClient) -> BreakerSnapshot {
    primary(route).snapshot(clock::now())
}

/// Reads the stream to its end: how many chunks, and the error it ended with, if any.
async fn drain(mut stream: ChatStream) -> (usize, Option<StreamError>) {
    let mut chunks = 0;
    while let Some(item) = stream.next().await {
        match item {
            Ok(_) => chunks += 1,
            Err(error) => return (chunks, Some(error)),
        }
    }
    (chunks, None)
}

/// The brief's scenario, for each way a stream dies after its first chunk: `consecutive_failures` such streams
/// open the primary's breaker (counted one by one, at each stream's end), and the next call streams from the
/// fallback without touching the primary.
#[tokio::test(start_paused = true)]
async fn streams_that_die_after_their_first_chunk_open_the_breaker() {
    for (fault, kind) in [
        (CUT_AFTER_FIRST, StreamErrorKind::Cut),
        (STALL_AFTER_FIRST, StreamErrorKind::Idle(Duration::from_secs(1))),
    ] {
        let (route, upstreams) = route(fault);
        for n in 1..=3u32 {
            let stream = route.stream(call(&first_turn("op-b1"))).await.expect("committed");
            assert_eq!(stream.deployment(), "agent[0] mock");
            assert_eq!(
                snapshot(&route).consecutive_failures,
                n - 1,
                "not counted at the commit"
            );
            let (chunks, error) = drain(stream).await;
            let error = error.expect("the stream dies");
            assert_eq!((chunks, &error.kind), (1, &kind));
            let expected = if n < 3 {
                BreakerState::Closed
            } else {
                BreakerState::Open
            };
            assert_eq!(
                error.report.breaker,
                Some(expected),
                "the report says the state after it"
            );
            if n < 3 {
                assert_eq!(snapshot(&route).consecutive_failures, n, "{kind:?}");
            }
        }
        assert_eq!(snapshot(&route).state, BreakerState::Open, "{kind:?}");

        let stream = route
            .stream(call(&first_turn("op-b2")))
            .await
            .expect("the fallback commits");
        assert_eq!(stream.deployment(), "agent[1] gpt-4.1");
        let (_, error) = drain(stream).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(upstreams.count("primary"), 3, "the open primary is not touched");
        assert_eq!(upstreams.count("fallback"), 1);
    }
}

/// Clean streams are successes, counted at `[DONE]` (not at the commit), and keep the breaker closed.
#[tokio::test(start_paused = true)]
async fn clean_streams_count_as_successes_at_done() {
    let (route, upstreams) = route("");
    for n in 1..=5u64 {
        let mut stream = route.stream(call(&first_turn("op-b3"))).await.expect("committed");
        assert!(stream.next().await.expect("a chunk").is_ok());
        assert_eq!(snapshot(&route).window_calls, n - 1, "not counted before its end");
        let (_, error) = drain(stream).await;
        assert!(error.is_none(), "{error:?}");
        let s = snapshot(&route);
        assert_eq!(
            (s.state, s.window_calls, s.window_failures),
            (BreakerState::Closed, n, 0)
        );
    }
    assert_eq!(upstreams.count("fallback"), 0);
}

/// A success at `[DONE]` resets the failures in a row: two dead streams, a clean one, two dead ones stay
/// under the threshold of three.
#[tokio::test(start_paused = true)]
async fn a_clean_stream_resets_the_failures_in_a_row() {
    // Every stream of the primary is cut after its first chunk, but op-clean's, which its script answers normally.
    let script =
        format!("{CUT_AFTER_FIRST}\n[[scripts]]\nendpoint = \"model\"\nop = \"op-clean\"\nsteps = [\"ok\"]");
    let (route, _) = route(&script);
    for op in ["op-b4", "op-b4", "op-clean", "op-b4", "op-b4"] {
        let stream = route.stream(call(&first_turn(op))).await.expect("committed");
        let (_, error) = drain(stream).await;
        assert_eq!(error.is_none(), op == "op-clean", "{op}: {error:?}");
    }
    let s = snapshot(&route);
    assert_eq!(
        (s.state, s.consecutive_failures, s.window_calls),
        (BreakerState::Closed, 2, 5)
    );
}

/// The caller's side ending a stream says nothing about the upstream: a dropped stream, a cancelled one and
/// one stopped by the call's own deadline count nothing.
#[tokio::test(start_paused = true)]
async fn a_dropped_cancelled_or_timed_out_stream_counts_nothing() {
    // The stall is longer than the deadline (10 s) and the idle timeout is longer than both.
    let stall = "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 1, stall_for = \"60s\" }";
    let upstreams = Upstreams::new(&[("primary", profile(stall)), ("fallback", profile(""))]);
    let route = client(
        &config(&BREAKER.replace("stream_idle_timeout = \"1s\"", "stream_idle_timeout = \"30s\"")),
        &upstreams,
    );

    let counted = |route: &ModelClient| {
        let s = snapshot(route);
        (s.state, s.window_calls, s.consecutive_failures)
    };
    let nothing = (BreakerState::Closed, 0, 0);

    let mut dropped = route.stream(call(&first_turn("op-b5"))).await.expect("committed");
    assert!(dropped.next().await.expect("a chunk").is_ok());
    drop(dropped);
    assert_eq!(counted(&route), nothing, "dropped");

    let token = CancellationToken::new();
    let mut cancelled = route
        .stream(call(&first_turn("op-b6")).cancel_token(token.clone()))
        .await
        .expect("committed");
    assert!(cancelled.next().await.expect("a chunk").is_ok());
    token.cancel();
    let (_, error) = drain(cancelled).await;
    assert_eq!(error.expect("cancelled").kind, StreamErrorKind::Cancelled);
    assert_eq!(counted(&route), nothing, "cancelled");

    let timed_out = route.stream(call(&first_turn("op-b7"))).await.expect("committed");
    let (_, error) = drain(timed_out).await;
    assert_eq!(error.expect("the deadline").kind, StreamErrorKind::Deadline);

    assert_eq!(counted(&route), nothing, "stopped by the deadline");
    assert_eq!(upstreams.count("primary"), 3);
}

/// A half-open probe that is a stream holds its slot until the stream ends: meanwhile the next call goes to
/// the fallback; a probe stream dropped before its end frees the slot and counts nothing; one that ends with
/// `[DONE]` closes the breaker.
#[tokio::test(start_paused = true)]
async fn a_half_open_probe_stream_holds_its_slot_until_it_ends() {
    let (route, upstreams) = route("");
    primary(&route).force_open(clock::now());
    tokio::time::advance(Duration::from_secs(30)).await;

    let mut probe = route
        .stream(call(&first_turn("op-b8")))
        .await
        .expect("the probe commits");
    assert_eq!(probe.deployment(), "agent[0] mock");
    assert!(probe.next().await.expect("a chunk").is_ok());
    let s = snapshot(&route);
    assert_eq!((s.state, s.probes_in_flight), (BreakerState::HalfOpen, 1));

    let meanwhile = route.stream(call(&first_turn("op-b9"))).await.expect("committed");
    assert_eq!(
        meanwhile.deployment(),
        "agent[1] gpt-4.1",
        "the only probe slot is taken"
    );
    drain(meanwhile).await;
    assert_eq!(upstreams.count("primary"), 1);

    drop(probe);
    let s = snapshot(&route);
    assert_eq!(
        (s.state, s.probes_in_flight, s.probe_successes),
        (BreakerState::HalfOpen, 0, 0),
        "a dropped probe frees its slot and counts nothing"
    );

    let probe = route
        .stream(call(&first_turn("op-b10")))
        .await
        .expect("the probe commits");
    assert_eq!(probe.deployment(), "agent[0] mock");
    assert_eq!(snapshot(&route).probes_in_flight, 1);
    let (_, error) = drain(probe).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(
        snapshot(&route).state,
        BreakerState::Closed,
        "the probe's [DONE] closes it"
    );
}
