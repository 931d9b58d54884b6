//! ModelClient fallbacks under one deadline, against chaos upstreams in process (paused time): a hanging primary
//! (its share of the deadline), an open breaker, `insufficient_quota` and a `Retry-After` that is waited for.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use ballast::{Runs, clock, model::ChatError, report::AttemptResult};
use ballast_core::{BreakerState, Deadline, ErrorCode};
use support::chat::{PRIMARY_KEY, Upstreams, call, client, client_with_runs, config, first_turn, profile};

const HANG: &str = "[endpoints.model]\nhang = 1.0";

/// Issue 6, test 1: every primary attempt hangs; the fallback answers at the primary's share of the deadline,
/// and the primary's attempts were told (and cut at) what the share left them, not the whole call's time.
#[tokio::test(start_paused = true)]
async fn a_hanging_primary_leaves_the_fallback_its_share_of_the_deadline() {
    let upstreams = Upstreams::new(&[("primary", profile(HANG)), ("fallback", profile(""))]);
    // 10 s deadline, primary_share 0.6: the primary may use 6 s (less the 50 ms reserve), in tries of 4 s.
    let route = client(
        &config("per_try_timeout = \"4s\"\nprimary_share = 0.6"),
        &upstreams,
    );
    let started = clock::now();
    let answer = route
        .complete(call(&first_turn("op-1")))
        .await
        .expect("the fallback answers");
    let took = clock::now().saturating_duration_since(started);

    assert_eq!(
        took,
        Duration::from_millis(5_950),
        "the fallback started when the primary's share (less the reserve) was spent, and answered at once"
    );
    assert_eq!(answer.deployment, "agent[1] gpt-4.1");
    assert_eq!(answer.response.choices.len(), 1);
    let primary = &answer.report;
    assert_eq!(primary.target, "agent[0] mock");
    assert_eq!(primary.code, Some(ErrorCode::DeadlineExceeded));
    assert!(
        primary.attempts.len() >= 2,
        "a first try of 4 s, then a retry cut at the share: {primary}"
    );
    assert_eq!(primary.attempts[0].result, AttemptResult::Error("timeout".into()));
    assert_eq!(primary.attempts[0].duration, Duration::from_secs(4));
    let cut = primary.attempts.last().expect("an attempt");
    assert!(
        matches!(&cut.result, AttemptResult::Error(_)) && cut.sent,
        "cut at the share: {primary}"
    );
    // Each primary attempt was told its own timeout: the first its 4 s per try, the last what the share left.
    let told: Vec<u128> = upstreams
        .seen()
        .iter()
        .filter(|s| s.host == "primary")
        .map(|s| s.headers["ballast-timeout-ms"].to_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(told.len(), primary.attempts.len());
    assert_eq!(told[0], 4_000);
    let last = *told.last().expect("sent");
    assert!(last < 2_000, "the share's remainder, not the call's: {told:?}");
    assert_eq!(
        last,
        cut.duration.as_millis(),
        "the last attempt ran exactly the time it was told: {primary}"
    );
    let fallback = primary.fallback_report.as_deref().expect("the fallback's report");
    assert_eq!(primary.fallback.as_deref(), Some("agent[1] gpt-4.1"));
    assert_eq!(fallback.attempts.len(), 1);
    assert_eq!(fallback.attempts[0].result, AttemptResult::Status(200));
    assert_eq!(fallback.code, None);
    assert!(answer.report.answered_by_fallback());
    // The fallback's attempt was told what was left of the one deadline, minus the reserve.
    let to_fallback = upstreams
        .seen()
        .into_iter()
        .find(|s| s.host == "fallback")
        .expect("sent");
    assert_eq!(to_fallback.headers["ballast-timeout-ms"], "4000");
}

/// The primary's share bounds the primary's trip only: the run the call belongs to keeps the call's whole
/// deadline for its later calls.
#[tokio::test(start_paused = true)]
async fn the_primarys_share_is_not_the_runs_deadline() {
    let upstreams = Upstreams::new(&[("primary", profile(HANG)), ("fallback", profile(""))]);
    let config = config("per_try_timeout = \"4s\"\nprimary_share = 0.6");
    let runs = Arc::new(Runs::new(config.run.retry_allowance, config.run.ttl));
    let route = client_with_runs(&config, &upstreams, Arc::clone(&runs));
    let deadline = Deadline::after(clock::now(), Duration::from_secs(10));
    route
        .complete(call(&first_turn("op-1")).run("run-1").deadline(deadline))
        .await
        .expect("the fallback answers");
    let kept = runs
        .get("run-1", clock::now())
        .deadline()
        .expect("the run's deadline");
    assert_eq!(
        kept.instant(),
        deadline.instant(),
        "the call's 10 s, not the share's 6 s"
    );
}

/// With one deployment there is no share: the primary may use the whole deadline.
#[tokio::test(start_paused = true)]
async fn a_single_deployment_uses_the_whole_deadline() {
    let upstreams = Upstreams::new(&[("primary", profile(HANG))]);
    let config = ballast_config::Config::from_toml_str(&format!(
        "version = 1\n[server]\ndefault_timeout = \"10s\"\n[[models]]\nname = \"agent\"\nper_try_timeout = \"20s\"\n\
         deployments = [ {{ base_url = \"http://primary/v1\", api_key_env = \"{}\" }} ]",
        PRIMARY_KEY.0
    ))
    .unwrap();
    let route = client(&config, &upstreams);
    let started = clock::now();
    let error = route.complete(call(&first_turn("op-1"))).await.unwrap_err();
    // One try of what the deadline held (10 s less the 50 ms reserve), nothing cut it short.
    assert_eq!(
        clock::now().saturating_duration_since(started),
        Duration::from_millis(9_950)
    );
    assert_eq!(error.code(), ErrorCode::DeadlineExceeded, "{error}");
}

/// Issue 6, test 2: the primary's breaker is open; the fallback answers and the primary is never sent to.
#[tokio::test(start_paused = true)]
async fn an_open_breaker_goes_to_the_fallback_without_touching_the_primary() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let breaker = route.breaker(0).expect("the primary's breaker");
    breaker.force_open(clock::now());
    assert_eq!(breaker.state(clock::now()), BreakerState::Open);

    let answer = route
        .complete(call(&first_turn("op-2")))
        .await
        .expect("the fallback answers");
    assert_eq!(answer.deployment, "agent[1] gpt-4.1");
    assert_eq!(upstreams.count("primary"), 0);
    assert_eq!(upstreams.count("fallback"), 1);
    let primary = &answer.report;
    assert_eq!(primary.code, Some(ErrorCode::CircuitOpen));
    assert!(primary.attempts.iter().all(|a| !a.sent), "{primary}");
    // Worded for a model deployment, not a tool.
    let text = primary.to_string();
    assert!(
        text.starts_with("agent[0] mock: answered by fallback agent[1] gpt-4.1 (failed here: circuit_open)"),
        "{text}"
    );
    assert!(!text.contains("tool"), "{text}");
}

/// Issue 6, test 3a: a 429 `insufficient_quota` goes to the fallback at once, never waited for nor retried.
#[tokio::test(start_paused = true)]
async fn insufficient_quota_moves_to_the_fallback_at_once() {
    let quota = "[endpoints.model]\ninsufficient_quota = 1.0\nretry_after = \"5s\"";
    let upstreams = Upstreams::new(&[("primary", profile(quota)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let started = clock::now();
    let answer = route
        .complete(call(&first_turn("op-3")))
        .await
        .expect("the fallback answers");
    assert_eq!(
        clock::now().saturating_duration_since(started),
        Duration::ZERO,
        "no wait"
    );
    assert_eq!(upstreams.count("primary"), 1, "not retried");
    assert_eq!(answer.deployment, "agent[1] gpt-4.1");
    assert_eq!(answer.report.attempts[0].result, AttemptResult::Status(429));
    // The primary was sent its key; the fallback, which has none configured, none.
    let seen = upstreams.seen();
    assert_eq!(
        seen[0].headers["authorization"],
        format!("Bearer {}", PRIMARY_KEY.1)
    );
    assert!(!seen[1].headers.contains_key("authorization"));
    assert_eq!(seen[0].body["model"], "mock");
    assert_eq!(seen[1].body["model"], "gpt-4.1");
}

/// Issue 6, test 3b: a 429 with `Retry-After: 1` (a rate limit) is waited for on the same deployment.
#[tokio::test(start_paused = true)]
async fn a_short_retry_after_is_waited_for_on_the_same_deployment() {
    let limited = "[endpoints.model]\nretry_after = \"1s\"\n[[scripts]]\nendpoint = \"model\"\nop = \"op-4\"\n\
                   steps = [\"429\", \"ok\"]";
    let upstreams = Upstreams::new(&[("primary", profile(limited)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let started = clock::now();
    let answer = route
        .complete(call(&first_turn("op-4")))
        .await
        .expect("the primary answers");
    let took = clock::now().saturating_duration_since(started);
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(answer.deployment, "agent[0] mock");
    assert_eq!(upstreams.count("primary"), 2);
    assert_eq!(upstreams.count("fallback"), 0);
    let results: Vec<_> = answer.report.attempts.iter().map(|a| a.result.clone()).collect();
    assert_eq!(results, [AttemptResult::Status(429), AttemptResult::Status(200)]);
}

/// A `Retry-After` longer than `max_retry_after` moves on at once.
#[tokio::test(start_paused = true)]
async fn a_retry_after_too_long_moves_to_the_fallback() {
    let limited = "[endpoints.model]\nerrors = { 503 = 1.0 }\nretry_after = \"120s\"";
    let upstreams = Upstreams::new(&[("primary", profile(limited)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let started = clock::now();
    let answer = route
        .complete(call(&first_turn("op-5")))
        .await
        .expect("the fallback answers");
    assert_eq!(clock::now().saturating_duration_since(started), Duration::ZERO);
    assert_eq!(answer.deployment, "agent[1] gpt-4.1");
    assert_eq!(upstreams.count("primary"), 1);
}

/// A `Retry-After` the call's deadline could wait out but the primary's share cannot is not waited for: the
/// fallback is asked at once, not after a wait cut short at the share.
#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_primarys_share_moves_to_the_fallback_at_once() {
    let limited = "[endpoints.model]\nerrors = { 503 = 1.0 }\nretry_after = \"7s\"";
    let upstreams = Upstreams::new(&[("primary", profile(limited)), ("fallback", profile(""))]);
    // 10 s deadline, the primary's share 6 s: a 7 s wait fits the call, not the share.
    let route = client(&config("primary_share = 0.6"), &upstreams);
    let started = clock::now();
    let answer = route
        .complete(call(&first_turn("op-7")))
        .await
        .expect("the fallback answers");
    assert_eq!(clock::now().saturating_duration_since(started), Duration::ZERO);
    assert_eq!(answer.deployment, "agent[1] gpt-4.1");
    assert_eq!(upstreams.count("primary"), 1);
    assert_eq!(
        upstreams.seen()[1].headers["ballast-timeout-ms"],
        "9950",
        "the fallback has the whole call's time"
    );
}

/// A 400 the next deployment would answer too is the caller's answer: no fallback.
#[tokio::test(start_paused = true)]
async fn a_bad_request_is_answered_without_a_fallback() {
    let bad = "[endpoints.model]\nerrors = { 400 = 1.0 }";
    let upstreams = Upstreams::new(&[("primary", profile(bad)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let error = route.complete(call(&first_turn("op-6"))).await.unwrap_err();
    let ChatError::Upstream {
        status, body, report, ..
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(*status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(report.fallback.is_none());
    assert_eq!(upstreams.count("fallback"), 0);
    assert_eq!(error.code(), ErrorCode::UpstreamError);
}

/// The deployment's API key goes upstream in `authorization` and nowhere else: not in the client's debug output,
/// the error, nor the report (which the gateway logs and exports).
#[tokio::test(start_paused = true)]
async fn the_api_key_appears_in_no_debug_output_error_or_report() {
    let hang = "[endpoints.model]\nreset = 1.0";
    let upstreams = Upstreams::new(&[("primary", profile(hang)), ("fallback", profile(hang))]);
    let route = client(&config(""), &upstreams);
    let error = route.complete(call(&first_turn("op-8"))).await.unwrap_err();
    let report = error.report();
    let json = serde_json::to_string(report).unwrap();
    let key = PRIMARY_KEY.1;
    for text in [
        format!("{route:?}"),
        format!("{error}"),
        format!("{error:?}"),
        report.to_string(),
        json,
    ] {
        assert!(!text.contains(key), "{text}");
    }
    assert_eq!(
        upstreams.seen()[0].headers["authorization"],
        format!("Bearer {key}")
    );
}
