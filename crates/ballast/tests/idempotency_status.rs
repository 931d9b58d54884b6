//! The operation status lookup (issue 5): `GET /operations/{key}` and `operation_status` answer each of
//! `in_progress`, `completed` (with the stored result), `outcome_unknown` and `not_found`, scoped to the
//! caller's principal.

mod support;

use ballast::{IdempotencyLayer, OperationStatus, operation_status};
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
