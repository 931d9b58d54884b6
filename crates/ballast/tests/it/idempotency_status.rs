//! The operation status lookup (issue 5): `GET /operations/{key}` and `operation_status` answer each of
//! `in_progress`, `completed` (with the stored result), `outcome_unknown` and `not_found`, scoped to the
//! caller's principal.

use crate::support;

use ballast::idempotency::{IdempotencyLayer, OperationStatus, operation_status};
use ballast_core::IdempotencyKey;
use serde_json::{Value, json};
use support::idempotency::{Handlers, ROUTES, app, post_json, send, sqlite};

fn as_principal(mut request: http::Request<axum::body::Body>, name: &str) -> http::Request<axum::body::Body> {
    request
        .headers_mut()
        .insert("x-test-principal", name.parse().unwrap());
    request
}

fn status_request(key: &str, principal: &str) -> http::Request<axum::body::Body> {
    let request = http::Request::get(format!("/operations/{key}"))
        .body(axum::body::Body::empty())
        .unwrap();
    as_principal(request, principal)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_status_is_answered_to_its_principal_only() {
    let store = sqlite().await;
    let handlers = Handlers::new(false);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store.clone());
    let status = |key: &'static str, principal: &'static str| {
        let app = app.clone();
        async move {
            let answer = send(&app, status_request(key, principal)).await;
            (answer.status(), answer.json())
        }
    };

    let (code, body) = status("k1", "alice").await;
    assert_eq!((code, &body["status"]), (404, &json!("not_found")));

    let call = tokio::spawn({
        let app = app.clone();
        async move {
            send(
                &app,
                as_principal(post_json("/refunds", Some("k1"), r#"{"n":1}"#), "alice"),
            )
            .await
        }
    });
    handlers.started(1).await;
    let (code, body) = status("k1", "alice").await;
    assert_eq!(code, 200);
    assert_eq!(body["status"], "in_progress");
    assert_eq!(body["state"], "dispatched");
    assert_eq!(body["route"], "POST /refunds");

    handlers.open();
    assert_eq!(call.await.unwrap().status(), 201);
    let (code, body) = status("k1", "alice").await;
    assert_eq!(code, 200);
    assert_eq!(body["status"], "completed");
    assert_eq!(body["result"]["status"], 201);
    assert_eq!(body["result"]["body"], json!({"n": 1}));
    assert_eq!(body["result"]["headers"]["location"], "/refunds/1");

    send(&app, as_principal(post_json("/lost", Some("k2"), "{}"), "alice")).await;
    let (code, body) = status("k2", "alice").await;
    assert_eq!((code, &body["status"]), (200, &json!("outcome_unknown")));

    for key in ["k1", "k2"] {
        let (code, body) = status(key, "bob").await;
        assert_eq!(
            (code, &body["status"]),
            (404, &Value::from("not_found")),
            "bob never sees alice's {key}"
        );
    }
    let (code, _) = status("a%20b", "alice").await;
    assert_eq!(code, 400, "a malformed key");
}

#[tokio::test]
async fn operation_status_reads_the_store_by_principal_routes_and_key() {
    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store.clone());
    send(&app, post_json("/refunds/7", Some("k1"), "{}")).await;
    let routes: Vec<String> = ROUTES.iter().map(|r| (*r).to_owned()).collect();
    let key = IdempotencyKey::parse("k1").unwrap();
    match operation_status(&*store, "anonymous", &routes, &key)
        .await
        .unwrap()
    {
        OperationStatus::Completed { route, response } => {
            assert_eq!(route, "POST /refunds/{id}");
            assert_eq!(response.status, 201);
        }
        other => panic!("expected completed, got {other:?}"),
    }
    let other = operation_status(&*store, "someone-else", &routes, &key)
        .await
        .unwrap();
    assert_eq!(other, OperationStatus::NotFound);
    let only_refunds = operation_status(&*store, "anonymous", &routes[..1], &key)
        .await
        .unwrap();
    assert_eq!(
        only_refunds,
        OperationStatus::NotFound,
        "not on the routes asked about"
    );
}

/// Regression: a holder that vanished (its lease ran out) must not read as `in_progress` for the rest of the
/// retention — a client polling the status, as the 409 invites it to, would poll forever. Vanished after
/// dispatch: `outcome_unknown` (what the next claim makes it, and what DESIGN.md has the operations endpoint
/// report). Vanished before dispatch: nothing was sent and a retry runs, so `not_found`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_holder_is_not_in_progress_forever() {
    use std::time::Duration;

    use ballast_core::fingerprint;
    use ballast_store::{ClaimOutcome, ClaimRequest, ExpiredDispatch, OwnerToken, Scope};
    use support::idempotency::within;

    let store = sqlite().await;
    let handlers = Handlers::new(true);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store.clone());
    let lease = Duration::from_millis(200);
    for (key, dispatched) in [("gone-after", true), ("gone-before", false)] {
        let scope = Scope::new("alice", "POST /refunds", IdempotencyKey::parse(key).unwrap());
        let claim = ClaimRequest {
            fingerprint: fingerprint("POST", "/refunds", Some("application/json"), b"{}").unwrap(),
            owner: OwnerToken::random(),
            lease,
            expired_dispatch: ExpiredDispatch::OutcomeUnknown,
        };
        assert_eq!(store.claim(&scope, &claim).await.unwrap(), ClaimOutcome::Acquired);
        if dispatched {
            store.mark_dispatched(&scope, claim.owner).await.unwrap();
        }
        // Nobody sends the key again; only the status is polled.
        within(async {
            while !store.lookup(&scope).await.unwrap().unwrap().lease_left.is_zero() {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
        .await;
        let answer = send(&app, status_request(key, "alice")).await;
        let expected = if dispatched {
            (200, "outcome_unknown")
        } else {
            (404, "not_found")
        };
        assert_eq!(
            (answer.status(), answer.json()["status"].as_str().unwrap()),
            expected,
            "{key}: {:?}",
            answer.json()
        );
    }
    assert_eq!(handlers.runs(), 0);
}

/// Regression: `operations_route` looked keys up under `anonymous` whatever the layer's default principal, so a
/// layer built with `.default_principal("svc")` answered `not_found` for every key it stored. The layer's own
/// route uses its default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layers_status_route_uses_its_default_principal() {
    use axum::routing::post;
    let store = sqlite().await;
    let layer = IdempotencyLayer::builder(store.clone())
        .default_principal("svc")
        .build()
        .unwrap();
    let routes = vec!["POST /refunds".to_owned()];
    let app = axum::Router::new()
        .route(
            "/refunds",
            post(|| async { (http::StatusCode::CREATED, "refunded") }),
        )
        .layer(layer.clone())
        .route("/operations/{key}", layer.operations_route(routes.clone()))
        .route(
            "/anonymous/{key}",
            ballast::idempotency::operations_route(store, routes),
        );
    assert_eq!(
        send(&app, post_json("/refunds", Some("k-svc"), "{}"))
            .await
            .status(),
        201
    );
    let get = |path: &str| http::Request::get(path).body(axum::body::Body::empty()).unwrap();
    let answer = send(&app, get("/operations/k-svc")).await;
    assert_eq!(
        (answer.status(), answer.json()["status"].clone()),
        (200, json!("completed"))
    );
    let answer = send(&app, get("/anonymous/k-svc")).await;
    assert_eq!(answer.status(), 404, "the free function keeps `anonymous`");
}
