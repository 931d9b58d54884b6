//! The tools' key modes over real HTTP: what a retry with the same `Idempotency-Key` does in each mode, and
//! what the ledger shows.

use crate::support;

use std::time::Duration;

use ballast_chaos::{KeyMode, LoseMode, ScriptStep, spawn};
use reqwest::StatusCode;
use serde_json::Value;
use support::*;

const TOOL: &str = "create_refund";

fn replayed(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true")
}

#[tokio::test]
async fn mode_none_ignores_the_key_and_executes_every_duplicate() {
    let server = spawn(profile(TOOL, keyed(KeyMode::None), &[]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    for _ in 0..2 {
        let response = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
            .await
            .expect("answer");
        assert_eq!(response.status(), StatusCode::OK);
        assert!(!replayed(&response));
    }
    let ledger = get_json(&server, "/ledger").await;
    assert_eq!(ledger["ops"]["o1"]["executions"], 2);
    assert_eq!(ledger["ops"]["o1"]["keys"], serde_json::json!(["k1"]));
    assert_eq!(ledger["ops"]["o1"]["tool"], TOOL);
    assert_eq!(ledger["totals"]["duplicates"], 1);
}

#[tokio::test]
async fn keyed_replays_a_success_without_executing_again() {
    let server = spawn(profile(TOOL, keyed(KeyMode::Keyed), &[]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let first = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert!(!replayed(&first));
    let first: Value = first.json().await.expect("json");
    let second = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(second.status(), StatusCode::OK);
    assert!(replayed(&second));
    assert_eq!(second.json::<Value>().await.expect("json"), first);
    assert_eq!(executions(&server, "o1").await, 1);
    assert_eq!(get_json(&server, "/stats").await["endpoints"][TOOL]["replays"], 1);
}

#[tokio::test]
async fn keyed_executes_again_after_a_failure_and_then_replays_the_success() {
    let script: &[ScriptStep] = &[ScriptStep::Status(503), ScriptStep::Ok];
    let server = spawn(profile(TOOL, keyed(KeyMode::Keyed), &[("o1", script)]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let failed = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(failed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        executions(&server, "o1").await,
        0,
        "an injected status executes nothing"
    );
    let retried = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(retried.status(), StatusCode::OK);
    assert!(
        !replayed(&retried),
        "the failure was not stored: the retry executes"
    );
    let again = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert!(replayed(&again));
    assert_eq!(executions(&server, "o1").await, 1);
}

#[tokio::test]
async fn keyed_replays_errors_replays_an_injected_503() {
    let script: &[ScriptStep] = &[ScriptStep::Status(503), ScriptStep::Ok];
    let faults = keyed(KeyMode::KeyedReplaysErrors);
    let server = spawn(profile(TOOL, faults, &[("o1", script)]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let failed = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(failed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(!replayed(&failed));
    let retried = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(retried.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(replayed(&retried), "the stored 503 is replayed");
    assert_eq!(executions(&server, "o1").await, 0);
    let fresh = call(&client, &server, TOOL, &refund("o1", 500), Some("k2"))
        .await
        .expect("answer");
    assert_eq!(
        fresh.status(),
        StatusCode::OK,
        "a new key executes (attempt 3 is past the script)"
    );
}

#[tokio::test]
async fn keyed_replays_errors_does_not_store_a_rate_limit() {
    let script: &[ScriptStep] = &[ScriptStep::Status(429), ScriptStep::Ok];
    let faults = keyed(KeyMode::KeyedReplaysErrors);
    let server = spawn(profile(TOOL, faults, &[("o1", script)]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let limited = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let retried = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(retried.status(), StatusCode::OK);
    assert!(!replayed(&retried));
    assert_eq!(executions(&server, "o1").await, 1);
}

#[tokio::test]
async fn a_key_reused_with_a_different_body_is_422_in_both_keyed_modes() {
    for mode in [KeyMode::Keyed, KeyMode::KeyedReplaysErrors] {
        let server = spawn(profile(TOOL, keyed(mode), &[])).await.expect("server");
        let client = client(PATIENCE);
        let first = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
            .await
            .expect("answer");
        assert_eq!(first.status(), StatusCode::OK);
        let other = call(&client, &server, TOOL, &refund("o1", 900), Some("k1"))
            .await
            .expect("answer");
        assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY, "{mode:?}");
        let body: Value = other.json().await.expect("json");
        assert_eq!(body["error"]["code"], "idempotency_key_reused");
        assert_eq!(executions(&server, "o1").await, 1, "{mode:?}");
    }
}

#[tokio::test]
async fn the_same_body_with_keys_in_another_order_is_the_same_request() {
    let server = spawn(profile(TOOL, keyed(KeyMode::Keyed), &[]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    let reordered = client
        .post(server.url("/tools/create_refund"))
        .header("idempotency-key", "k1")
        .header("content-type", "application/json")
        .body(r#"{ "amount": 500, "order_id": "A-1001", "op": "o1" }"#)
        .send()
        .await
        .expect("answer");
    assert_eq!(reordered.status(), StatusCode::OK);
    assert!(replayed(&reordered));
}

#[tokio::test]
async fn a_key_is_in_use_while_its_first_request_hangs_and_free_once_it_ends() {
    let script: &[ScriptStep] = &[ScriptStep::Hang];
    let server = spawn(profile(TOOL, keyed(KeyMode::Keyed), &[("o1", script)]))
        .await
        .expect("server");
    let hanging = {
        let (client, url) = (client(PATIENCE * 2), server.url("/tools/create_refund"));
        let request = client
            .post(url)
            .header("idempotency-key", "k1")
            .json(&refund("o1", 500));
        tokio::spawn(request.send())
    };
    eventually("the first request to hang", || async {
        in_flight(&server, TOOL).await == 1
    })
    .await;
    let client = client(PATIENCE);
    let busy = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(busy.status(), StatusCode::CONFLICT);
    assert!(busy.headers().contains_key("retry-after"));
    let body: Value = busy.json().await.expect("json");
    assert_eq!(body["error"]["code"], "idempotency_key_in_use");
    hanging.abort();
    eventually("the key to be released when the client went away", || async {
        let retry = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
            .await
            .expect("answer");
        retry.status() == StatusCode::OK
    })
    .await;
    assert_eq!(executions(&server, "o1").await, 1);
    assert_eq!(bucket(&server, TOOL, "hang").await, 1);
}

#[tokio::test]
async fn commit_then_lose_executes_once_and_a_keyed_retry_replays_it() {
    let script: &[ScriptStep] = &[ScriptStep::CommitThenLose];
    let faults = losing(KeyMode::Keyed, LoseMode::Hang);
    let server = spawn(profile(TOOL, faults, &[("o1", script)]))
        .await
        .expect("server");
    let impatient = client(Duration::from_millis(300));
    let lost = call(&impatient, &server, TOOL, &refund("o1", 500), Some("k1")).await;
    assert!(lost.expect_err("the answer is lost").is_timeout());
    assert_eq!(executions(&server, "o1").await, 1, "the side effect happened");
    let client = client(PATIENCE);
    let retried = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(retried.status(), StatusCode::OK);
    assert!(replayed(&retried));
    assert_eq!(
        executions(&server, "o1").await,
        1,
        "the retry did not execute again"
    );
    assert_eq!(bucket(&server, TOOL, "commit_then_lose").await, 1);
}

#[tokio::test]
async fn commit_then_lose_without_deduplication_is_the_double_refund() {
    let script: &[ScriptStep] = &[ScriptStep::CommitThenLose];
    let faults = losing(KeyMode::None, LoseMode::Reset);
    let server = spawn(profile(TOOL, faults, &[("o1", script)]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let lost = call(&client, &server, TOOL, &refund("o1", 500), Some("k1")).await;
    let err = lost.expect_err("the connection is reset");
    assert!(err.status().is_none() && !err.is_timeout(), "{err:?}");
    let retried = call(&client, &server, TOOL, &refund("o1", 500), Some("k1"))
        .await
        .expect("answer");
    assert_eq!(retried.status(), StatusCode::OK);
    let ledger = get_json(&server, "/ledger").await;
    assert_eq!(ledger["ops"]["o1"]["executions"], 2);
    assert_eq!(ledger["totals"]["duplicates"], 1);
}

#[tokio::test]
async fn a_malformed_key_is_refused_before_anything_executes() {
    let server = spawn(profile(TOOL, keyed(KeyMode::Keyed), &[]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let refused = call(&client, &server, TOOL, &refund("o1", 500), Some(&"k".repeat(300)))
        .await
        .expect("answer");
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    assert_eq!(executions(&server, "o1").await, 0);
}
