//! The front door and the faults over real HTTP: resets, hangs, the capacity limit, outages, the attempt
//! header, `Retry-After`, the stats, and graceful shutdown.

use crate::support;

use std::io::ErrorKind;
use std::time::Duration;

use ballast_chaos::{
    Capacity, EndpointProfile, Outage, OutageAnswer, Profile, RetryAfterForm, ScriptStep, Window, spawn,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

const LOOKUP: &str = "lookup_order";

fn lookup(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001"})
}

#[tokio::test]
async fn a_reset_is_a_connection_error_with_no_response() {
    let script: &[ScriptStep] = &[ScriptStep::Reset];
    let server = spawn(profile(LOOKUP, EndpointProfile::default(), &[("o1", script)]))
        .await
        .expect("server");
    let err = call(&client(PATIENCE), &server, LOOKUP, &lookup("o1"), None)
        .await
        .expect_err("no response");
    assert!(err.status().is_none() && !err.is_timeout(), "{err:?}");
    assert!(
        caused_by(&err, ErrorKind::ConnectionReset),
        "an RST, not a clean close: {err:?}"
    );
    assert_eq!(bucket(&server, LOOKUP, "reset").await, 1);
}

#[tokio::test]
async fn a_bare_router_approximates_a_reset_by_closing_without_an_answer() {
    let script: &[ScriptStep] = &[ScriptStep::Reset];
    let router = ballast_chaos::router(profile(LOOKUP, EndpointProfile::default(), &[("o1", script)]));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/tools/{LOOKUP}", listener.local_addr().expect("addr"));
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let err = client(PATIENCE)
        .post(&url)
        .json(&lookup("o1"))
        .send()
        .await
        .expect_err("no answer");
    assert!(err.status().is_none() && !err.is_timeout(), "{err:?}");
    let next = client(PATIENCE)
        .post(&url)
        .json(&lookup("o1"))
        .send()
        .await
        .expect("answer");
    assert_eq!(next.status(), StatusCode::OK, "attempt 2 is past the script");
    server.abort();
}

#[tokio::test]
async fn a_hang_is_never_answered() {
    let script: &[ScriptStep] = &[ScriptStep::Hang];
    let server = spawn(profile(LOOKUP, EndpointProfile::default(), &[("o1", script)]))
        .await
        .expect("server");
    let err = call(
        &client(Duration::from_millis(300)),
        &server,
        LOOKUP,
        &lookup("o1"),
        None,
    )
    .await
    .expect_err("no answer");
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(bucket(&server, LOOKUP, "hang").await, 1);
}

#[tokio::test]
async fn the_capacity_limit_answers_503_at_once_beyond_slots_and_queue() {
    let faults = EndpointProfile {
        capacity: Some(Capacity {
            concurrent: 2,
            queue: 1,
        }),
        ..EndpointProfile::default()
    };
    let holds: &[ScriptStep] = &[ScriptStep::Hang, ScriptStep::Hang, ScriptStep::Hang];
    let server = spawn(profile(LOOKUP, faults, &[("hold", holds)]))
        .await
        .expect("server");
    let held: Vec<_> = (0..3)
        .map(|_| {
            let request = client(PATIENCE * 2)
                .post(server.url("/tools/lookup_order"))
                .json(&lookup("hold"));
            tokio::spawn(request.send())
        })
        .collect();
    eventually("2 requests served and 1 queued", || async {
        in_flight(&server, LOOKUP).await == 3
    })
    .await;
    // The client gives up before any slot would free: a 503 proves the request was refused, not queued.
    let shed = call(
        &client(Duration::from_secs(2)),
        &server,
        LOOKUP,
        &lookup("other"),
        None,
    )
    .await
    .expect("refused at once");
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()["chaos-fault"], "shed_capacity");
    assert_eq!(bucket(&server, LOOKUP, "shed_capacity").await, 1);
    assert_eq!(
        bucket(&server, LOOKUP, "hang").await,
        2,
        "the queued request waits for a slot"
    );
    held.iter().for_each(tokio::task::JoinHandle::abort);
    eventually("the slots to free when their clients went away", || async {
        let next = call(&client(PATIENCE), &server, LOOKUP, &lookup("next"), None).await;
        next.is_ok_and(|r| r.status() == StatusCode::OK)
    })
    .await;
    let max = &get_json(&server, "/stats").await["endpoints"][LOOKUP]["max_in_flight"];
    assert_eq!(max, 4, "3 held and the shed one, counted while it was refused");
}

#[tokio::test]
async fn an_outage_window_answers_503_with_the_time_left() {
    let faults = EndpointProfile {
        outages: vec![Outage {
            start: Duration::ZERO,
            end: Duration::from_secs(60),
            answer: OutageAnswer::RetryAfter,
        }],
        ..EndpointProfile::default()
    };
    let server = spawn(profile("process_payment", faults, &[]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let down = call(&client, &server, "process_payment", &refund("o1", 100), None)
        .await
        .expect("answer");
    assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(down.headers()["chaos-fault"], "outage");
    let retry_after: u64 = down.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!((55..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(executions(&server, "o1").await, 0);
    assert_eq!(bucket(&server, "process_payment", "outage").await, 1);
    let up = call(&client, &server, LOOKUP, &lookup("o2"), None)
        .await
        .expect("answer");
    assert_eq!(up.status(), StatusCode::OK, "other endpoints are up");
}

/// A dead upstream that does not say when it is back (issue 12's `dead-upstream` scenario): 503 without any
/// `Retry-After`; and one that hangs: no answer at all, no side effect, until the client gives up.
#[tokio::test]
async fn an_outage_may_answer_without_retry_after_or_not_at_all() {
    let down = |answer| EndpointProfile {
        outages: vec![Outage {
            start: Duration::ZERO,
            end: Duration::from_secs(60),
            answer,
        }],
        ..EndpointProfile::default()
    };
    let mut both = profile("process_payment", down(OutageAnswer::NoRetryAfter), &[]);
    both.endpoints.insert(LOOKUP.into(), down(OutageAnswer::Hang));
    let server = spawn(both).await.expect("server");
    let silent = call(
        &client(PATIENCE),
        &server,
        "process_payment",
        &refund("o1", 100),
        None,
    )
    .await
    .expect("answer");
    assert_eq!(silent.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(silent.headers().get("retry-after").is_none());
    assert!(silent.headers().get("retry-after-ms").is_none());
    let hung = call(
        &client(Duration::from_millis(200)),
        &server,
        LOOKUP,
        &lookup("o2"),
        None,
    )
    .await
    .expect_err("never answered");
    assert!(hung.is_timeout(), "{hung:?}");
    assert_eq!(executions(&server, "o1").await, 0);
    assert_eq!(bucket(&server, LOOKUP, "outage").await, 1);
}

/// During a `closed` window the server accepts no connection: connecting is refused (nothing was sent), and a
/// connection open when the window starts is reset; when it ends, the same address serves again.
#[tokio::test]
async fn a_closed_window_refuses_connections_then_serves_again() {
    let closed = Profile {
        closed: vec![Window {
            start: Duration::from_millis(300),
            end: Duration::from_millis(900),
        }],
        ..Profile::default()
    };
    let server = spawn(closed).await.expect("server");
    let client = client(PATIENCE);
    let before = call(&client, &server, LOOKUP, &lookup("o1"), None)
        .await
        .expect("open");
    assert_eq!(before.status(), StatusCode::OK);
    eventually("a refused connection", || async {
        match call(&client, &server, LOOKUP, &lookup("o2"), None).await {
            Err(err) => {
                let refused = caused_by(&err, ErrorKind::ConnectionRefused);
                assert!(
                    refused || caused_by(&err, ErrorKind::ConnectionReset) || err.is_request(),
                    "refused, or the open connection reset: {err:?}"
                );
                refused
            }
            Ok(_) => false,
        }
    })
    .await;
    eventually("serving again", || async {
        call(&client, &server, LOOKUP, &lookup("o3"), None)
            .await
            .is_ok_and(|r| r.status() == StatusCode::OK)
    })
    .await;
}

/// A scaled profile runs its clock faster: latencies, outage windows and `Retry-After` shrink by the factor
/// (a whole-seconds `Retry-After` becomes milliseconds, with whole seconds rounded up beside them).
#[tokio::test]
async fn a_scaled_profile_waits_a_fraction_of_the_time() {
    let faults = EndpointProfile {
        retry_after: Some(RetryAfterForm::Seconds(2)),
        outages: vec![Outage {
            start: Duration::ZERO,
            end: Duration::from_secs(100),
            answer: OutageAnswer::RetryAfter,
        }],
        ..EndpointProfile::default()
    };
    let fast = profile("process_payment", faults, &[]).scaled(0.01);
    assert_eq!(
        fast.endpoint("process_payment").retry_after,
        Some(RetryAfterForm::Millis(20))
    );
    assert_eq!(
        fast.endpoint("process_payment").outages[0].end,
        Duration::from_secs(1)
    );
    let server = spawn(fast).await.expect("server");
    let down = call(
        &client(PATIENCE),
        &server,
        "process_payment",
        &refund("o1", 100),
        None,
    )
    .await
    .expect("answer");
    assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
    let millis: u64 = down.headers()["retry-after-ms"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(millis <= 1000, "the time left of a 1 s window: {millis}");
    assert_eq!(down.headers()["retry-after"], "1");
}

#[tokio::test]
async fn the_attempt_header_selects_the_scripted_step() {
    let script: &[ScriptStep] = &[ScriptStep::Status(500), ScriptStep::Status(502), ScriptStep::Ok];
    let server = spawn(profile(LOOKUP, EndpointProfile::default(), &[("o1", script)]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let attempt = |n: Option<&str>| {
        let mut request = client.post(server.url("/tools/lookup_order")).json(&lookup("o1"));
        if let Some(n) = n {
            request = request.header("ballast-attempt", n);
        }
        async move { request.send().await.expect("answer").status().as_u16() }
    };
    assert_eq!(attempt(Some("2")).await, 502);
    assert_eq!(attempt(Some("3")).await, 200);
    assert_eq!(attempt(Some("1")).await, 500);
    assert_eq!(
        attempt(None).await,
        500,
        "without the header, attempts are counted: this is the first"
    );
    assert_eq!(attempt(None).await, 502);
    assert_eq!(
        attempt(Some("nonsense")).await,
        200,
        "an invalid header is counted as attempt 3"
    );
}

#[tokio::test]
async fn retry_after_comes_in_the_profiles_form_on_429_and_503_only() {
    let steps: &[ScriptStep] = &[
        ScriptStep::Status(503),
        ScriptStep::Status(429),
        ScriptStep::Status(500),
    ];
    let mut profile = profile(
        LOOKUP,
        EndpointProfile {
            retry_after: Some(RetryAfterForm::Seconds(2)),
            ..EndpointProfile::default()
        },
        &[("o1", steps)],
    );
    let dated = EndpointProfile {
        retry_after: Some(RetryAfterForm::HttpDate(Duration::from_secs(3))),
        ..EndpointProfile::default()
    };
    profile.endpoints.insert("create_refund".into(), dated);
    profile.scripts.push(ballast_chaos::Script {
        endpoint: "create_refund".into(),
        op: "o2".into(),
        steps: vec![ScriptStep::Status(503)],
    });
    let server = spawn(profile).await.expect("server");
    let client = client(PATIENCE);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let response = call(&client, &server, LOOKUP, &lookup("o1"), None)
            .await
            .expect("answer");
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().expect("ascii").to_owned());
        seen.push((response.status().as_u16(), retry_after));
    }
    let two = Some("2".to_owned());
    assert_eq!(seen, [(503, two.clone()), (429, two), (500, None)]);
    let dated = call(&client, &server, "create_refund", &refund("o2", 1), None)
        .await
        .expect("answer");
    let date = dated.headers()["retry-after"].to_str().expect("ascii");
    assert!(httpdate::parse_http_date(date).is_ok(), "an HTTP-date: {date}");
}

#[tokio::test]
async fn stats_count_requests_per_endpoint_and_status() {
    let script: &[ScriptStep] = &[ScriptStep::Status(503), ScriptStep::Ok];
    let server = spawn(profile(LOOKUP, EndpointProfile::default(), &[("o1", script)]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    for op in ["o1", "o1", "o2"] {
        call(&client, &server, LOOKUP, &lookup(op), None)
            .await
            .expect("answer");
    }
    let bad = call(&client, &server, LOOKUP, &json!({"op": "o3"}), None)
        .await
        .expect("answer");
    assert_eq!(
        bad.status(),
        StatusCode::BAD_REQUEST,
        "lookup_order needs an order_id"
    );
    let stats = get_json(&server, "/stats").await;
    let lookup = &stats["endpoints"][LOOKUP];
    assert_eq!(lookup["requests"], 4);
    assert_eq!(lookup["statuses"], json!({"200": 2, "503": 1, "400": 1}));
    assert_eq!(lookup["in_flight"], 0);
    assert_eq!(stats["in_flight"], 0);
    assert!(stats["max_in_flight"].as_u64() >= Some(1));
}

#[tokio::test]
async fn lookup_order_answers_from_the_body() {
    let server = spawn(Profile::default()).await.expect("server");
    let response = call(&client(PATIENCE), &server, LOOKUP, &lookup("o1"), None)
        .await
        .expect("answer");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["order_id"], "A-1001");
    assert_eq!(body["op"], "o1");
    assert!(body["status"].is_string() && body["amount"].is_u64(), "{body}");
    assert_eq!(executions(&server, "o1").await, 0, "a read is no side effect");
}

#[tokio::test]
async fn an_unknown_tool_is_404_with_a_code() {
    let server = spawn(Profile::default()).await.expect("server");
    let response = call(&client(PATIENCE), &server, "send_email", &json!({}), None)
        .await
        .expect("answer");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["code"], "unknown_tool");
}

#[tokio::test]
async fn shutdown_ends_hangs_and_returns() {
    let script: &[ScriptStep] = &[ScriptStep::Hang];
    let server = spawn(profile(LOOKUP, EndpointProfile::default(), &[("o1", script)]))
        .await
        .expect("server");
    let request = client(PATIENCE * 2)
        .post(server.url("/tools/lookup_order"))
        .json(&lookup("o1"));
    let hanging = tokio::spawn(request.send());
    eventually("the request to hang", || async {
        in_flight(&server, LOOKUP).await == 1
    })
    .await;
    tokio::time::timeout(PATIENCE, server.shutdown())
        .await
        .expect("shutdown is bounded")
        .expect("a clean shutdown");
    let lost = tokio::time::timeout(PATIENCE, hanging)
        .await
        .expect("the client is released")
        .expect("task");
    assert!(lost.expect_err("no answer").status().is_none());
}
