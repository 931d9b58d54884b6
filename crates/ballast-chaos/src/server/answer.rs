//! Every answer the server gives, and the one place that turns it into an HTTP response.
//!
//! The model endpoint answers errors in OpenAI's format (`model::error_body`), and in Anthropic's on the
//! Messages API (`MessagesError`, with the request's `request-id` in the body); the tools answer them in the
//! `{"error": {"type", "code", "message"}}` shape that OpenAI and Stripe share, with Stripe's codes for the
//! idempotency answers (`idempotency_key_in_use`), so a client classifies them by structured code. An answer is a
//! value (not a response) so that the idempotency store can keep it and replay it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::{MessagesError, Quota, RetryAfterForm};

/// `Idempotent-Replayed: true` marks an answer replayed from an idempotency key.
pub(crate) const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// `chaos-fault` names the fault behind an error answer (`injected`, `outage`, `shed_capacity`): for people
/// reading traces; clients must not depend on it.
pub(crate) const CHAOS_FAULT: HeaderName = HeaderName::from_static("chaos-fault");

/// Which endpoint family answers: it decides the error body's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor<'a> {
    /// `/v1/chat/completions`, `/v1/responses`, `/v1/embeddings`: OpenAI's error format.
    Model,
    /// `/v1/messages`: Anthropic's error format, with the answer's request id.
    Messages {
        /// The `request-id` of the answer.
        request_id: &'a str,
    },
    /// `/tools/{name}`: `{"error": {"type", "code", "message"}}`.
    Tool,
}

/// One JSON answer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
    /// `Retry-After` (and `retry-after-ms`), already rendered.
    pub(crate) retry_after: Option<RetryAfter>,
    /// Replayed from an idempotency key.
    pub(crate) replayed: bool,
    /// The `chaos-fault` header.
    pub(crate) fault: Option<&'static str>,
}

impl Answer {
    /// A 200 with `body`.
    pub(crate) fn ok(body: Value) -> Answer {
        Answer::new(StatusCode::OK, body)
    }

    /// A non-injected error of a tool (unknown tool, bad body, idempotency answers).
    pub(crate) fn tool_error(status: StatusCode, kind: &str, code: &str, message: String) -> Answer {
        Answer::new(
            status,
            json!({"error": {"type": kind, "code": code, "message": message}}),
        )
    }

    /// An injected error status (on Messages, a spent credit is a 400: [`MessagesError::status`]).
    pub(crate) fn injected(
        flavor: Flavor<'_>,
        status: u16,
        retry_after: Option<RetryAfter>,
        quota: Option<Quota>,
    ) -> Answer {
        let (status, body) = match flavor {
            Flavor::Model => (status, crate::error_body(status, quota.is_some())),
            Flavor::Messages { request_id } => {
                let error = MessagesError::Injected { status, quota };
                (error.status(), error.body(request_id))
            }
            Flavor::Tool => (
                status,
                json!({"error": {
                    "type": "api_error",
                    "code": injected_code(status),
                    "message": format!("injected {status} (chaos fault); a retry may meet a different fault"),
                }}),
            ),
        };
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Answer {
            retry_after,
            fault: Some("injected"),
            ..Answer::new(status, body)
        }
    }

    /// A 503 from the front door (outage, capacity), before the endpoint does anything.
    pub(crate) fn refused(
        flavor: Flavor<'_>,
        fault: &'static str,
        message: String,
        retry_after: Option<RetryAfter>,
    ) -> Answer {
        let body = match flavor {
            Flavor::Model => crate::error_body(503, false),
            Flavor::Messages { request_id } => MessagesError::Injected {
                status: 503,
                quota: None,
            }
            .body(request_id),
            Flavor::Tool => json!({"error": {"type": "api_error", "code": fault, "message": message}}),
        };
        Answer {
            retry_after,
            fault: Some(fault),
            ..Answer::new(StatusCode::SERVICE_UNAVAILABLE, body)
        }
    }

    /// The same answer, marked as replayed.
    pub(crate) fn replayed(self) -> Answer {
        Answer {
            replayed: true,
            ..self
        }
    }

    fn new(status: StatusCode, body: Value) -> Answer {
        Answer {
            status,
            body,
            retry_after: None,
            replayed: false,
            fault: None,
        }
    }
}

fn injected_code(status: u16) -> &'static str {
    match status {
        429 => "rate_limited",
        500 => "internal_error",
        502 => "bad_gateway",
        503 => "service_unavailable",
        504 => "gateway_timeout",
        529 => "overloaded",
        _ => "injected_error",
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        let headers = response.headers_mut();
        if let Some(retry_after) = self.retry_after {
            if let Ok(value) = HeaderValue::from_str(&retry_after.header) {
                headers.insert(axum::http::header::RETRY_AFTER, value);
            }
            if let Some(millis) = retry_after.millis {
                headers.insert(RETRY_AFTER_MS, HeaderValue::from(millis));
            }
        }
        if self.replayed {
            headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        }
        if let Some(fault) = self.fault {
            headers.insert(CHAOS_FAULT, HeaderValue::from_static(fault));
        }
        response
    }
}

/// `retry-after-ms` (OpenAI's header): the wait in milliseconds, for waits finer than a second.
pub(crate) const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");

/// A rendered wait: the `Retry-After` value, and `retry-after-ms` when the wait is not whole seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RetryAfter {
    pub(crate) header: String,
    pub(crate) millis: Option<u64>,
}

impl RetryAfter {
    /// `Retry-After: seconds`.
    pub(crate) fn seconds(seconds: u64) -> RetryAfter {
        RetryAfter {
            header: seconds.to_string(),
            millis: None,
        }
    }
}

/// `Retry-After` for `form`: delta-seconds; milliseconds with delta-seconds rounded up beside them; or the
/// HTTP-date `wall` + the delay, rounded up to the next whole second (an HTTP-date has no fraction, and never
/// retry earlier than the delay).
pub(crate) fn retry_after_value(form: RetryAfterForm, wall: SystemTime) -> RetryAfter {
    match form {
        RetryAfterForm::Seconds(seconds) => RetryAfter::seconds(seconds),
        RetryAfterForm::Millis(millis) => RetryAfter {
            header: whole_seconds(Duration::from_millis(millis)).to_string(),
            millis: Some(millis),
        },
        RetryAfterForm::HttpDate(delay) => {
            let at = wall + delay;
            let since_epoch = at.duration_since(UNIX_EPOCH).unwrap_or_default();
            RetryAfter {
                header: httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(whole_seconds(since_epoch))),
                millis: None,
            }
        }
    }
}

/// The wait of `left`: delta-seconds rounded up (at least 1), and the exact milliseconds beside them.
pub(crate) fn seconds_until(left: Duration) -> RetryAfter {
    RetryAfter {
        header: whole_seconds(left).max(1).to_string(),
        millis: Some(left.as_millis().try_into().unwrap_or(u64::MAX)),
    }
}

/// Whole seconds of `d`, rounded up.
fn whole_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_seconds_are_rendered_as_is() {
        assert_eq!(
            retry_after_value(RetryAfterForm::Seconds(2), UNIX_EPOCH),
            RetryAfter::seconds(2)
        );
    }

    #[test]
    fn milliseconds_carry_whole_seconds_rounded_up_beside_them() {
        let value = retry_after_value(RetryAfterForm::Millis(1_250), UNIX_EPOCH);
        assert_eq!((value.header.as_str(), value.millis), ("2", Some(1_250)));
        let response = Answer::injected(Flavor::Tool, 503, Some(value), None).into_response();
        assert_eq!(response.headers()["retry-after"], "2");
        assert_eq!(response.headers()["retry-after-ms"], "1250");
    }

    #[test]
    fn an_http_date_is_the_wall_time_plus_the_delay_rounded_up() {
        let wall = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let value = retry_after_value(RetryAfterForm::HttpDate(Duration::from_secs(3)), wall);
        let at = httpdate::parse_http_date(&value.header).expect("an HTTP-date");
        assert_eq!(at, UNIX_EPOCH + Duration::from_secs(1_700_000_004));
    }

    #[test]
    fn waits_round_up_to_whole_seconds_and_never_to_zero() {
        assert_eq!(seconds_until(Duration::from_millis(2_001)).header, "3");
        assert_eq!(seconds_until(Duration::from_secs(2)).header, "2");
        assert_eq!(seconds_until(Duration::ZERO).header, "1");
        assert_eq!(seconds_until(Duration::from_millis(2_001)).millis, Some(2_001));
    }

    #[test]
    fn injected_tool_errors_carry_a_code_and_the_fault_header() {
        let answer = Answer::injected(Flavor::Tool, 503, Some(RetryAfter::seconds(1)), None);
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.body["error"]["code"], "service_unavailable");
        let response = answer.into_response();
        assert_eq!(response.headers()["retry-after"], "1");
        assert_eq!(response.headers()["chaos-fault"], "injected");
        assert!(response.headers().get("idempotent-replayed").is_none());
    }

    #[test]
    fn a_replayed_answer_says_so() {
        let response = Answer::ok(json!({})).replayed().into_response();
        assert_eq!(response.headers()["idempotent-replayed"], "true");
    }
}
