//! The endpoints without faults: `GET /ledger`, `GET /stats`, `GET /healthz`, `GET /v1/models` and
//! `POST /admin/profile`.
//!
//! `POST /admin/profile` lets one server run many test cases: it swaps the fault profile and starts a new epoch
//! (ledger, stats, attempt counters, keys, capacity and the start time all reset). Its body is either a profile in
//! TOML (any content type but JSON), or, with `Content-Type: application/json`, a preset:
//! `{"preset": "flaky", "seed": 7}` (`seed` defaults to 0). A profile that does not load is a 400 naming the
//! problem, and the old profile stays.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use super::answer::Answer;
use super::lock::lock;
use super::state::App;
use crate::Profile;

/// `GET /ledger`.
pub(crate) async fn ledger(State(app): State<App>) -> Response {
    let view = lock(&app.epoch().ledger).view();
    Json(view).into_response()
}

/// `GET /stats`.
pub(crate) async fn stats(State(app): State<App>) -> Response {
    let stats = lock(&app.epoch().stats).clone();
    Json(stats).into_response()
}

/// `GET /healthz`.
pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `POST /echo`: what arrived — every header (lower-case names; a header sent twice, its values in order), the
/// body (as JSON when it is JSON, else as text) and the body's text as it came (`raw`) — so a test can check what
/// a gateway forwards, byte for byte, and what it keeps back. No faults, no ledger.
pub(crate) async fn echo(headers: axum::http::HeaderMap, body: bytes::Bytes) -> Json<Value> {
    let mut seen = serde_json::Map::new();
    for (name, value) in &headers {
        let value = Value::String(String::from_utf8_lossy(value.as_bytes()).into_owned());
        match seen.get_mut(name.as_str()) {
            Some(Value::Array(values)) => values.push(value),
            _ => {
                seen.insert(name.as_str().to_owned(), Value::Array(vec![value]));
            }
        }
    }
    let raw = String::from_utf8_lossy(&body).into_owned();
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_else(|_| Value::String(raw.clone()));
    Json(json!({"headers": seen, "body": body, "raw": raw}))
}

/// `GET /v1/models`.
pub(crate) async fn models() -> Json<Value> {
    Json(crate::models_list())
}

/// The JSON form of `POST /admin/profile`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetRequest {
    preset: String,
    #[serde(default)]
    seed: u64,
}

/// `POST /admin/profile`.
pub(crate) async fn swap_profile(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    match profile_from(&headers, &body) {
        Ok(profile) => {
            let summary = profile.summary();
            app.swap(profile);
            Json(json!({"status": "swapped", "profile": summary})).into_response()
        }
        Err(message) => Answer::tool_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_profile",
            message,
        )
        .into_response(),
    }
}

fn profile_from(headers: &HeaderMap, body: &[u8]) -> Result<Profile, String> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if json {
        let request: PresetRequest = serde_json::from_slice(body)
            .map_err(|e| format!("expected {{\"preset\": NAME, \"seed\": N}}: {e}"))?;
        return Profile::preset(&request.preset, request.seed).map_err(|e| e.to_string());
    }
    let text = std::str::from_utf8(body).map_err(|e| format!("the profile is not UTF-8: {e}"))?;
    Profile::from_toml_str(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn json_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers
    }

    #[test]
    fn a_json_body_names_a_preset_and_a_seed() {
        let profile = profile_from(&json_headers(), br#"{"preset": "none", "seed": 7}"#).expect("a preset");
        assert_eq!(profile.seed, 7);
        let profile = profile_from(&json_headers(), br#"{"preset": "none"}"#).expect("a preset");
        assert_eq!(profile.seed, 0);
    }

    #[test]
    fn a_bad_json_body_is_refused_with_the_reason() {
        let err =
            profile_from(&json_headers(), br#"{"preset": "none", "sead": 7}"#).expect_err("unknown field");
        assert!(err.contains("sead"), "{err}");
        let err = profile_from(&json_headers(), br#"{"preset": "nope"}"#).expect_err("unknown preset");
        assert!(err.contains("nope"), "{err}");
    }
}
