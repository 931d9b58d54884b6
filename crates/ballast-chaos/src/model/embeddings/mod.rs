//! The mock embeddings (`POST /v1/embeddings`) as pure functions: deterministic unit vectors in OpenAI's shape.
//!
//! # Why hashed vectors
//! What a client of embeddings needs from a mock — a cache keyed by them, a retriever, a gateway forwarding them —
//! is vectors that are the same for the same input on every run and machine and differ between inputs, not
//! vectors that mean anything. So each vector is drawn from SHA-256 of its input (the bytes
//! `ballast-chaos embedding v1` and a zero byte, a kind byte — 0 for text, 1 for a token array — the input's
//! length as 8 little-endian bytes, its UTF-8 bytes or its tokens as 8-byte little-endian integers, then a 4-byte
//! little-endian block number; each digest gives eight components, a little-endian 32-bit word `w` becoming
//! `2 w / 2^32 - 1`), then scaled to length 1, as OpenAI's are. A vector of `dimensions` d is the first d
//! components of the draw scaled to length 1: shortening works as OpenAI documents it for its own models.
//!
//! # The request
//! `input`: a string, an array of strings, an array of token ids (one input) or an array of such arrays; at most
//! 2048 inputs, none empty. `dimensions`: 1 to 3072, default [`DEFAULT_DIMENSIONS`] (small, so tests read the
//! vectors). `encoding_format`: `float` (default) or `base64` — each vector's little-endian `f32` bytes in standard
//! base64. `model` is echoed (`mock` when absent). Other fields are ignored. Usage counts a text's characters / 4
//! rounded up, and a token array's length.

mod base64;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::completion::tokens;
use super::conversation::kind;
use super::{DEFAULT_MODEL, ModelError};

/// The length of a vector when the request names no `dimensions`.
pub const DEFAULT_DIMENSIONS: usize = 8;

/// The most `dimensions` a request may ask for (OpenAI's largest embedding model's).
const MAX_DIMENSIONS: usize = 3072;

/// The most inputs one request may carry (OpenAI's limit).
const MAX_INPUTS: usize = 2048;

/// One input to embed.
#[derive(Clone, Debug, PartialEq)]
enum Input<'a> {
    Text(&'a str),
    Tokens(Vec<i64>),
}

impl Input<'_> {
    fn feed(&self, hasher: &mut Sha256) {
        match self {
            Input::Text(text) => {
                hasher.update([0]);
                hasher.update((text.len() as u64).to_le_bytes());
                hasher.update(text.as_bytes());
            }
            Input::Tokens(tokens) => {
                hasher.update([1]);
                hasher.update((tokens.len() as u64).to_le_bytes());
                for token in tokens {
                    hasher.update(token.to_le_bytes());
                }
            }
        }
    }

    fn tokens(&self) -> usize {
        match self {
            Input::Text(text) => tokens(text.chars().count()),
            Input::Tokens(tokens) => tokens.len(),
        }
    }
}

/// The vector of `input` with `dimensions` components, length 1.
fn vector(input: &Input<'_>, dimensions: usize) -> Vec<f32> {
    let mut raw: Vec<f64> = Vec::with_capacity(dimensions + 8);
    let mut block: u32 = 0;
    while raw.len() < dimensions {
        let mut hasher = Sha256::new();
        hasher.update(b"ballast-chaos embedding v1\0");
        input.feed(&mut hasher);
        hasher.update(block.to_le_bytes());
        for word in hasher.finalize().chunks_exact(4) {
            let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            raw.push(2.0 * f64::from(word) / 4_294_967_296.0 - 1.0);
        }
        block += 1;
    }
    raw.truncate(dimensions);
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 {
        // Never drawn in practice (every component exactly 0); a unit vector all the same.
        return (0..dimensions).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect();
    }
    raw.iter().map(|x| (x / norm) as f32).collect()
}

/// The embedding of `text` with `dimensions` components (at least 1), as `POST /v1/embeddings` answers it: what
/// a test compares a forwarded or cached vector with.
///
/// ```
/// let vector = ballast_chaos::embedding("Refund order 1234", 8);
/// assert_eq!(vector.len(), 8);
/// let length: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
/// assert!((length - 1.0).abs() < 1e-5);
/// assert_eq!(vector, ballast_chaos::embedding("Refund order 1234", 8));
/// assert_ne!(vector, ballast_chaos::embedding("Refund order 1235", 8));
/// ```
pub fn embedding(text: &str, dimensions: usize) -> Vec<f32> {
    vector(&Input::Text(text), dimensions.max(1))
}

/// The answer to an embeddings `request`: `{"object": "list", "data": [{"object": "embedding", "index",
/// "embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}`, one vector per input (a string, strings,
/// a token array or token arrays), each [`embedding`]'s: drawn from SHA-256 of the input, length 1, `dimensions`
/// long (default [`DEFAULT_DIMENSIONS`], at most 3072), as floats or (`encoding_format: "base64"`) as its
/// little-endian `f32` bytes in standard base64. Usage counts a text's characters / 4 rounded up and a token
/// array's length (docs/chaos.md, "Embeddings").
///
/// # Errors
/// [`ModelError::InvalidRequest`] naming the field, for an input, `dimensions` or `encoding_format` it cannot
/// serve.
pub fn embeddings(request: &Value) -> Result<Value, ModelError> {
    let invalid = |message: String| Err(ModelError::InvalidRequest(message));
    let Some(body) = request.as_object() else {
        return invalid(format!(
            "The request body must be a JSON object, but got {} instead.",
            kind(request)
        ));
    };
    let inputs = inputs(body.get("input"))?;
    let dimensions = match body.get("dimensions") {
        None | Some(Value::Null) => DEFAULT_DIMENSIONS,
        Some(value) => match value.as_u64().and_then(|d| usize::try_from(d).ok()) {
            Some(d) if (1..=MAX_DIMENSIONS).contains(&d) => d,
            _ => {
                return invalid(format!(
                    "Invalid 'dimensions': {value}. Expected an integer from 1 to {MAX_DIMENSIONS}."
                ));
            }
        },
    };
    let base64 = match body.get("encoding_format") {
        None | Some(Value::Null) => false,
        Some(Value::String(format)) if format == "float" => false,
        Some(Value::String(format)) if format == "base64" => true,
        Some(other) => {
            return invalid(format!(
                "Invalid value for 'encoding_format': {other}. Supported values are: 'float' and 'base64'."
            ));
        }
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, input)| {
            let vector = vector(input, dimensions);
            let embedding = if base64 {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::encode(&bytes))
            } else {
                json!(vector.iter().map(|&x| shortest(x)).collect::<Vec<f64>>())
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let prompt_tokens: usize = inputs.iter().map(Input::tokens).sum();
    let model = body.get("model").and_then(Value::as_str).unwrap_or(DEFAULT_MODEL);
    Ok(json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }))
}

/// `x` as the `f64` of its shortest decimal form, so the JSON shows `0.12345679` and reads back as the same
/// `f32` (the form `f32`'s `Display` writes round-trips).
fn shortest(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// The inputs of `input`: a string, strings, one token array, or token arrays.
fn inputs(input: Option<&Value>) -> Result<Vec<Input<'_>>, ModelError> {
    let invalid = |message: String| Err(ModelError::InvalidRequest(message));
    let items = match input {
        None | Some(Value::Null) => return invalid("Missing required parameter: 'input'.".into()),
        Some(Value::String(text)) => return Ok(vec![text_input("input", text)?]),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return invalid(format!(
                "Invalid type for 'input': expected a string or an array, but got {} instead.",
                kind(other)
            ));
        }
    };
    if items.is_empty() {
        return invalid("Invalid 'input': empty array. Expected an array with minimum length 1.".into());
    }
    if items.len() > MAX_INPUTS {
        return invalid(format!(
            "Invalid 'input': array too long. Expected an array with maximum length {MAX_INPUTS}, but got {} \
             items instead.",
            items.len()
        ));
    }
    if items.iter().all(Value::is_number) {
        return Ok(vec![Input::Tokens(token_array("input", items)?)]);
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let at = format!("input[{index}]");
            match item {
                Value::String(text) => text_input(&at, text),
                Value::Array(tokens) if !tokens.is_empty() => Ok(Input::Tokens(token_array(&at, tokens)?)),
                Value::Array(_) => Err(ModelError::InvalidRequest(format!(
                    "Invalid '{at}': empty array. Expected an array with minimum length 1."
                ))),
                other => Err(ModelError::InvalidRequest(format!(
                    "Invalid type for '{at}': expected a string or an array of integers, but got {} instead.",
                    kind(other)
                ))),
            }
        })
        .collect()
}

fn text_input<'a>(at: &str, text: &'a str) -> Result<Input<'a>, ModelError> {
    if text.is_empty() {
        return Err(ModelError::InvalidRequest(format!(
            "Invalid '{at}': empty string. Expected a string with minimum length 1."
        )));
    }
    Ok(Input::Text(text))
}

fn token_array(at: &str, tokens: &[Value]) -> Result<Vec<i64>, ModelError> {
    tokens
        .iter()
        .enumerate()
        .map(|(index, token)| {
            token.as_i64().ok_or_else(|| {
                ModelError::InvalidRequest(format!(
                    "Invalid type for '{at}[{index}]': expected an integer, but got {token} instead."
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
