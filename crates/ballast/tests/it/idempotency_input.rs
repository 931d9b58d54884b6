//! The idempotency layer's answers to what a request carries (issue 5, "bad input"): keys missing or malformed,
//! fingerprints (reordered JSON replays, a changed byte of a non-JSON body is 422), body limits, deadline
//! headers and the lease they give, the markers a handler sets, and what a replay carries.

use crate::support;

use std::time::Duration;

use ballast::idempotency::{IdempotencyLayer, InvalidIdempotencyLayer};
use ballast_core::IdempotencyKey;
use ballast_store::{RecordState, Scope};
use support::idempotency::{Handlers, app, post_json, post_with, send, sqlite};

async fn fixture() -> (axum::Router, Handlers) {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store);
    (app, handlers)
}

#[tokio::test]
async fn a_missing_key_is_400_and_nothing_runs() {
    let (app, handlers) = fixture().await;
    let answer = send(&app, post_json("/refunds", None, "{}")).await;
    assert_eq!(answer.status(), 400);
    assert_eq!(answer.problem_type(), "urn:ballast:idempotency_key_missing");
    assert_eq!(answer.header("x-should-retry"), Some("false"));
    assert_eq!(handlers.runs(), 0);
}

#[tokio::test]
async fn malformed_keys_are_400_each_and_nothing_runs() {
    let (app, handlers) = fixture().await;
    let too_long = "k".repeat(256);
    for key in ["", too_long.as_str(), "clé-1", "two words"] {
        let request = http::Request::post("/refunds")
            .header("content-type", "application/json")
            .header(
                "idempotency-key",
                http::HeaderValue::from_bytes(key.as_bytes()).unwrap(),
            )
            .body(axum::body::Body::from("{}"))
            .unwrap();
        let answer = send(&app, request).await;
        assert_eq!(answer.status(), 400, "key {key:?}");
        assert_eq!(answer.problem_type(), "urn:ballast:idempotency_key_invalid");
    }
    // 255 characters is the longest valid key.
    let answer = send(&app, post_json("/refunds", Some(&"k".repeat(255)), "{}")).await;
    assert_eq!(answer.status(), 201);
    assert_eq!(handlers.runs(), 1);
}

#[tokio::test]
async fn without_a_required_key_requests_pass_through_untouched() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let layer = IdempotencyLayer::builder(store.clone())
        .require_key(false)
        .build()
        .unwrap();
    let app = app(layer, &handlers, store);
    for _ in 0..2 {
        let answer = send(&app, post_json("/refunds", None, "{}")).await;
        assert_eq!(answer.status(), 201);
        assert!(!answer.replayed());
    }
    assert_eq!(handlers.runs(), 2, "no key, no deduplication");
    // A key is still honoured.
    send(&app, post_json("/refunds", Some("k1"), "{}")).await;
    assert!(
        send(&app, post_json("/refunds", Some("k1"), "{}"))
            .await
            .replayed()
    );
    assert_eq!(handlers.runs(), 3);
}

#[tokio::test]
async fn reordered_json_keys_replay_and_changed_json_is_422() {
    let (app, handlers) = fixture().await;
    let first = send(
        &app,
        post_json("/refunds", Some("k1"), r#"{"order": 7, "amount": 1.0}"#),
    )
    .await;
    assert_eq!(first.status(), 201);
    let same = send(
        &app,
        post_json("/refunds", Some("k1"), r#"{ "amount":1, "order":7 }"#),
    )
    .await;
    assert_eq!(same.status(), 201);
    assert!(
        same.replayed(),
        "the same JSON with keys reordered is the same request"
    );
    assert_eq!(same.body, first.body, "the first body replayed");
    let changed = send(
        &app,
        post_json("/refunds", Some("k1"), r#"{"order": 8, "amount": 1}"#),
    )
    .await;
    assert_eq!(changed.status(), 422);
    assert_eq!(changed.problem_type(), "urn:ballast:idempotency_key_reused");
    assert_eq!(handlers.runs(), 1);
}

#[tokio::test]
async fn non_json_bodies_are_fingerprinted_byte_for_byte() {
    let (app, handlers) = fixture().await;
    let form = |body: &[u8]| post_with("/refunds", Some("k1"), "application/x-www-form-urlencoded", body);
    assert_eq!(send(&app, form(b"order=7&amount=1")).await.status(), 201);
    assert!(send(&app, form(b"order=7&amount=1")).await.replayed());
    let changed = send(&app, form(b"order=7&amount=2")).await;
    assert_eq!(changed.status(), 422, "one byte changed");
    // JSON sent as text/plain is bytes too: reordering it is another request.
    let text = |body: &str| post_with("/refunds", Some("k2"), "text/plain", body.as_bytes());
    assert_eq!(send(&app, text(r#"{"a":1,"b":2}"#)).await.status(), 201);
    assert_eq!(send(&app, text(r#"{"b":2,"a":1}"#)).await.status(), 422);
    assert_eq!(handlers.runs(), 2);
}

/// Regression (issue 11): the media type was not hashed (the same bytes as `text/plain` and as a form
/// replayed), integers beyond 64 bits and decimals beyond a double's precision collided, and a JSON body that
/// names a member twice was read as its last value. Now each is another request (422) or a 400.
#[tokio::test]
async fn the_fingerprint_tells_apart_what_differs() {
    let (app, handlers) = fixture().await;
    let same_bytes = |content_type: &str| post_with("/refunds", Some("k1"), content_type, b"order=7");
    assert_eq!(send(&app, same_bytes("text/plain")).await.status(), 201);
    let other_type = send(&app, same_bytes("application/x-www-form-urlencoded")).await;
    assert_eq!(other_type.status(), 422, "{:?}", other_type.body);
    assert!(
        send(&app, same_bytes("Text/Plain; format=flowed"))
            .await
            .replayed(),
        "normalised"
    );

    for (key, first, second) in [
        (
            "k2",
            r#"{"id":36893488147419103232}"#,
            r#"{"id":36893488147419103233}"#,
        ),
        ("k3", r#"{"amount":0.1}"#, r#"{"amount":0.10000000000000000001}"#),
    ] {
        assert_eq!(
            send(&app, post_json("/refunds", Some(key), first)).await.status(),
            201
        );
        let respelled = first.replace("0.1}", "1e-1}").replace("232}", "232.0}");
        assert!(
            send(&app, post_json("/refunds", Some(key), &respelled))
                .await
                .replayed(),
            "{respelled}"
        );
        let other = send(&app, post_json("/refunds", Some(key), second)).await;
        assert_eq!(other.status(), 422, "{second} is not {first}");
        assert_eq!(other.problem_type(), "urn:ballast:idempotency_key_reused");
    }

    let twice = send(&app, post_json("/refunds", Some("k4"), r#"{"to":"A","to":"B"}"#)).await;
    assert_eq!(twice.status(), 400);
    assert_eq!(twice.problem_type(), "urn:ballast:json_duplicate_member");
    assert_eq!(twice.header("x-should-retry"), Some("false"));
    let detail = twice.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.contains("\"to\"") && detail.contains("nothing ran"),
        "{detail}"
    );
    assert_eq!(
        handlers.runs(),
        3,
        "one run per distinct request, none for the ambiguous one"
    );
}

/// Regression (review of issue 11): a request that arrives with no time left past the reserve was answered 503
/// `store_unavailable`, "the store did not answer" — though the store was never asked — inviting a retry that
/// meets the same answer. It is 504 `deadline_exceeded`, nothing ran, and a retry with time runs.
#[tokio::test]
async fn a_request_without_time_left_is_deadline_exceeded_and_nothing_runs() {
    let (app, handlers) = fixture().await;
    for left in ["0", "40"] {
        let mut request = post_json("/refunds", Some("k1"), "{}");
        request
            .headers_mut()
            .insert("ballast-timeout-ms", left.parse().unwrap());
        let answer = send(&app, request).await;
        assert_eq!(answer.status(), 504, "{left} ms: {:?}", answer.body);
        assert_eq!(answer.problem_type(), "urn:ballast:deadline_exceeded");
        assert_eq!(answer.json()["code"], "deadline_exceeded");
        assert_eq!(answer.header("x-should-retry"), Some("false"));
        let detail = answer.json()["detail"].as_str().unwrap().to_owned();
        assert!(
            detail.contains("reserve") && detail.contains("nothing ran"),
            "{detail}"
        );
    }
    assert_eq!(handlers.runs(), 0);
    assert_eq!(
        send(&app, post_json("/refunds", Some("k1"), "{}")).await.status(),
        201
    );
}

#[tokio::test]
async fn a_key_reused_on_another_path_of_the_same_route_is_422() {
    let (app, handlers) = fixture().await;
    assert_eq!(
        send(&app, post_json("/refunds/1", Some("k1"), "{}"))
            .await
            .status(),
        201
    );
    let other = send(&app, post_json("/refunds/2", Some("k1"), "{}")).await;
    assert_eq!(
        other.status(),
        422,
        "same pattern and key, another path: never the first's replay"
    );
    assert_eq!(handlers.runs(), 1);
}

#[tokio::test]
async fn bodies_over_the_limit_are_413_and_nothing_runs() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let layer = IdempotencyLayer::builder(store.clone())
        .body_limit(16)
        .build()
        .unwrap();
    let app = app(layer, &handlers, store);
    let answer = send(
        &app,
        post_json("/refunds", Some("k1"), &format!("\"{}\"", "x".repeat(20))),
    )
    .await;
    assert_eq!(answer.status(), 413);
    assert_eq!(answer.problem_type(), "urn:ballast:body_too_large");
    assert_eq!(handlers.runs(), 0);
    assert_eq!(
        send(&app, post_json("/refunds", Some("k1"), "{}")).await.status(),
        201
    );
}

#[tokio::test]
async fn the_lease_is_fixed_whatever_the_deadline_and_a_bad_header_is_400() {
    let store = sqlite().await;
    let handlers = Handlers::new(false);
    let layer = IdempotencyLayer::builder(store.clone())
        .lease(Duration::from_millis(2000))
        .build()
        .unwrap();
    let app = app(layer, &handlers, store.clone());
    let bad = post_json("/refunds", Some("k0"), "{}");
    let (mut parts, body) = bad.into_parts();
    parts.headers.insert("grpc-timeout", "12x".parse().unwrap());
    let answer = send(&app, http::Request::from_parts(parts, body)).await;
    assert_eq!(answer.status(), 400);
    assert_eq!(answer.problem_type(), "urn:ballast:deadline_header_invalid");
    assert!(answer.json()["detail"].as_str().unwrap().contains("grpc-timeout"));

    let mut request = post_json("/refunds", Some("k1"), "{}");
    request
        .headers_mut()
        .insert("ballast-timeout-ms", "60000".parse().unwrap());
    let call = tokio::spawn({
        let app = app.clone();
        async move { send(&app, request).await }
    });
    handlers.started(1).await;
    let scope = Scope::new("anonymous", "POST /refunds", IdempotencyKey::parse("k1").unwrap());
    let record = store.lookup(&scope).await.unwrap().expect("the claim");
    assert_eq!(
        record.state,
        RecordState::Dispatched,
        "marked before the handler ran"
    );
    assert!(
        record.lease_left <= Duration::from_millis(2000) && record.lease_left > Duration::from_millis(1000),
        "lease {:?}: the layer's 2 s, not the 60 s deadline",
        record.lease_left
    );
    handlers.open();
    assert_eq!(call.await.unwrap().status(), 201);
}

#[tokio::test]
async fn a_not_stored_answer_releases_the_key_and_a_retry_runs() {
    let (app, handlers) = fixture().await;
    let first = send(&app, post_json("/reject", Some("k1"), "{}")).await;
    assert_eq!((first.status(), first.body.as_ref()), (400, b"marked".as_ref()));
    let retry = send(&app, post_json("/reject", Some("k1"), "{}")).await;
    assert_eq!(retry.status(), 400);
    assert!(!retry.replayed());
    assert_eq!(handlers.runs(), 2, "nothing stored: the retry ran");
}

#[tokio::test]
async fn an_outcome_unknown_answer_is_final_for_the_key() {
    let (app, handlers) = fixture().await;
    let first = send(&app, post_json("/lost", Some("k1"), "{}")).await;
    assert_eq!(first.status(), 504, "the handler's own answer reaches the caller");
    let retry = send(&app, post_json("/lost", Some("k1"), "{}")).await;
    assert_eq!(retry.status(), 502);
    assert_eq!(retry.problem_type(), "urn:ballast:outcome_unknown");
    assert_eq!(retry.json()["code"], "outcome_unknown");
    assert_eq!(retry.header("x-should-retry"), Some("false"));
    assert_eq!(handlers.runs(), 1);
}

#[tokio::test]
async fn a_replay_carries_the_status_allowed_headers_and_body() {
    let (app, _) = fixture().await;
    let first = send(&app, post_json("/refunds", Some("k1"), r#"{"order":7}"#)).await;
    assert_eq!(first.header("x-per-exchange"), Some("not replayed"));
    assert!(!first.replayed());
    let replay = send(&app, post_json("/refunds", Some("k1"), r#"{"order":7}"#)).await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.header("content-type"), Some("application/json"));
    assert_eq!(replay.header("location"), Some("/refunds/1"));
    assert_eq!(replay.header("x-per-exchange"), None, "not on the allow-list");
    assert_eq!(replay.body, first.body);
}

#[tokio::test]
async fn a_response_over_the_limit_reaches_the_caller_but_cannot_be_replayed() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let layer = IdempotencyLayer::builder(store.clone())
        .response_limit(10)
        .build()
        .unwrap();
    let app = app(layer, &handlers, store);
    let first = send(&app, post_json("/big", Some("k1"), "{}")).await;
    assert_eq!((first.status(), first.body.len()), (200, 64), "the whole body");
    let retry = send(&app, post_json("/big", Some("k1"), "{}")).await;
    assert_eq!(retry.status(), 502);
    assert_eq!(handlers.runs(), 1);
}

#[tokio::test]
async fn principals_never_see_each_others_replays() {
    let (app, handlers) = fixture().await;
    let as_principal = |name: &str| {
        let mut request = post_json("/refunds", Some("k1"), "{}");
        request
            .headers_mut()
            .insert("x-test-principal", name.parse().unwrap());
        request
    };
    assert!(!send(&app, as_principal("alice")).await.replayed());
    assert!(!send(&app, as_principal("bob")).await.replayed());
    assert!(send(&app, as_principal("alice")).await.replayed());
    assert_eq!(handlers.runs(), 2);
}

#[tokio::test]
async fn settings_are_checked_when_the_layer_is_built() {
    let store = sqlite().await;
    let build = |b: ballast::idempotency::IdempotencyLayerBuilder| b.build().map(|_| ()).unwrap_err();
    assert_eq!(
        build(IdempotencyLayer::builder(store.clone()).body_limit(0)),
        InvalidIdempotencyLayer::ZeroLimit { field: "body_limit" }
    );
    assert_eq!(
        build(IdempotencyLayer::builder(store.clone()).default_principal("")),
        InvalidIdempotencyLayer::EmptyPrincipal
    );
    assert!(matches!(
        build(
            IdempotencyLayer::builder(store)
                .default_timeout(Duration::from_secs(60))
                .max_timeout(Duration::from_secs(10))
        ),
        InvalidIdempotencyLayer::DefaultOverMax { .. }
    ));
}
