//! 64 concurrent requests with one key through the idempotency layer, per backend (issue 5): the handler runs
//! exactly once; while it runs every other request gets 409 in-progress, and once it answered a retry gets the
//! replay. SQLite in memory always; PostgreSQL and Redis from `BALLAST_TEST_POSTGRES_URL` /
//! `BALLAST_TEST_REDIS_URL` (skipped with a printed reason when unreachable, failing under
//! `BALLAST_REQUIRE_SERVICES=1`).

use crate::support;

use std::sync::Arc;

use ballast::idempotency::IdempotencyLayer;
use ballast_store::{IdempotencyStore, OwnerToken};
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use support::idempotency::{Handlers, app, post_json, send, server_store, sqlite, within};

const CALLERS: usize = 64;

async fn one_key_from_sixty_four_callers(store: Arc<dyn IdempotencyStore>) {
    let handlers = Handlers::new(false);
    let app = app(IdempotencyLayer::new(store.clone()), &handlers, store);
    // A key of its own: the server stores outlive the test.
    let key = OwnerToken::random().to_hex();
    let body = r#"{"order": 64, "amount": 5}"#;
    let mut calls: FuturesUnordered<_> = (0..CALLERS)
        .map(|_| {
            let (app, request) = (app.clone(), post_json("/refunds", Some(&key), body));
            tokio::spawn(async move { send(&app, request).await })
        })
        .collect();
    handlers.started(1).await;
    // The handler is held at its gate: every other caller must be answered 409 meanwhile.
    for _ in 1..CALLERS {
        let answer = within(calls.next()).await.expect("a call").expect("no panic");
        assert_eq!(answer.status(), 409, "{:?}", answer.body);
        assert_eq!(answer.problem_type(), "urn:ballast:idempotency_in_progress");
        assert_eq!(answer.header("x-should-retry"), Some("true"));
        assert!(answer.header("retry-after").is_some());
    }
    handlers.open();
    let winner = within(calls.next()).await.expect("a call").expect("no panic");
    assert_eq!(winner.status(), 201);
    assert!(!winner.replayed());
    let retry = send(&app, post_json("/refunds", Some(&key), body)).await;
    assert_eq!(retry.status(), 201);
    assert!(retry.replayed());
    assert_eq!(retry.body, winner.body);
    assert_eq!(handlers.runs(), 1, "the handler ran exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_memory_runs_the_handler_once() {
    one_key_from_sixty_four_callers(sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_runs_the_handler_once() {
    let url = "postgres://postgres@127.0.0.1:5432/test";
    if let Some(store) = server_store("PostgreSQL", "BALLAST_TEST_POSTGRES_URL", url).await {
        one_key_from_sixty_four_callers(store).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_runs_the_handler_once() {
    let url = "redis://127.0.0.1:6379";
    if let Some(store) = server_store("Redis", "BALLAST_TEST_REDIS_URL", url).await {
        one_key_from_sixty_four_callers(store).await;
    }
}
