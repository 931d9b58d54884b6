//! Crowds and dead upstreams through a `ModelClient` on its defaults, against chaos upstreams in process (paused
//! time): every dead-upstream variant is failed fast; a burst with scattered failures opens nothing and throttles
//! nothing; a throttled primary falls back; a full deployment sheds by class; a spent quota is passed over.

use crate::support;

use std::time::Duration;

use ballast::{Overload, clock, model::ModelClient};
use ballast_core::{BreakerState, Deadline, ErrorCode, Priority};
use ballast_testkit::{ConfigText, deployment};
use futures::future::join_all;
use support::chat::{Upstreams, call, client, config, first_turn, profile};

/// One call every 50 ms for 6 s against `primary` alone, dead from the start as `outage` says: from when on at
/// least 90% of the calls fail fast (nothing sent, ended in under 10 ms; the rest are the breaker's probes and
/// the throttle's few admitted attempts), and how many requests reached it.
async fn dead_upstream(outage: &str) -> (Option<Duration>, usize) {
    let upstreams = Upstreams::new(&[(
        "primary",
        profile(&format!(
            "[endpoints.model]\noutages = [ {{ start = \"0s\", end = \"600s\", answer = \"{outage}\" }} ]"
        )),
    )]);
    let route = single(&upstreams, "per_try_timeout = \"1s\"");
    let started = clock::now();
    let mut tasks = Vec::new();
    for i in 0..120_u64 {
        let route = route.clone();
        tasks.push(tokio::spawn(async move {
            let begun = clock::now();
            let result = route.complete(call(&first_turn(&format!("op-{i}")))).await;
            let took = clock::now().saturating_duration_since(begun);
            let fast = result.as_ref().err().is_some_and(|e| {
                e.report().attempts.iter().all(|a| !a.sent) && took < Duration::from_millis(10)
            });
            assert!(result.is_err(), "a dead upstream answered");
            (begun, fast)
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let results: Vec<_> = join_all(tasks).await.into_iter().map(Result::unwrap).collect();
    let since = (0..results.len()).find(|&i| {
        let later = &results[i..];
        later.iter().filter(|(_, fast)| *fast).count() * 10 >= later.len() * 9
    });
    let since = since.map(|i| results[i].0.saturating_duration_since(started));
    (since, upstreams.count("primary"))
}

/// The `agent` route over `primary` only, with `extra` route keys and every default else.
fn single(upstreams: &Upstreams, extra: &str) -> ModelClient {
    let config = ConfigText::new()
        .server("default_timeout = \"10s\"")
        .model("agent", &[deployment("http://primary/v1", "mock")], extra)
        .build();
    let config = ballast_config::Config::from_toml_str(&config).unwrap();
    client(&config, upstreams)
}

/// 503 without `Retry-After`: the breaker (ten failures in a row, in start order) fails calls fast within a
/// second.
#[tokio::test(start_paused = true)]
async fn a_dead_upstream_answering_503_is_failed_fast_within_a_second() {
    let (since, sent) = dead_upstream("no_retry_after").await;
    let since = since.expect("calls fail fast");
    assert!(since <= Duration::from_secs(1), "from {since:?}");
    assert!(sent < 120, "{sent} requests for 120 calls");
}

/// 503 with `Retry-After` (a maintenance page): not a health signal for the breaker — the throttle refuses
/// locally once the upstream accepted nothing for most of a window (2 s) and the calls waiting on the `Retry-After` come
/// back refused.
#[tokio::test(start_paused = true)]
async fn an_upstream_refusing_everything_with_retry_after_is_throttled() {
    let (since, sent) = dead_upstream("retry_after").await;
    let since = since.expect("calls fail fast");
    assert!(since <= Duration::from_secs(3), "from {since:?}");
    assert!(sent < 120, "{sent} requests for 120 calls");
}

/// Hangs: every attempt times out at its 1 s per-try timeout; the calls fail fast from about a second after
/// the first timeouts.
#[tokio::test(start_paused = true)]
async fn a_hanging_upstream_is_failed_fast_a_second_after_its_first_timeouts() {
    let (since, _) = dead_upstream("hang").await;
    let since = since.expect("calls fail fast");
    assert!(since <= Duration::from_secs(2), "from {since:?}");
}

/// A crowd of callers whose own deadlines (1 s) are shorter than a healthy model's answers (4 s, under its 10 s
/// per-try timeout): each of them gets `deadline_exceeded`, and none of it is held against the model — its breaker
/// stays closed, its throttle counts nothing — so the next caller, with the route's 10 s, is served. The same
/// crowd cut by the deployment's own per-try timeout (3 s) is held against it: the upstream was judged too slow,
/// and its breaker or its throttle (whichever judges first) turns callers away.
#[tokio::test(start_paused = true)]
async fn callers_in_a_hurry_never_open_a_slow_healthy_models_breaker() {
    let slow = "[endpoints.model]\nlatency = { p50 = \"4s\", p99 = \"4s\" }";
    for (per_try, opens) in [("10s", false), ("3s", true)] {
        let upstreams = Upstreams::new(&[("primary", profile(slow))]);
        let route = single(&upstreams, &format!("per_try_timeout = \"{per_try}\""));
        let hurried = |i: usize| {
            let route = route.clone();
            async move {
                let deadline = Deadline::after(clock::now(), Duration::from_secs(if opens { 5 } else { 1 }));
                route
                    .complete(call(&first_turn(&format!("hurry-{i}"))).deadline(deadline))
                    .await
            }
        };
        // Thirty at once, then ten more one after another: well past the breaker's ten failures in a row.
        let mut results = join_all((0..30).map(hurried)).await;
        for i in 30..40 {
            results.push(hurried(i).await);
        }
        let breaker = route.breaker(0).unwrap().snapshot(clock::now());
        let throttle = route.throttle(0).unwrap().snapshot(clock::now());
        if opens {
            // Held against the model: its breaker opened, or its throttle refused first (both judge timeouts).
            assert!(
                breaker.state == BreakerState::Open || throttle.refused_total > 0,
                "{per_try}: the deployment's own timeout: {breaker:?} {throttle:?}"
            );
            continue;
        }
        for result in &results {
            let error = result.as_ref().expect_err("a 1 s deadline cannot wait 4 s");
            assert_eq!(error.code(), ErrorCode::DeadlineExceeded, "{error}");
        }
        assert_eq!((breaker.state, breaker.transitions), (BreakerState::Closed, 0));
        assert_eq!(
            (throttle.requests, throttle.refused_total),
            (0, 0),
            "{throttle:?}"
        );
        let answer = route.complete(call(&first_turn("patient"))).await;
        assert!(answer.is_ok(), "the next caller with time to spare: {answer:?}");
    }
}

/// A hanging primary with a fallback, on the defaults (10 s deadline, 20 s per-try timeout): the primary's
/// attempts end at its share of the deadline (60 %: 6 s), which is the route's own limit on it, as its per-try
/// timeout is, not a caller in a hurry — so they count against it: its breaker opens, and the calls after it go
/// to the fallback at once instead of waiting 6 s each.
#[tokio::test(start_paused = true)]
async fn a_hanging_primary_cut_by_its_share_of_the_deadline_opens_its_breaker() {
    let hang =
        profile("[endpoints.model]\noutages = [ { start = \"0s\", end = \"600s\", answer = \"hang\" } ]");
    let upstreams = Upstreams::new(&[("primary", hang), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let started = clock::now();
    let mut tasks = Vec::new();
    for i in 0..150_u64 {
        let route = route.clone();
        tasks.push(tokio::spawn(async move {
            let begun = clock::now();
            let answer = route.complete(call(&first_turn(&format!("op-{i}")))).await;
            (begun, clock::now().saturating_duration_since(begun), answer)
        }));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (mut late, mut fast) = (0, 0);
    for (begun, took, answer) in join_all(tasks).await.into_iter().map(Result::unwrap) {
        let answer = answer.expect("the fallback answers");
        assert_eq!(answer.deployment, "agent[1] gpt-4.1");
        if begun.saturating_duration_since(started) >= Duration::from_secs(8) {
            late += 1;
            fast += usize::from(took < Duration::from_secs(1));
        }
    }
    // The rest are the half-open breaker's probes, each waiting the share out again.
    assert!(
        fast * 10 >= late * 9,
        "{fast} of {late} calls from 8 s on passed the primary at once"
    );
    let breaker = route.breaker(0).unwrap().snapshot(clock::now());
    assert!(breaker.transitions > 0, "{breaker:?}");
}

/// 200 calls at once against a model failing 20% of its attempts at random (15% answered 500 at once, 5%
/// refused for load, 429 with `Retry-After`, while successes take 50-400 ms), through the default admission (64
/// at once, the rest queued): no default breaker opens, no attempt is throttled, and nearly every call succeeds
/// within its attempts.
#[tokio::test(start_paused = true)]
async fn a_burst_with_scattered_failures_opens_nothing_and_throttles_nothing() {
    let upstreams = Upstreams::new(&[(
        "primary",
        profile(
            "[endpoints.model]\nlatency = { p50 = \"100ms\", p99 = \"400ms\" }\n\
             errors = { 500 = 0.15, 429 = 0.05 }\nretry_after = \"1s\"",
        ),
    )]);
    let route = single(&upstreams, "retry = { max_attempts = 4 }");
    let calls = (0..200).map(|i| {
        let route = route.clone();
        async move { route.complete(call(&first_turn(&format!("burst-{i}")))).await }
    });
    let results = join_all(calls).await;
    let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.len() <= 2, "{} failed: {:?}", failed.len(), failed.first());
    let breaker = route.breaker(0).unwrap();
    let snapshot = breaker.snapshot(clock::now());
    assert_eq!((snapshot.state, snapshot.transitions), (BreakerState::Closed, 0));
    assert_eq!(route.throttle(0).unwrap().snapshot(clock::now()).refused_total, 0);
}

/// A primary that refuses every request for load: its throttle refuses locally after a window, and the calls go
/// straight to the fallback without sending the primary anything.
#[tokio::test(start_paused = true)]
async fn a_throttled_primary_falls_back() {
    let upstreams = Upstreams::new(&[
        (
            "primary",
            profile("[endpoints.model]\nerrors = { 429 = 1.0 }\nretry_after = \"1s\""),
        ),
        ("fallback", profile("")),
    ]);
    let route = client(&config("retry = { max_attempts = 1 }"), &upstreams);
    for i in 0..40 {
        let answer = route
            .complete(call(&first_turn(&format!("op-{i}"))))
            .await
            .expect("the fallback answers");
        assert_eq!(answer.deployment, "agent[1] gpt-4.1");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = upstreams.count("primary");
    let mut refused_here = 0;
    for i in 40..60 {
        let answer = route
            .complete(call(&first_turn(&format!("op-{i}"))))
            .await
            .unwrap();
        assert_eq!(answer.deployment, "agent[1] gpt-4.1");
        let primary = &answer.report;
        if primary.attempts.iter().all(|a| !a.sent) {
            refused_here += 1;
            assert_eq!(primary.code, Some(ErrorCode::Overloaded), "{primary}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused_here >= 15, "{refused_here} of 20 refused before sending");
    assert!(upstreams.count("primary") - before <= 5);
    assert!(route.throttle(0).unwrap().snapshot(clock::now()).refused_total >= 15);
    assert_eq!(
        route.breaker(0).unwrap().state(clock::now()),
        BreakerState::Closed,
        "overload is the throttle's, not the breaker's"
    );
}

/// A retry the throttle refuses ends the call with the upstream's last real answer (its 429), not with a
/// refusal of Ballast's own: the caller sees what the upstream said.
#[tokio::test(start_paused = true)]
async fn a_throttled_retry_ends_with_the_last_real_answer() {
    let upstreams = Upstreams::new(&[(
        "primary",
        // Retries 300 ms later: within the throttle's 1 s window of the first attempts' refusals.
        profile("[endpoints.model]\nerrors = { 429 = 1.0 }\nretry_after = { millis = \"300ms\" }"),
    )]);
    let route = single(&upstreams, "retry = { max_attempts = 4 }");
    // Twenty at once: their first attempts fill the throttle's window with refusals (a trickle would not: under
    // `min_requests` nothing is refused).
    let calls = (0..20).map(|i| {
        let route = route.clone();
        async move { route.complete(call(&first_turn(&format!("op-{i}")))).await }
    });
    let mut throttled_retries = 0;
    for result in join_all(calls).await {
        match result {
            Err(ballast::model::ChatError::Upstream { status, report, .. })
                if report.stop == Some(ballast_core::StopReason::Throttled) =>
            {
                assert_eq!(status, 429);
                assert!(
                    report.to_string().contains(Overload::Throttled.as_str()),
                    "{report}"
                );
                throttled_retries += 1;
            }
            Err(_) => {}
            Ok(answer) => panic!("a 429 on every attempt answered: {answer:?}"),
        }
    }
    // (The others end on the retry budget, which refuses retries against an upstream refusing everything too.)
    assert!(throttled_retries >= 5, "{throttled_retries}");
}

/// One slot and one place in the queue per deployment: a critical call waits, and a sheddable one already
/// waiting is evicted to make room for it.
#[tokio::test(start_paused = true)]
async fn a_full_deployment_sheds_by_class() {
    let upstreams = Upstreams::new(&[(
        "primary",
        profile("[endpoints.model]\nlatency = { p50 = \"1s\", p99 = \"1s\" }"),
    )]);
    let route = single(&upstreams, "concurrency = 1\nqueue = 1");
    let first = tokio::spawn({
        let route = route.clone();
        async move { route.complete(call(&first_turn("a"))).await }
    });
    tokio::task::yield_now().await;
    let sheddable = tokio::spawn({
        let route = route.clone();
        async move {
            route
                .complete(call(&first_turn("b")).priority(Priority::Sheddable))
                .await
        }
    });
    tokio::task::yield_now().await;
    let critical = tokio::spawn({
        let route = route.clone();
        async move { route.complete(call(&first_turn("c"))).await }
    });
    let shed = sheddable.await.unwrap().expect_err("evicted");
    assert_eq!(shed.code(), ErrorCode::Overloaded);
    assert!(shed.to_string().contains("evicted"), "{shed}");
    assert!(first.await.unwrap().is_ok());
    assert!(
        critical.await.unwrap().is_ok(),
        "the critical call waited and was served"
    );
    assert_eq!(upstreams.count("primary"), 2);
}

/// A deployment that answered `insufficient_quota` (the chaos upstream, like OpenAI, gives no `Retry-After` with
/// it) is passed over by the next calls for 60 s, then asked again.
#[tokio::test(start_paused = true)]
async fn a_spent_quota_is_passed_over_for_a_minute() {
    let quota = "[endpoints.model]\ninsufficient_quota = 1.0";
    let upstreams = Upstreams::new(&[("primary", profile(quota)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    for i in 0..5 {
        route
            .complete(call(&first_turn(&format!("q-{i}"))))
            .await
            .unwrap();
    }
    assert_eq!(upstreams.count("primary"), 1, "asked once, then passed over");
    assert_eq!(upstreams.count("fallback"), 5);
    tokio::time::sleep(Duration::from_secs(59)).await;
    let answer = route.complete(call(&first_turn("q-5"))).await.unwrap();
    assert!(
        answer
            .report
            .to_string()
            .contains("passed over: this deployment answered insufficient_quota"),
        "{}",
        answer.report
    );
    assert_eq!(upstreams.count("primary"), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    route.complete(call(&first_turn("q-6"))).await.unwrap();
    assert_eq!(upstreams.count("primary"), 2, "asked again after a minute");
}

/// A stream occupies its deployment until it ends: with one slot, a second call waits for the first call's
/// stream to be read to its end (or dropped), not only for its first chunk.
#[tokio::test(start_paused = true)]
async fn a_stream_holds_its_deployments_slot_until_it_ends() {
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let route = single(&upstreams, "concurrency = 1\nqueue = 4");
    let stream = route.stream(call(&first_turn("s-1"))).await.expect("committed");
    let second = tokio::spawn({
        let route = route.clone();
        async move { route.complete(call(&first_turn("s-2"))).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!second.is_finished(), "the open stream still holds the only slot");
    assert_eq!(upstreams.count("primary"), 1);
    drop(stream);
    let answer = second.await.unwrap().expect("served once the stream ended");
    assert_eq!(answer.deployment, "agent[0] mock");
}
