//! Streamed Responses through a model route, against chaos upstreams in process (paused time): the commit point
//! (`response.created` and `response.in_progress` held back), an error event after it, a cut after the first
//! output event, and keep-alives.

use crate::support;

use std::time::Duration;

use ballast::CallError;
use ballast::model::{ResponseEvent, StreamErrorKind};
use ballast::report::AttemptResult;
use futures::StreamExt as _;
use support::chat::{Upstreams, client, config, first_response_turn, profile, respond_call};

/// Issue 17: a quota error sent as an event after `response.created` falls back before anything reaches the
/// caller, and the deployment is then passed over for the wait it asked (60 s without one).
#[tokio::test(start_paused = true)]
async fn a_quota_error_after_response_created_falls_back_unseen() {
    let quota = r#"
[endpoints.model]
stream = { error_delivery = "events" }
[[scripts]]
endpoint = "model"
op = "op-1"
steps = ["insufficient_quota"]
"#;
    let upstreams = Upstreams::new(&[("primary", profile(quota)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .respond_stream(respond_call(&first_response_turn("op-1")))
        .await
        .expect("the fallback answers");
    assert_eq!(stream.deployment(), "agent[1] gpt-4.1");
    let report = stream.report();
    assert_eq!(report.target, "agent[0] mock");
    assert_eq!(report.attempts.len(), 1, "quota is not retried: {report}");
    let events: Vec<ResponseEvent> = stream
        .map(|e| e.expect("no error reaches the caller"))
        .collect()
        .await;
    let kinds: Vec<&str> = events.iter().map(ResponseEvent::kind).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "response.created").count(),
        1,
        "{kinds:?}"
    );
    assert!(
        !kinds.contains(&"error") && !kinds.contains(&"response.failed"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last(), Some(&"response.completed"));

    // The primary said its quota is spent: the next calls go to the fallback first, for a minute.
    let next = route
        .respond_stream(respond_call(&first_response_turn("op-2")))
        .await
        .unwrap();
    assert_eq!(next.deployment(), "agent[1] gpt-4.1");
    assert_eq!(upstreams.count("primary"), 1, "passed over, not asked again");
    tokio::time::advance(Duration::from_secs(61)).await;
    let later = route
        .respond_stream(respond_call(&first_response_turn("op-3")))
        .await
        .unwrap();
    assert_eq!(later.deployment(), "agent[0] mock", "asked again after the skip");
}

/// Issue 17: a cut after the first output event (after the commit point) ends the stream with an error item,
/// never a clean end; the deployment's breaker hears a failure.
#[tokio::test(start_paused = true)]
async fn a_cut_after_the_first_output_event_ends_in_an_error_item() {
    // Events: response.created, response.in_progress, response.output_item.added (commits), then the cut.
    let cut = "[endpoints.model]\nstream = { cut = 1.0, cut_after_chunks = 3 }";
    let upstreams = Upstreams::new(&[("primary", profile(cut)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let mut stream = route
        .respond_stream(respond_call(&first_response_turn("op-4")))
        .await
        .expect("committed at the first output event");
    assert_eq!(stream.deployment(), "agent[0] mock");
    let mut kinds = Vec::new();
    let error = loop {
        match stream.next().await.expect("never a clean end") {
            Ok(event) => kinds.push(event.kind().to_owned()),
            Err(error) => break error,
        }
    };
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added"
        ],
        "the held preamble, then the first output event"
    );
    assert_eq!(error.kind, StreamErrorKind::Cut);
    assert!(stream.next().await.is_none(), "nothing after the error");
    assert_eq!(
        upstreams.count("fallback"),
        0,
        "after the commit point nothing falls back"
    );
    let breaker = route.breaker(0).expect("the primary's breaker");
    assert_eq!(
        breaker.snapshot(ballast::clock::now()).window_failures,
        1,
        "the cut is the deployment's failure"
    );
}

/// Issue 17: a provider's 5xx sent as events after `response.created` (`event: error`, `response.failed`) comes
/// before the commit point: the same deployment is asked again, and the caller sees one clean stream.
#[tokio::test(start_paused = true)]
async fn an_error_event_before_the_commit_point_is_retried_unseen() {
    let once = r#"
[endpoints.model]
stream = { error_delivery = "events" }
[[scripts]]
endpoint = "model"
op = "op-20"
steps = ["503"]
"#;
    let upstreams = Upstreams::new(&[("primary", profile(once)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .respond_stream(respond_call(&first_response_turn("op-20")))
        .await
        .expect("the second attempt answers");
    assert_eq!(stream.deployment(), "agent[0] mock");
    assert_eq!(stream.report().attempts.len(), 2, "{}", stream.report());
    let kinds: Vec<String> = stream
        .map(|e| e.expect("no error reaches the caller").kind().to_owned())
        .collect()
        .await;
    assert_eq!(
        kinds.iter().filter(|k| *k == "response.created").count(),
        1,
        "one preamble: the failed attempt's was held back: {kinds:?}"
    );
    assert!(
        !kinds.iter().any(|k| k == "error" || k == "response.failed"),
        "{kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("response.completed"));
    assert_eq!((upstreams.count("primary"), upstreams.count("fallback")), (2, 0));
}

/// Issue 17: a deployment whose every stream fails with a 5xx event after `response.created` is retried up to
/// its attempts, then the route falls back; the caller sees only the fallback's stream.
#[tokio::test(start_paused = true)]
async fn error_events_that_outlast_the_retries_fall_back_unseen() {
    let failing = "[endpoints.model]\nerrors = { 500 = 1.0 }\nstream = { error_delivery = \"events\" }";
    let upstreams = Upstreams::new(&[("primary", profile(failing)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .respond_stream(respond_call(&first_response_turn("op-21")))
        .await
        .expect("the fallback answers");
    assert_eq!(stream.deployment(), "agent[1] gpt-4.1");
    let report = stream.report();
    assert_eq!(report.target, "agent[0] mock");
    assert_eq!(report.attempts.len(), 3, "the primary's attempts: {report}");
    let kinds: Vec<String> = stream
        .map(|e| e.expect("no error reaches the caller").kind().to_owned())
        .collect()
        .await;
    assert_eq!(
        kinds.iter().filter(|k| *k == "response.created").count(),
        1,
        "{kinds:?}"
    );
    assert!(
        !kinds.iter().any(|k| k == "error" || k == "response.failed"),
        "{kinds:?}"
    );
    assert_eq!((upstreams.count("primary"), upstreams.count("fallback")), (3, 1));
}

/// Issue 17: keep-alives alone never commit a stream: a stream of nothing but keep-alives is an attempt that
/// never reached its commit point, ended by the per-try timeout and retried.
#[tokio::test(start_paused = true)]
async fn keep_alives_alone_never_commit() {
    let silent = r#"
[endpoints.model]
stream = { stall = 1.0, stall_after_chunks = 0, stall_for = "60s", keep_alive = "100ms" }
"#;
    let upstreams = Upstreams::new(&[("primary", profile(silent)), ("fallback", profile(silent))]);
    let route = client(
        &config("per_try_timeout = \"1s\"\nretry = { max_attempts = 2 }"),
        &upstreams,
    );
    let error = route
        .respond_stream(respond_call(&first_response_turn("op-5")))
        .await
        .expect_err("no deployment ever sent content");
    assert!(matches!(error, CallError::Failed { .. }), "{error}");
    for report in [error.report(), error.report().answering()] {
        assert_eq!(report.attempts.len(), 2, "{report}");
        for attempt in &report.attempts {
            assert_eq!(attempt.result, AttemptResult::Error("timeout".into()), "{report}");
            assert_eq!(
                attempt.duration,
                Duration::from_secs(1),
                "each attempt ran to its per-try timeout though keep-alives kept coming: {report}"
            );
        }
    }
}

/// After the commit point, keep-alives are heard: a stall longer than `stream_idle_timeout` during which the
/// provider sends keep-alives (a model thinking) does not end the stream; a silent one does.
#[tokio::test(start_paused = true)]
async fn keep_alives_after_the_commit_point_keep_a_thinking_stream_open() {
    for (keep_alive, ends_well) in [("keep_alive = \"100ms\", ", true), ("", false)] {
        let thinking = format!(
            "[endpoints.model]\nstream = {{ stall = 1.0, stall_after_chunks = 4, stall_for = \"3s\", {keep_alive}cut = 0 }}"
        );
        let upstreams = Upstreams::new(&[("primary", profile(&thinking)), ("fallback", profile(""))]);
        let route = client(&config("stream_idle_timeout = \"1s\""), &upstreams);
        let stream = route
            .respond_stream(respond_call(&first_response_turn("op-6")))
            .await
            .unwrap();
        let items: Vec<_> = stream.collect().await;
        let last = items.last().expect("items");
        if ends_well {
            assert!(
                last.as_ref().is_ok_and(|e| e.kind() == "response.completed"),
                "{last:?}"
            );
        } else {
            let error = last.as_ref().expect_err("a silent stall ends the stream");
            assert_eq!(error.kind, StreamErrorKind::Idle(Duration::from_secs(1)));
        }
    }
}

/// `ModelCall::commit_by` (an SDK's timeout on a stream) bounds the time to the commit point, shared by the
/// deployments; once committed, the stream runs to the call's own deadline.
#[tokio::test(start_paused = true)]
async fn the_commit_bound_bounds_only_the_time_to_the_first_content() {
    use ballast::{clock, policy::Deadline};

    // The primary's stream stalls after its preamble: no content for 3 s.
    let stalls = "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 2, stall_for = \"3s\" }";
    let paced = "[model]\nchunk_interval = \"150ms\"";
    let upstreams = Upstreams::new(&[("primary", profile(stalls)), ("fallback", profile(paced))]);
    let route = client(&config(""), &upstreams);
    let started = clock::now();
    let call = respond_call(&first_response_turn("op-7"))
        .commit_by(Deadline::after(started, Duration::from_secs(2)));
    let stream = route
        .respond_stream(call)
        .await
        .expect("the fallback commits in time");
    assert_eq!(
        stream.deployment(),
        "agent[1] gpt-4.1",
        "the primary had its share of the bound"
    );
    assert!(clock::now().saturating_duration_since(started) < Duration::from_secs(2));
    let items: Vec<_> = stream.collect().await;
    assert!(items.iter().all(Result::is_ok), "not cut at the bound: {items:?}");
    assert!(
        clock::now().saturating_duration_since(started) > Duration::from_secs(2),
        "the stream ran past the commit bound"
    );

    // With one deployment, the bound is the call's end when nothing commits by then.
    let single = Upstreams::new(&[("primary", profile(stalls))]);
    let route = client(
        &ballast_config::Config::from_toml_str(
            r#"
version = 1
[[models]]
name = "agent"
deployments = [ { base_url = "http://primary/v1", model = "mock" } ]
"#,
        )
        .unwrap(),
        &single,
    );
    let started = clock::now();
    let call = respond_call(&first_response_turn("op-8"))
        .commit_by(Deadline::after(started, Duration::from_secs(1)));
    let error = route
        .respond_stream(call)
        .await
        .expect_err("nothing committed within the bound");
    assert_eq!(error.code().as_str(), "deadline_exceeded", "{error}");
    assert!(clock::now().saturating_duration_since(started) <= Duration::from_secs(1));
}

/// An error the provider sends after `response.created` that is the caller's own (an `invalid_request_error`,
/// a prompt the provider refuses) is a 400: not retried, not a fallback's, not a breaker's failure.
#[tokio::test(start_paused = true)]
async fn a_refusal_sent_as_an_event_is_the_callers_error() {
    let refuses = "[endpoints.model]\nerrors = { 400 = 1.0 }\nstream = { error_delivery = \"events\" }";
    let upstreams = Upstreams::new(&[("primary", profile(refuses)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let error = route
        .respond_stream(respond_call(&first_response_turn("op-9")))
        .await
        .expect_err("refused");
    let CallError::Upstream { status, report, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(*status, 400);
    assert_eq!(report.attempts.len(), 1, "not retried: {report}");
    assert!(report.fallback.is_none(), "no fallback: {report}");
    assert_eq!(upstreams.count("fallback"), 0);
    assert_eq!(
        route
            .breaker(0)
            .unwrap()
            .snapshot(ballast::clock::now())
            .window_failures,
        0
    );
}

/// The upstream's keep-alives reach the caller's side of the stream (a caller whose read timeout bounds the
/// gaps hears the model thinking).
#[tokio::test(start_paused = true)]
async fn keep_alives_are_passed_on_to_the_caller() {
    let thinking = "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 4, stall_for = \"1s\", keep_alive = \"100ms\" }";
    let upstreams = Upstreams::new(&[("primary", profile(thinking)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .respond_stream(respond_call(&first_response_turn("op-10")))
        .await
        .unwrap();
    let sse: Vec<bytes::Bytes> = stream.into_sse().collect().await;
    let text: String = sse
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert!(text.contains(": keep-alive\n\n"), "{text}");
    assert!(text.contains("event: response.completed"), "{text}");
}
