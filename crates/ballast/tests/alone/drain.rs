//! Background work is tracked and a shutdown can wait for it (`ballast::background`). Alone: the tracker is the
//! process's, and other tests' background tasks would be counted. Real time with bounded waits (the store's
//! clock is the wall clock); the handler is held by a gate, not a sleep.

use crate::support;

use std::time::Duration;

use ballast::idempotency::IdempotencyLayer;
use support::idempotency::{Handlers, app, post_json, send, sqlite};
use tower::ServiceExt as _;

/// A claimed idempotent request runs on in the background after its caller went away; `drain` says when the
/// grace period was too short, waits for it within a long enough one, and the request's answer is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_waits_for_a_request_whose_caller_left() {
    let _alone = crate::alone().await;
    let store = sqlite().await;
    let layer = IdempotencyLayer::builder(store.clone()).build().unwrap();
    let handlers = Handlers::new(false);
    let app = app(layer, &handlers, store);
    let refund = || post_json("/refunds", Some("k-drain"), r#"{"order": 7}"#);
    let caller = tokio::spawn(app.clone().oneshot(refund()));
    handlers.started(1).await;
    // The caller goes away while the handler runs; the request goes on in the background.
    caller.abort();
    assert!(caller.await.unwrap_err().is_cancelled());
    assert!(ballast::background::running() >= 1);
    let short = ballast::background::drain(Duration::from_millis(50)).await;
    assert!(!short.finished && short.still_running >= 1, "{short:?}");
    handlers.open();
    let drained = ballast::background::drain(Duration::from_secs(10)).await;
    assert_eq!((drained.finished, drained.still_running), (true, 0));
    assert_eq!(ballast::background::running(), 0);
    assert_eq!(handlers.finished(), 1);
    // Its answer was kept: the retry is a replay, and nothing ran twice.
    let replay = send(&app, refund()).await;
    assert_eq!(replay.status(), 201, "{:?}", replay.body);
    assert_eq!(
        replay
            .parts
            .headers
            .get("idempotent-replayed")
            .map(|v| v.to_str().unwrap()),
        Some("true")
    );
    assert_eq!(handlers.runs(), 1);
}
