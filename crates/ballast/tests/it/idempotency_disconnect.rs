//! A caller that goes away after dispatch (issue 5, "disconnect"): the handler runs in a task of its own, so it
//! completes once and its answer is stored; a retry with the same key gets the stored response.
//!
//! The first test drops the layer's future itself — what any server does when it cancels a request — and fails
//! if the handler runs inside that future. The second closes a real TCP connection through `axum::serve`; hyper's
//! HTTP/1 server does not cancel a pending handler when the client goes away (it notices on write), so that test
//! pins the end-to-end behaviour rather than the cancellation itself.

use crate::support;

use std::time::Duration;

use ballast::idempotency::IdempotencyLayer;
use support::idempotency::{Handlers, app, poll_until, post_json, send, sqlite, within};

const BODY: &str = r#"{"order": 9, "amount": 12}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_caller_does_not_cancel_the_handler() {
    let store = sqlite().await;
    let handlers = Handlers::new(false);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store);
    let call = tokio::spawn({
        let app = app.clone();
        async move { send(&app, post_json("/refunds", Some("k1"), BODY)).await }
    });
    handlers.started(1).await;
    call.abort();
    assert!(
        call.await.unwrap_err().is_cancelled(),
        "the caller's future was dropped"
    );
    // Still running: a retry now is told to come back.
    let meanwhile = send(&app, post_json("/refunds", Some("k1"), BODY)).await;
    assert_eq!(meanwhile.status(), 409);
    handlers.open();
    let retry = poll_until(
        &app,
        || post_json("/refunds", Some("k1"), BODY),
        |a| a.status() != 409,
    )
    .await;
    assert_eq!(retry.status(), 201);
    assert!(retry.replayed());
    assert_eq!(retry.body, BODY, "the handler's stored answer");
    assert_eq!(
        (handlers.runs(), handlers.finished()),
        (1, 1),
        "ran once, to the end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_does_not_cancel_the_handler() {
    let store = sqlite().await;
    let handlers = Handlers::new(false);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/refunds", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::new();
    let post = || {
        client
            .post(&url)
            .header("idempotency-key", "k1")
            .header("content-type", "application/json")
            .body(BODY)
            .send()
    };
    let caller = tokio::spawn(post());
    handlers.started(1).await;
    caller.abort();
    assert!(
        caller.await.unwrap_err().is_cancelled(),
        "the client dropped its connection"
    );
    handlers.open();
    let replay = within(async {
        loop {
            let answer = post().await.expect("the server answers");
            if answer.status() != 409 {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.text().await.unwrap(), BODY);
    assert_eq!((handlers.runs(), handlers.finished()), (1, 1));
    server.abort();
}

/// Regression: a caller that went away between the claim and the dispatch dropped the layer's future with the
/// claim in it; nobody held the key, and every retry got 409 until the lease ran out (40 s by default). The
/// request now runs on in a task of its own from the claim on: it is dispatched and run once, and the retry gets
/// its stored answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_gone_between_claim_and_dispatch_leaves_no_orphaned_claim() {
    use std::sync::atomic::Ordering;
    let store = support::idempotency::FlakyStore::new(sqlite().await);
    store.hold_dispatch.store(true, Ordering::SeqCst);
    let handlers = Handlers::new(true);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store.clone());
    let call = tokio::spawn({
        let app = app.clone();
        async move { send(&app, post_json("/refunds", Some("k3"), BODY)).await }
    });
    within(store.dispatch_entered.notified()).await;
    call.abort();
    assert!(
        call.await.unwrap_err().is_cancelled(),
        "the caller left while the claim was held"
    );
    store.hold_dispatch.store(false, Ordering::SeqCst);
    store.dispatch_open.notify_one();
    let retry = poll_until(
        &app,
        || post_json("/refunds", Some("k3"), BODY),
        |a| a.status() != 409,
    )
    .await;
    assert_eq!(retry.status(), 201);
    assert!(
        retry.replayed(),
        "the abandoned request ran on and its answer was stored"
    );
    assert_eq!(handlers.runs(), 1);
}
