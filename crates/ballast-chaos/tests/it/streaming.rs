//! The mock model over real HTTP: plain and streamed answers, the model list, injected errors in OpenAI's
//! format, and stream cuts.

use crate::support;

use ballast_chaos::{EndpointProfile, Profile, ScriptStep, StreamFaults, spawn};
use futures::StreamExt as _;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::*;

fn conversation(stream: bool) -> Value {
    json!({
        "model": "mock",
        "stream": stream,
        "messages": [{"role": "user", "content": "Where is my order?"}],
    })
}

/// The body as sent, and the operation id the server gives it (it names no `op`).
fn request(stream: bool) -> (Vec<u8>, String) {
    let body = serde_json::to_vec(&conversation(stream)).expect("json");
    let op = body_op(&body);
    (body, op)
}

async fn post_chat(server: &ballast_chaos::ChaosServer, body: Vec<u8>) -> reqwest::Response {
    client(PATIENCE)
        .post(server.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("answer")
}

/// The body read to its end, or as far as it goes, and whether it ended with an error.
async fn read_stream(response: reqwest::Response) -> (String, bool) {
    let mut text = String::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        match chunk {
            Ok(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
            Err(_) => return (text, true),
        }
    }
    (text, false)
}

#[tokio::test]
async fn a_normal_stream_ends_with_done() {
    let server = spawn(Profile::default()).await.expect("server");
    let (body, _) = request(true);
    let response = post_chat(&server, body).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let (text, failed) = read_stream(response).await;
    assert!(!failed, "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert_eq!(bucket(&server, "model", "200").await, 1);
}

#[tokio::test]
async fn a_plain_answer_is_a_chat_completion_and_models_are_listed() {
    let server = spawn(Profile::default()).await.expect("server");
    let (body, _) = request(false);
    let response = post_chat(&server, body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let completion: Value = response.json().await.expect("json");
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(get_json(&server, "/v1/models").await["object"], "list");
}

#[tokio::test]
async fn an_injected_error_is_in_openai_format_with_the_scripted_status() {
    let (body, op) = request(false);
    let steps: &[ScriptStep] = &[ScriptStep::Status(529)];
    let server = spawn(profile("model", EndpointProfile::default(), &[(&op, steps)]))
        .await
        .expect("server");
    let response = post_chat(&server, body).await;
    assert_eq!(response.status().as_u16(), 529);
    let error: Value = response.json().await.expect("json");
    assert!(error["error"]["message"].is_string(), "{error}");
    assert_eq!(bucket(&server, "model", "529").await, 1);
}

#[tokio::test]
async fn invalid_json_is_a_400_in_openai_format() {
    let server = spawn(Profile::default()).await.expect("server");
    let response = post_chat(&server, b"{not json".to_vec()).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error: Value = response.json().await.expect("json");
    assert_eq!(error["error"]["type"], "invalid_request_error");
}

// A cut is drawn, not scripted (`ScriptStep` has no cut), so this needs the real `draw`.
#[tokio::test]
async fn a_cut_stream_ends_without_done() {
    let mut profile = Profile::default();
    let stream = StreamFaults {
        cut: 1.0,
        cut_after_chunks: 1,
        ..StreamFaults::default()
    };
    profile.endpoints.insert(
        "model".into(),
        EndpointProfile {
            stream,
            ..EndpointProfile::default()
        },
    );
    let server = spawn(profile).await.expect("server");
    let (body, _) = request(true);
    let response = post_chat(&server, body).await;
    assert_eq!(response.status(), StatusCode::OK, "the stream starts");
    let (text, failed) = read_stream(response).await;
    assert!(failed, "the connection is cut: {text}");
    assert!(!text.contains("[DONE]"), "{text}");
    assert_eq!(
        text.matches("data: ").count(),
        1,
        "one chunk before the cut: {text}"
    );
    assert_eq!(bucket(&server, "model", "stream_cut").await, 1);
}
