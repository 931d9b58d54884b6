//! `POST /admin/profile` over real HTTP: a swap starts afresh, a bad profile changes nothing.

use crate::support;

use ballast_chaos::{KeyMode, Profile, ScriptStep, spawn};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

const TOOL: &str = "create_refund";

#[tokio::test]
async fn a_profile_swap_resets_the_ledger_and_the_stats() {
    let server = spawn(profile(TOOL, keyed(KeyMode::None), &[]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    for _ in 0..2 {
        call(&client, &server, TOOL, &refund("o1", 500), None)
            .await
            .expect("answer");
    }
    assert_eq!(get_json(&server, "/ledger").await["totals"]["duplicates"], 1);
    let swapped = client
        .post(server.url("/admin/profile"))
        .json(&json!({"preset": "none", "seed": 7}))
        .send()
        .await
        .expect("answer");
    assert_eq!(swapped.status(), StatusCode::OK);
    let ledger = get_json(&server, "/ledger").await;
    assert_eq!(
        ledger["totals"],
        json!({"executions": 0, "ops": 0, "duplicates": 0})
    );
    assert_eq!(get_json(&server, "/stats").await["endpoints"], json!({}));
    call(&client, &server, TOOL, &refund("o1", 500), None)
        .await
        .expect("answer");
    assert_eq!(executions(&server, "o1").await, 1);
}

#[tokio::test]
async fn a_bad_profile_is_400_and_the_old_profile_stays() {
    let steps: &[ScriptStep] = &[ScriptStep::Status(503)];
    let server = spawn(profile(TOOL, keyed(KeyMode::None), &[("o1", steps)]))
        .await
        .expect("server");
    let client = client(PATIENCE);
    let refused = client
        .post(server.url("/admin/profile"))
        .json(&json!({"preset": "no-such-preset"}))
        .send()
        .await
        .expect("answer");
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let body: Value = refused.json().await.expect("json");
    assert_eq!(body["error"]["code"], "invalid_profile");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no-such-preset")),
        "{body}"
    );
    let still = call(&client, &server, TOOL, &refund("o1", 500), None)
        .await
        .expect("answer");
    assert_eq!(
        still.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the scripted profile still applies"
    );
}

#[tokio::test]
async fn healthz_answers() {
    let server = spawn(ballast_chaos::Profile::default()).await.expect("server");
    assert_eq!(get_json(&server, "/healthz").await["status"], "ok");
}

#[tokio::test]
async fn a_toml_profile_swap_applies_its_faults_and_a_bad_one_names_the_field() {
    let server = spawn(ballast_chaos::Profile::default()).await.expect("server");
    let client = client(PATIENCE);
    let toml = r#"
        seed = 3
        [endpoints.create_refund]
        key_mode = "none"
        [[scripts]]
        endpoint = "create_refund"
        op = "o1"
        steps = ["503", "ok"]
    "#;
    let swapped = client
        .post(server.url("/admin/profile"))
        .header("content-type", "application/toml")
        .body(toml)
        .send()
        .await
        .expect("answer");
    assert_eq!(swapped.status(), StatusCode::OK);
    let first = call(&client, &server, TOOL, &refund("o1", 500), None)
        .await
        .expect("answer");
    assert_eq!(
        first.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the swapped-in script applies"
    );
    let second = call(&client, &server, TOOL, &refund("o1", 500), None)
        .await
        .expect("answer");
    assert_eq!(second.status(), StatusCode::OK);

    let refused = client
        .post(server.url("/admin/profile"))
        .header("content-type", "application/toml")
        .body("[endpoints.model]\nerrors = { 503 = 1.5 }\n")
        .send()
        .await
        .expect("answer");
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let body: Value = refused.json().await.expect("json");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("endpoints.model.errors.503"), "{body}");
}

#[tokio::test]
async fn echo_answers_every_header_and_the_body_it_got() {
    let server = spawn(Profile::default()).await.expect("server");
    let answer: Value = client(PATIENCE)
        .post(server.url("/echo"))
        .header("x-one", "1")
        .header("authorization", "Bearer seen")
        .json(&json!({"order_id": "A-1"}))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("json");
    assert_eq!(answer["headers"]["x-one"], json!(["1"]));
    assert_eq!(answer["headers"]["authorization"], json!(["Bearer seen"]));
    assert_eq!(answer["body"], json!({"order_id": "A-1"}));
    assert_eq!(answer["raw"], r#"{"order_id":"A-1"}"#);
}
