//! A refund API of your own, made safe to retry with `IdempotencyLayer` (axum middleware), on the embedded SQLite
//! store: the handler runs once per `Idempotency-Key`, every retry gets the stored answer back, a client can ask
//! what became of its operation, and a shutdown waits for the requests whose callers went away.
//!
//! Run: `cargo run -p ballast --example refund_service`. It serves on 127.0.0.1 (a free port), sends the same
//! refund three times as a timed-out agent would, and prints what came back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use ballast::idempotency::IdempotencyLayer;
use serde_json::{Value, json};

/// The side effect: counts how many refunds really happened.
async fn create_refund(
    State(executed): State<Arc<AtomicU32>>,
    Json(order): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let n = executed.fetch_add(1, Ordering::SeqCst) + 1;
    (
        StatusCode::CREATED,
        Json(json!({"refund": format!("re_{n}"), "order": order["order_id"]})),
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `sqlite://ballast.db` keeps records across restarts; in memory is enough for a demonstration.
    let store = ballast::idempotency::store::open("sqlite::memory:", Default::default()).await?;
    let layer = IdempotencyLayer::new(store);
    let executed = Arc::new(AtomicU32::new(0));
    let app = Router::new()
        .route("/refunds", post(create_refund))
        .with_state(Arc::clone(&executed))
        .layer(layer.clone())
        // GET /operations/{key}: in_progress, completed, outcome_unknown or not_found (for clients that poll).
        .route(
            "/operations/{key}",
            layer.operations_route(vec!["POST /refunds".to_owned()]),
        );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                stopped.await.ok();
            })
            .await
    });
    println!("refund service on {base}\n");

    let client = reqwest::Client::new();
    for attempt in 1..=3 {
        let answer = client
            .post(format!("{base}/refunds"))
            .header("idempotency-key", "refund-order-1234")
            .header("content-type", "application/json")
            .body(r#"{"order_id": "1234", "amount": 20}"#)
            .timeout(Duration::from_secs(5))
            .send()
            .await?;
        let replayed = answer.headers().get("idempotent-replayed").is_some();
        println!(
            "attempt {attempt}: {} {}{}",
            answer.status(),
            answer.text().await?,
            if replayed {
                "  (replayed: not run again)"
            } else {
                ""
            }
        );
    }
    let status = client
        .get(format!("{base}/operations/refund-order-1234"))
        .send()
        .await?
        .text()
        .await?;
    println!("\nGET /operations/refund-order-1234: {status}");
    println!("refunds executed: {}", executed.load(Ordering::SeqCst));

    // Shutdown: stop taking requests, then wait for any request still running for a caller that left.
    stop.send(()).ok();
    server.await??;
    let drained = ballast::background::drain(Duration::from_secs(10)).await;
    println!("background work finished at shutdown: {}", drained.finished);
    Ok(())
}
