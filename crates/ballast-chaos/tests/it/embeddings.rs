//! `/v1/embeddings` over the router: OpenAI's shape, and the front door and faults of its own endpoint.

use crate::support;

use std::time::Duration;

use ballast_chaos::{
    EndpointProfile, Outage, OutageAnswer, Profile, ScriptStep, embedding, error_body, router,
};
use serde_json::json;
use support::body_op;
use support::oneshot::{get, post};

#[tokio::test(start_paused = true)]
async fn embeddings_answer_in_openais_shape() {
    let server = router(Profile::default());
    let body = json!({"model": "text-embedding-3-small", "input": ["Refund order 1", "Pay order 2"], "dimensions": 4});
    let answer = post(&server, "/v1/embeddings", &body).await;
    assert_eq!(answer.status, 200);
    let answer = answer.json();
    assert_eq!(answer["object"], "list");
    assert_eq!(answer["model"], "text-embedding-3-small");
    assert_eq!(answer["data"][1]["index"], 1);
    let vector: Vec<f32> = answer["data"][0]["embedding"]
        .as_array()
        .expect("floats")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect();
    assert_eq!(vector, embedding("Refund order 1", 4));
    let base64 = post(
        &server,
        "/v1/embeddings",
        &json!({"input": "a", "encoding_format": "base64"}),
    )
    .await
    .json();
    // 8 floats of 4 bytes: 32 bytes, 44 characters of base64.
    assert_eq!(base64["data"][0]["embedding"].as_str().map(str::len), Some(44));
    let stats = get(&server, "/stats").await.json();
    assert_eq!(stats["endpoints"]["embeddings"]["statuses"]["200"], 2, "{stats}");
    let refused = post(&server, "/v1/embeddings", &json!({"input": []})).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["error"]["type"], "invalid_request_error");
}

#[tokio::test(start_paused = true)]
async fn embeddings_meet_their_own_faults_keyed_by_the_body() {
    let body = json!({"input": "Refund order 1"});
    let op = body_op(body.to_string().as_bytes());
    let steps = vec![
        ScriptStep::Status(503),
        ScriptStep::InsufficientQuota,
        ScriptStep::Ok,
    ];
    let mut profile = Profile::default();
    profile.scripts.push(ballast_chaos::Script {
        endpoint: "embeddings".into(),
        op,
        steps,
    });
    let server = router(profile);
    let first = post(&server, "/v1/embeddings", &body).await;
    assert_eq!(
        (first.status.as_u16(), first.json()),
        (503, error_body(503, false))
    );
    let second = post(&server, "/v1/embeddings", &body).await;
    assert_eq!(
        (second.status.as_u16(), second.json()),
        (429, error_body(429, true))
    );
    assert_eq!(post(&server, "/v1/embeddings", &body).await.status, 200);
    // Chat requests are another endpoint: the script does not reach them.
    let chat = json!({"messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(post(&server, "/v1/chat/completions", &chat).await.status, 200);
}

#[tokio::test(start_paused = true)]
async fn an_outage_of_embeddings_answers_503_with_the_time_left() {
    let mut profile = Profile::default();
    profile.endpoints.insert(
        "embeddings".into(),
        EndpointProfile {
            outages: vec![Outage {
                start: Duration::ZERO,
                end: Duration::from_secs(5),
                answer: OutageAnswer::RetryAfter,
            }],
            ..EndpointProfile::default()
        },
    );
    let server = router(profile);
    let down = post(&server, "/v1/embeddings", &json!({"input": "a"})).await;
    assert_eq!(down.status, 503);
    assert_eq!(down.headers["retry-after"], "5");
    assert_eq!(down.json(), error_body(503, false));
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(
        post(&server, "/v1/embeddings", &json!({"input": "a"}))
            .await
            .status,
        200
    );
}
