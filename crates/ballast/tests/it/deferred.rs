//! Deferred operations through the library (issue 34): a handler behind the `IdempotencyLayer` that cannot
//! serve a request now marks it `Defer`; the layer queues it with its key and answers 202; the `Deferred`
//! workers work it later through the queue's handler — once, in priority order, until it succeeds, gives up or
//! expires — and the status route tells each state. Real time (the store is SQLite on threads of its own),
//! short leases and polls, bounded waits.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::routing::post;
use ballast::deferred::{Defer, Deferred, Handler, Workers};
use ballast::idempotency::{IdempotencyLayer, NotStored, operations_route};
use ballast_core::{Backoff, Priority};
use ballast_store::IdempotencyStore;
use http::{Response, StatusCode};
use serde_json::Value;
use tower::ServiceExt as _;

use crate::support::idempotency::{PATIENCE, post_json, send, sqlite};

/// The upstream the test plays: refusing (503, nothing acted) until opened; then each request acts once per
/// key, in the order they came.
#[derive(Clone)]
struct Upstream {
    open: Arc<AtomicBool>,
    /// Refusals count as attempts that reached it (`ballast-attempts: 1`), else as refused before sending.
    refusals_reach_it: Arc<AtomicBool>,
    acted: Arc<Mutex<Vec<String>>>,
    tries: Arc<AtomicU32>,
    /// While set, an attempt waits here (to see it `in_progress`).
    hold: Arc<tokio::sync::Semaphore>,
    holding: Arc<AtomicBool>,
}

impl Upstream {
    fn acted(&self) -> Vec<String> {
        self.acted.lock().unwrap().clone()
    }

    async fn serve(&self, request: Request) -> Response<Body> {
        self.tries.fetch_add(1, Ordering::SeqCst);
        let key = request.headers()["idempotency-key"].to_str().unwrap().to_owned();
        let body = axum::body::to_bytes(request.into_body(), 1 << 20).await.unwrap();
        if self.holding.load(Ordering::SeqCst) {
            let _ = self.hold.acquire().await.unwrap();
        }
        if !self.open.load(Ordering::SeqCst) {
            let mut response = Response::new(Body::from("busy"));
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            let attempts = if self.refusals_reach_it.load(Ordering::SeqCst) {
                "1"
            } else {
                "0"
            };
            response
                .headers_mut()
                .insert("ballast-attempts", attempts.parse().unwrap());
            response.extensions_mut().insert(NotStored);
            return response;
        }
        self.acted.lock().unwrap().push(key);
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = StatusCode::CREATED;
        response
            .headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        response
    }
}

/// The live route: the upstream, and a refusal marked `Defer` when the caller asked (`prefer: respond-async`),
/// on queue `refunds` with the class in `x-class`.
async fn live(State(upstream): State<Upstream>, request: Request) -> Response<Body> {
    let asks = request.headers().contains_key("prefer");
    let class: Priority = (request.headers().get("x-class"))
        .map_or(Priority::Critical, |v| v.to_str().unwrap().parse().unwrap());
    let mut response = upstream.serve(request).await;
    if asks && response.extensions().get::<NotStored>().is_some() {
        let defer = Defer::new("refunds", Duration::from_secs(30))
            .priority(class)
            .max_attempts(3);
        response.extensions_mut().insert(defer);
    }
    response
}

struct Fixture {
    app: Router,
    upstream: Upstream,
    deferred: Deferred,
}

fn fixture(store: Arc<dyn IdempotencyStore>, ttl_backoff: Duration, concurrency: usize) -> Fixture {
    let upstream = Upstream {
        open: Arc::default(),
        refusals_reach_it: Arc::default(),
        acted: Arc::default(),
        tries: Arc::default(),
        hold: Arc::new(tokio::sync::Semaphore::new(0)),
        holding: Arc::default(),
    };
    let worked = upstream.clone();
    let handler = tower::service_fn(move |request: Request| {
        let upstream = worked.clone();
        async move { Ok::<_, std::convert::Infallible>(upstream.serve(request).await) }
    });
    let deferred = Deferred::builder(Arc::clone(&store))
        .unwrap()
        .handler("refunds", Handler::new(handler).concurrency(concurrency))
        .concurrency(concurrency)
        .timing(Duration::from_millis(300), Duration::from_millis(20))
        .backoff(Backoff::full_jitter(ttl_backoff, ttl_backoff).unwrap())
        .build();
    let layer = IdempotencyLayer::builder(Arc::clone(&store))
        .deferred(&deferred)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/refunds", post(live))
        .layer(layer)
        .route(
            "/operations/{key}",
            operations_route(store, vec!["POST /refunds".to_owned()]),
        )
        .with_state(upstream.clone());
    Fixture {
        app,
        upstream,
        deferred,
    }
}

fn asking(key: &str, class: &str) -> http::Request<Body> {
    let mut request = post_json("/refunds", Some(key), r#"{"amount":5}"#);
    request
        .headers_mut()
        .insert("prefer", "respond-async".parse().unwrap());
    request.headers_mut().insert("x-class", class.parse().unwrap());
    request
}

async fn status(app: &Router, key: &str) -> Value {
    let request = http::Request::get(format!("/operations/{key}"))
        .body(Body::empty())
        .unwrap();
    send(app, request).await.json()
}

/// Polls `key`'s status until `done` says so, within [`PATIENCE`]; returns every distinct status seen, in order.
async fn poll_until(app: &Router, key: &str, done: &str) -> Vec<String> {
    let give_up = ballast::clock::now() + PATIENCE;
    let mut seen: Vec<String> = Vec::new();
    loop {
        let now = status(app, key).await["status"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        if seen.last() != Some(&now) {
            seen.push(now.clone());
        }
        if now == done {
            return seen;
        }
        assert!(
            ballast::clock::now() < give_up,
            "{key} never became {done}: saw {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn start(fixture: &Fixture) -> Workers {
    fixture.deferred.start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_that_can_wait_is_accepted_then_completed_once() {
    let f = fixture(sqlite().await, Duration::from_millis(50), 2);
    let answer = send(&f.app, asking("k1", "critical")).await;
    assert_eq!(answer.status(), 202);
    assert_eq!(answer.header("location"), Some("/operations/k1"));
    assert_eq!(answer.header("preference-applied"), Some("respond-async"));
    let body = answer.json();
    assert_eq!(
        (body["status"].as_str(), body["queue"].as_str()),
        (Some("queued"), Some("refunds"))
    );
    assert_eq!(body["priority"], "critical");
    // Retried while it waits: the same operation, never a second one.
    assert_eq!(send(&f.app, asking("k1", "critical")).await.status(), 202);
    let plain = send(&f.app, post_json("/refunds", Some("k1"), r#"{"amount":5}"#)).await;
    assert_eq!(plain.status(), 202, "a retry without the header is told the same");
    assert_eq!(status(&f.app, "k1").await["status"], "queued");
    // Without the header nothing is deferred: the refusal is the answer and the key is free.
    let refused = send(&f.app, post_json("/refunds", Some("k2"), r#"{"amount":5}"#)).await;
    assert_eq!(refused.status(), 503);
    f.upstream.open.store(true, Ordering::SeqCst);
    let _workers = start(&f);
    poll_until(&f.app, "k1", "completed").await;
    let done = status(&f.app, "k1").await;
    assert_eq!(done["result"]["status"], 201);
    assert_eq!(done["result"]["body"]["amount"], 5);
    assert_eq!(f.upstream.acted(), ["k1"], "one execution");
    let replay = send(&f.app, asking("k1", "critical")).await;
    assert_eq!(replay.status(), 201, "the key replays the deferred answer");
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(f.upstream.acted(), ["k1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poller_sees_each_state_in_order() {
    let f = fixture(sqlite().await, Duration::from_millis(50), 1);
    assert_eq!(send(&f.app, asking("k1", "critical")).await.status(), 202);
    f.upstream.open.store(true, Ordering::SeqCst);
    f.upstream.holding.store(true, Ordering::SeqCst);
    assert_eq!(status(&f.app, "k1").await["status"], "queued");
    let _workers = start(&f);
    let seen = poll_until(&f.app, "k1", "in_progress").await;
    assert!(
        seen == ["queued", "in_progress"] || seen == ["in_progress"],
        "{seen:?}"
    );
    f.upstream.hold.add_permits(1);
    let seen = poll_until(&f.app, "k1", "completed").await;
    assert_eq!(seen.last().map(String::as_str), Some("completed"));
    assert!(
        seen.iter().all(|s| s == "in_progress" || s == "completed"),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_higher_class_is_drained_first() {
    let f = fixture(sqlite().await, Duration::from_millis(50), 1);
    for n in 0..3 {
        assert_eq!(
            send(&f.app, asking(&format!("low-{n}"), "sheddable"))
                .await
                .status(),
            202
        );
    }
    for n in 0..3 {
        assert_eq!(
            send(&f.app, asking(&format!("pay-{n}"), "critical_plus"))
                .await
                .status(),
            202
        );
    }
    f.upstream.open.store(true, Ordering::SeqCst);
    let _workers = start(&f);
    for n in 0..3 {
        poll_until(&f.app, &format!("low-{n}"), "completed").await;
    }
    let acted = f.upstream.acted();
    assert_eq!(acted.len(), 6, "each once: {acted:?}");
    assert!(
        acted[..3].iter().all(|k| k.starts_with("pay-")),
        "payments first: {acted:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_that_reach_the_upstream_run_out_and_release_the_key() {
    let f = fixture(sqlite().await, Duration::from_millis(20), 2);
    f.upstream.refusals_reach_it.store(true, Ordering::SeqCst);
    assert_eq!(send(&f.app, asking("k1", "critical")).await.status(), 202);
    let _workers = start(&f);
    poll_until(&f.app, "k1", "failed").await;
    let failed = status(&f.app, "k1").await;
    assert_eq!(failed["attempts"], 3, "max_attempts deferred attempts: {failed}");
    assert_eq!(failed["last"]["status"], 503);
    assert!(f.upstream.acted().is_empty());
    // Nothing acted: the key is free, and a later call runs.
    f.upstream.open.store(true, Ordering::SeqCst);
    let later = send(&f.app, post_json("/refunds", Some("k1"), r#"{"amount":5}"#)).await;
    assert_eq!(later.status(), 201);
    assert_eq!(
        status(&f.app, "k1").await["status"],
        "completed",
        "the later call's record, not the old end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_sending_never_use_up_attempts_and_the_ttl_ends_it() {
    let store = sqlite().await;
    let f = fixture(Arc::clone(&store), Duration::from_millis(20), 2);
    let mut request = asking("k1", "critical");
    request.headers_mut().insert("x-short", "1".parse().unwrap());
    // A short ttl through the layer: the handler's marker says 30 s, so defer this one by hand-made marker.
    let app = Router::new()
        .route(
            "/refunds",
            post(|State(upstream): State<Upstream>, request: Request| async move {
                let mut response = upstream.serve(request).await;
                response
                    .extensions_mut()
                    .insert(Defer::new("refunds", Duration::from_millis(600)));
                response
            }),
        )
        .layer(
            IdempotencyLayer::builder(Arc::clone(&store))
                .deferred(&f.deferred)
                .build()
                .unwrap(),
        )
        .route(
            "/operations/{key}",
            operations_route(store, vec!["POST /refunds".to_owned()]),
        )
        .with_state(f.upstream.clone());
    assert_eq!(send(&app, request).await.status(), 202);
    let _workers = start(&f);
    poll_until(&app, "k1", "expired").await;
    let tries = f.upstream.tries.load(Ordering::SeqCst);
    let ended = status(&app, "k1").await;
    assert!(
        tries > 3,
        "tried until the ttl, attempts unspent: {tries} tries, {ended}"
    );
    assert_eq!(status(&app, "k1").await["attempts"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_acted_is_never_deferred() {
    let f = fixture(sqlite().await, Duration::from_millis(20), 2);
    f.upstream.open.store(true, Ordering::SeqCst);
    let answer = f.app.clone().oneshot(asking("k1", "critical")).await.unwrap();
    assert_eq!(answer.status(), 201);
    assert_eq!(f.upstream.acted(), ["k1"]);
}
