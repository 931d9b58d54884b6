//! Embeddings: OpenAI's shape, the same vector for the same input, unit length, shortening, base64 and refusals.

use serde_json::{Value, json};

use super::base64::tests::decode;
use super::*;

fn answer(request: Value) -> Value {
    embeddings(&request).expect("an answer")
}

fn floats(embedding: &Value) -> Vec<f32> {
    embedding
        .as_array()
        .expect("a list of numbers")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

fn length(vector: &[f32]) -> f32 {
    vector.iter().map(|x| x * x).sum::<f32>().sqrt()
}

#[test]
fn the_answer_has_openais_shape() {
    let body = answer(json!({"model": "text-embedding-3-small", "input": ["Refund order 1", "Pay order 2"]}));
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], "text-embedding-3-small");
    let data = body["data"].as_array().expect("data");
    assert_eq!(data.len(), 2);
    for (index, item) in data.iter().enumerate() {
        assert_eq!(item["object"], "embedding");
        assert_eq!(item["index"], index);
        let vector = floats(&item["embedding"]);
        assert_eq!(vector.len(), DEFAULT_DIMENSIONS);
        assert!((length(&vector) - 1.0).abs() < 1e-5, "{vector:?}");
    }
    // "Refund order 1" (14 characters) is 4 tokens, "Pay order 2" (11) 3.
    assert_eq!(body["usage"], json!({"prompt_tokens": 7, "total_tokens": 7}));
    assert_eq!(answer(json!({"input": "x"}))["model"], "mock");
}

#[test]
fn the_same_input_gives_the_same_vector_and_another_input_another() {
    let one = answer(json!({"input": "Refund order 1"}));
    assert_eq!(
        one,
        answer(json!({"input": ["Refund order 1"], "user": "ignored"}))
    );
    let vector = floats(&one["data"][0]["embedding"]);
    assert_eq!(vector, embedding("Refund order 1", DEFAULT_DIMENSIONS));
    assert_ne!(vector, embedding("Refund order 2", DEFAULT_DIMENSIONS));
    // A token array is its own input, not the text of its numbers.
    let tokens = answer(json!({"input": [1, 2, 3]}));
    assert_eq!(tokens["data"].as_array().map(Vec::len), Some(1));
    assert_eq!(tokens["usage"]["prompt_tokens"], 3);
    assert_ne!(
        floats(&tokens["data"][0]["embedding"]),
        embedding("[1,2,3]", DEFAULT_DIMENSIONS)
    );
    let arrays = answer(json!({"input": [[1, 2, 3], [4]]}));
    assert_eq!(arrays["data"][0], tokens["data"][0]);
    assert_eq!(arrays["usage"]["prompt_tokens"], 4);
}

/// The vector is pinned: a change to the hash or the scaling changes every cached vector of every user.
#[test]
fn the_vector_is_pinned() {
    let vector = embedding("ballast", 4);
    let again = embedding("ballast", 4);
    assert_eq!(vector, again);
    let pinned: Vec<String> = vector.iter().map(|x| format!("{x:.6}")).collect();
    assert_eq!(pinned, PINNED);
}

const PINNED: [&str; 4] = ["0.839060", "-0.485497", "-0.185262", "0.161088"];

#[test]
fn dimensions_shorten_the_vector_and_scale_it_back_to_length_one() {
    let long = embedding("Refund order 1", 40);
    assert_eq!(long.len(), 40);
    for dimensions in [1, 3, 8, 9, 17] {
        let short = embedding("Refund order 1", dimensions);
        assert_eq!(short.len(), dimensions);
        assert!((length(&short) - 1.0).abs() < 1e-5);
        let prefix_length = length(&long[..dimensions]);
        for (s, l) in short.iter().zip(&long) {
            assert!((s - l / prefix_length).abs() < 1e-5, "{dimensions}: {s} vs {l}");
        }
    }
    let body = answer(json!({"input": "a", "dimensions": 3}));
    assert_eq!(floats(&body["data"][0]["embedding"]).len(), 3);
}

#[test]
fn base64_is_the_little_endian_f32_bytes_of_the_same_vector() {
    let float = answer(json!({"input": ["a", "b"], "dimensions": 5}));
    let encoded = answer(json!({"input": ["a", "b"], "dimensions": 5, "encoding_format": "base64"}));
    for index in 0..2 {
        let text = encoded["data"][index]["embedding"]
            .as_str()
            .expect("a base64 string");
        let bytes = decode(text).expect("base64");
        let decoded: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(decoded, floats(&float["data"][index]["embedding"]));
    }
    assert_eq!(
        answer(json!({"input": "a", "encoding_format": "float"})),
        answer(json!({"input": "a"}))
    );
}

#[test]
fn what_cannot_be_embedded_is_refused_naming_the_field() {
    let message = |request: Value| match embeddings(&request) {
        Err(ModelError::InvalidRequest(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(message(json!({})).contains("'input'"));
    assert!(message(json!([])).contains("JSON object"));
    assert!(message(json!({"input": []})).contains("empty array"));
    assert!(message(json!({"input": ""})).contains("empty string"));
    assert!(message(json!({"input": ["a", 5]})).contains("'input[1]'"));
    assert!(message(json!({"input": ["a", []]})).contains("'input[1]'"));
    assert!(message(json!({"input": [[1, "x"]]})).contains("'input[0][1]'"));
    assert!(message(json!({"input": [1.5]})).contains("'input[0]'"));
    assert!(message(json!({"input": "a", "dimensions": 0})).contains("'dimensions'"));
    assert!(message(json!({"input": "a", "dimensions": 3073})).contains("'dimensions'"));
    assert!(message(json!({"input": "a", "encoding_format": "hex"})).contains("'encoding_format'"));
    let many: Vec<&str> = vec!["a"; MAX_INPUTS + 1];
    assert!(message(json!({"input": many})).contains("maximum length"));
}
