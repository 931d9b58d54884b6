//! Every answer the idempotency layer gives on its own, in one place: RFC 9457 problem+json bodies that say what
//! happened and what the caller can do, with the status, `x-should-retry` and `Retry-After` each one carries.
//!
//! Why one place (STYLE.md, convention 6): a caller matches on `type`, the retry decision on status and
//! `x-should-retry`; an answer built in two places drifts apart.

use std::time::Duration;

use axum::body::Body;
use ballast_core::{AmbiguousJson, ErrorCode, InvalidKey, WireError};
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::json;

use crate::headers::{BALLAST_CODE, BALLAST_OUTCOME, X_SHOULD_RETRY, set_retry_after};

/// Why the layer answered instead of the handler (or alongside it, for the outcome of a crashed handler).
#[derive(Debug)]
pub(crate) enum Problem {
    /// The route requires an `Idempotency-Key` and the request has none.
    KeyMissing,
    /// The key breaks the rules.
    KeyInvalid(InvalidKey),
    /// More than one `Idempotency-Key` header.
    KeyRepeated,
    /// A deadline header could not be read.
    BadDeadline(WireError),
    /// The request body is over the limit.
    BodyTooLarge { limit: usize },
    /// The request body could not be read.
    BodyUnreadable,
    /// The JSON body names a member twice: no one request.
    AmbiguousJson(AmbiguousJson),
    /// The key's first request is still running.
    InProgress { retry_after: Duration },
    /// The key was used with another request.
    KeyReused,
    /// The store could not be reached: nothing ran.
    StoreUnavailable,
    /// The store did not answer within the request's time left (deadline minus reserve): nothing ran.
    StoreTooSlow { waited: Duration },
    /// The request came with no time left past the reserve: nothing was tried, nothing ran.
    DeadlineExceeded { left: Duration, reserve: Duration },
    /// The store answered with something it could not read, or something this version does not know.
    StoreFailed,
    /// The key's request was sent and nobody knows whether it acted.
    OutcomeUnknown,
    /// The handler panicked after the request was dispatched.
    HandlerPanicked,
}

/// An RFC 9457 problem+json answer with `status` and `body`: the one writer of problem+json, for the
/// idempotency layer's own answers and the gateway's.
pub fn problem_json(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

impl Problem {
    /// The answer.
    pub(crate) fn into_response(self) -> Response<Body> {
        let (status, slug, title) = self.kind();
        let detail = self.detail();
        let type_uri = match self {
            Problem::OutcomeUnknown => ErrorCode::OutcomeUnknown.problem_type(),
            Problem::DeadlineExceeded { .. } => ErrorCode::DeadlineExceeded.problem_type(),
            _ => format!("urn:ballast:{slug}"),
        };
        let mut body = json!({
            "type": type_uri,
            "title": title,
            "status": status.as_u16(),
            "detail": detail,
        });
        let unknown = matches!(self, Problem::OutcomeUnknown | Problem::HandlerPanicked);
        // The code is the type's last part: one spelling for every URN (DESIGN.md, "Error answers").
        let code = type_uri.strip_prefix("urn:ballast:").unwrap_or(slug).to_owned();
        body["code"] = json!(code);
        let mut response = problem_json(status, &body);
        let headers = response.headers_mut();
        // Said in a header too, for a caller (another Ballast, a proxy) that does not read the body.
        if let Ok(code) = HeaderValue::from_str(&code) {
            headers.insert(BALLAST_CODE, code);
        }
        if unknown {
            headers.insert(BALLAST_OUTCOME, HeaderValue::from_static("unknown"));
        }
        // Only the answers where nothing ran and a later identical request can succeed invite a retry.
        let retry_after = self.retry_after();
        headers.insert(
            X_SHOULD_RETRY,
            HeaderValue::from_static(if retry_after.is_some() { "true" } else { "false" }),
        );
        if let Some(retry_after) = retry_after {
            set_retry_after(headers, retry_after);
        }
        response
    }

    /// When a retry may succeed: the in-progress answer (the holder's lease, capped by the layer) and the store
    /// outage (nothing ran; a second later the store may be back). Every other answer is final for this request.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Problem::InProgress { retry_after } => Some(*retry_after),
            Problem::StoreUnavailable | Problem::StoreTooSlow { .. } => Some(Duration::from_secs(1)),
            _ => None,
        }
    }

    /// Status, type slug and title.
    fn kind(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            Problem::KeyMissing => (
                StatusCode::BAD_REQUEST,
                "idempotency_key_missing",
                "Idempotency-Key required",
            ),
            Problem::KeyInvalid(_) | Problem::KeyRepeated => (
                StatusCode::BAD_REQUEST,
                "idempotency_key_invalid",
                "Idempotency-Key invalid",
            ),
            Problem::BadDeadline(_) => (
                StatusCode::BAD_REQUEST,
                "deadline_header_invalid",
                "Deadline header invalid",
            ),
            Problem::BodyTooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "Request body too large",
            ),
            Problem::BodyUnreadable => (
                StatusCode::BAD_REQUEST,
                "body_unreadable",
                "Request body unreadable",
            ),
            Problem::AmbiguousJson(_) => (
                StatusCode::BAD_REQUEST,
                "json_duplicate_member",
                "JSON body names a member twice",
            ),
            Problem::InProgress { .. } => (
                StatusCode::CONFLICT,
                "idempotency_in_progress",
                "Request with this key in progress",
            ),
            Problem::KeyReused => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "Idempotency-Key reused with another request",
            ),
            Problem::StoreUnavailable | Problem::StoreTooSlow { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "Idempotency store unavailable",
            ),
            Problem::StoreFailed => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "store_failed",
                "Idempotency record unreadable",
            ),
            Problem::OutcomeUnknown => (StatusCode::BAD_GATEWAY, "outcome_unknown", "Outcome unknown"),
            Problem::DeadlineExceeded { .. } => (
                StatusCode::GATEWAY_TIMEOUT,
                "deadline_exceeded",
                "No time left to run the request",
            ),
            Problem::HandlerPanicked => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "handler_panicked",
                "Handler failed after the request was dispatched",
            ),
        }
    }

    /// What happened and what the caller can do.
    fn detail(&self) -> String {
        match self {
            Problem::KeyMissing => "this route performs a side effect and needs an Idempotency-Key header; \
                generate one key per logical operation (a UUID) and send the same key on every retry of it"
                .to_owned(),
            Problem::KeyInvalid(invalid) => format!("{invalid}; send a valid key (a UUID works)"),
            Problem::KeyRepeated => "the request has more than one Idempotency-Key header; send exactly one"
                .to_owned(),
            Problem::BadDeadline(error) => format!("{error}; fix or remove the header"),
            Problem::BodyTooLarge { limit } => format!(
                "the request body is over this route's {limit}-byte limit; nothing ran, and retrying the same \
                 body will not help"
            ),
            Problem::BodyUnreadable => {
                "the request body could not be read to the end; nothing ran, send the request again".to_owned()
            }
            Problem::AmbiguousJson(ambiguous) => format!("{ambiguous}; nothing ran"),
            Problem::InProgress { retry_after } => format!(
                "a request with this Idempotency-Key is still being processed; retry the same request with the \
                 same key in {} ms, or poll the operation's status",
                retry_after.as_millis()
            ),
            Problem::KeyReused => "this Idempotency-Key was already used with a different request (method, \
                path or body); nothing ran. Use a new key for a new operation, or resend the original request"
                .to_owned(),
            Problem::StoreUnavailable => "the idempotency store could not be reached, so the request was not run \
                (running it could perform the side effect twice); retry the same request with the same key"
                .to_owned(),
            Problem::StoreTooSlow { waited } => format!(
                "the idempotency store did not answer within the request's time left ({} ms, its deadline minus \
                 the reserve), so the request was not run; retry the same request with the same key, with a \
                 longer deadline if the store stays slow",
                waited.as_millis()
            ),
            Problem::DeadlineExceeded { left, reserve } => format!(
                "the request arrived with {} ms left before its deadline, within the {} ms reserve: no time to \
                 claim its key and run it, so nothing ran. Send it again with a longer deadline (and the same key)",
                left.as_millis(),
                reserve.as_millis()
            ),
            Problem::StoreFailed => "the idempotency record of this key could not be read; nothing ran. Report \
                this to the service's operators"
                .to_owned(),
            Problem::OutcomeUnknown => "the request with this Idempotency-Key was sent and its outcome is \
                unknown: the side effect may or may not have happened. It will not be run again with this key; \
                check the effect before starting a new operation with a new key"
                .to_owned(),
            Problem::HandlerPanicked => "the handler failed after it started the side effect, so whether it \
                happened is unknown; retrying with the same key answers outcome_unknown. Check the effect \
                before starting a new operation with a new key"
                .to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::{RETRY_AFTER, RETRY_AFTER_MS};

    async fn body_json(response: Response<Body>) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn in_progress_says_when_to_come_back() {
        let response = Problem::InProgress {
            retry_after: Duration::from_millis(1500),
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[RETRY_AFTER], "2");
        assert_eq!(response.headers()[RETRY_AFTER_MS], "1500");
        assert_eq!(response.headers()[X_SHOULD_RETRY], "true");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let body = body_json(response).await;
        assert_eq!(body["type"], "urn:ballast:idempotency_in_progress");
        assert_eq!(body["status"], 409);
    }

    #[tokio::test]
    async fn outcome_unknown_carries_its_stable_code() {
        let response = Problem::OutcomeUnknown.into_response();
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(response.headers()[X_SHOULD_RETRY], "false");
        let body = body_json(response).await;
        assert_eq!(body["type"], "urn:ballast:outcome_unknown");
        assert_eq!(body["code"], "outcome_unknown");
    }

    #[tokio::test]
    async fn every_problem_is_a_complete_rfc_9457_body() {
        let problems = [
            Problem::KeyMissing,
            Problem::KeyInvalid(InvalidKey::Empty),
            Problem::KeyRepeated,
            Problem::BodyTooLarge { limit: 10 },
            Problem::BodyUnreadable,
            Problem::AmbiguousJson(AmbiguousJson::DuplicateMember {
                name: "amount".to_owned(),
            }),
            Problem::KeyReused,
            Problem::StoreUnavailable,
            Problem::StoreTooSlow {
                waited: Duration::from_millis(250),
            },
            Problem::StoreFailed,
            Problem::HandlerPanicked,
            Problem::DeadlineExceeded {
                left: Duration::from_millis(20),
                reserve: Duration::from_millis(50),
            },
        ];
        for problem in problems {
            let (status, slug, _) = problem.kind();
            let response = problem.into_response();
            assert_eq!(response.status(), status);
            // The code, in the body and a header, is the type's last part (a caller reading either finds it).
            assert_eq!(response.headers()["ballast-code"], slug);
            let body = body_json(response).await;
            assert_eq!(body["type"], format!("urn:ballast:{slug}"));
            assert_eq!(body["code"], slug);
            assert_eq!(body["status"], status.as_u16());
            assert!(!body["title"].as_str().unwrap().is_empty());
            assert!(body["detail"].as_str().unwrap().len() > 20, "{body}");
        }
    }
}
