//! A handler's response as the store keeps it, and a stored response as a replay.

use axum::body::Body;
use ballast_store::StoredResponse;
use bytes::Bytes;
use http::response::Parts;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use serde_json::{Value, json};

use super::problem::Problem;
use crate::headers::{IDEMPOTENT_REPLAYED, X_SHOULD_RETRY};

/// Response headers stored and replayed by default: those that describe the representation or where it lives.
/// Anything per-exchange (dates, request ids, cookies, hop-by-hop headers) is left out: replaying it would lie.
pub(crate) const DEFAULT_STORED_HEADERS: [HeaderName; 7] = [
    http::header::CONTENT_TYPE,
    http::header::CONTENT_LANGUAGE,
    http::header::CONTENT_LOCATION,
    http::header::LOCATION,
    http::header::ETAG,
    http::header::LAST_MODIFIED,
    http::header::CACHE_CONTROL,
];

/// The response to store: its status, the allow-listed headers (every value of each, in order), its body.
pub(crate) fn to_stored(parts: &Parts, body: Bytes, allowed: &[HeaderName]) -> StoredResponse {
    let headers = parts
        .headers
        .iter()
        .filter(|(name, _)| allowed.contains(name))
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect();
    StoredResponse {
        status: parts.status.as_u16(),
        headers,
        body,
    }
}

/// The replay of `stored`: its status, headers and body, marked `Idempotent-Replayed: true`. A replayed error
/// also says `x-should-retry: false`: the same request with the same key gets the same error forever.
pub(crate) fn replay(stored: StoredResponse) -> Response<Body> {
    let Ok(status) = StatusCode::from_u16(stored.status) else {
        return Problem::StoreFailed.into_response();
    };
    let mut response = Response::new(Body::from(stored.body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in stored.headers {
        // Stored by `to_stored` from valid headers; a record that does not parse back is skipped, not fatal.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(&value),
        ) {
            headers.append(name, value);
        }
    }
    headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    if status.is_client_error() || status.is_server_error() {
        headers.insert(X_SHOULD_RETRY, HeaderValue::from_static("false"));
    }
    response
}

/// A stored response as JSON: status, headers (text values), body (JSON if it parses as JSON, else text).
pub(crate) fn result_json(response: &StoredResponse) -> Value {
    let headers: serde_json::Map<String, Value> = response
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), json!(String::from_utf8_lossy(value))))
        .collect();
    let body = serde_json::from_slice::<Value>(&response.body)
        .unwrap_or_else(|_| json!(String::from_utf8_lossy(&response.body)));
    json!({"status": response.status, "headers": headers, "body": body})
}

#[cfg(test)]
mod tests {
    use http::header;

    use super::*;

    #[tokio::test]
    async fn only_allowed_headers_are_stored_and_replayed() {
        let response = Response::builder()
            .status(201)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::SET_COOKIE, "session=secret")
            .header(header::LOCATION, "/refunds/1")
            .body(())
            .unwrap();
        let (parts, ()) = response.into_parts();
        let stored = to_stored(
            &parts,
            Bytes::from_static(b"{}"),
            &[header::CONTENT_TYPE, header::LOCATION],
        );
        assert_eq!(stored.status, 201);
        assert_eq!(stored.headers.len(), 2);
        let replayed = replay(stored);
        assert_eq!(replayed.status(), StatusCode::CREATED);
        assert_eq!(replayed.headers()[header::LOCATION], "/refunds/1");
        assert_eq!(replayed.headers()[IDEMPOTENT_REPLAYED], "true");
        assert!(replayed.headers().get(header::SET_COOKIE).is_none());
        assert!(replayed.headers().get(X_SHOULD_RETRY).is_none());
        let body = axum::body::to_bytes(replayed.into_body(), 10).await.unwrap();
        assert_eq!(body, "{}");
    }

    #[test]
    fn replayed_errors_say_a_retry_cannot_help() {
        let stored = StoredResponse {
            status: 500,
            headers: Vec::new(),
            body: Bytes::new(),
        };
        assert_eq!(replay(stored).headers()[X_SHOULD_RETRY], "false");
    }
}
