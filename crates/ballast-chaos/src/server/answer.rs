//! Every answer the server gives, and the one place that turns it into an HTTP response.
//!
//! The model endpoint answers errors in OpenAI's format (`model::error_body`); the tools answer them in the
//! `{"error": {"type", "code", "message"}}` shape that OpenAI and Stripe share, with Stripe's codes for the
//! idempotency answers (`idempotency_key_in_use`), so a client classifies them by structured code. An answer is a
//! value (not a response) so that the idempotency store can keep it and replay it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::RetryAfterForm;

/// `Idempotent-Replayed: true` marks an answer replayed from an idempotency key.
pub(crate) const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// `chaos-fault` names the fault behind an error answer (`injected`, `outage`, `shed_capacity`): for people
/// reading traces; clients must not depend on it.
pub(crate) const CHAOS_FAULT: HeaderName = HeaderName::from_static("chaos-fault");

/// Which endpoint family answers: it decides the error body's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `/v1/chat/completions`: OpenAI's error format.
    Model,
    /// `/tools/{name}`: `{"error": {"type", "code", "message"}}`.
    Tool,
}

/// One JSON answer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
    /// `Retry-After`, already rendered.
    pub(crate) retry_after: Option<String>,
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

    /// An injected error status.
    pub(crate) fn injected(
        flavor: Flavor,
        status: u16,
        retry_after: Option<String>,
        insufficient_quota: bool,
    ) -> Answer {
        let body = match flavor {
            Flavor::Model => crate::error_body(status, insufficient_quota),
            Flavor::Tool => json!({"error": {
                "type": "api_error",
                "code": injected_code(status),
                "message": format!("injected {status} (chaos fault); a retry may meet a different fault"),
            }}),
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
        flavor: Flavor,
        fault: &'static str,
        message: String,
        retry_after: Option<String>,
    ) -> Answer {
        let body = match flavor {
            Flavor::Model => crate::error_body(503, false),
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
        if let Some(value) = self.retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(axum::http::header::RETRY_AFTER, value);
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

/// `Retry-After` for `form`: delta-seconds, or the HTTP-date `wall` + the delay, rounded up to the next whole
/// second (an HTTP-date has no fraction, and never retry earlier than the delay).
pub(crate) fn retry_after_value(form: RetryAfterForm, wall: SystemTime) -> String {
    match form {
        RetryAfterForm::Seconds(seconds) => seconds.to_string(),
        RetryAfterForm::HttpDate(delay) => {
            let at = wall + delay;
            let since_epoch = at.duration_since(UNIX_EPOCH).unwrap_or_default();
            let whole = since_epoch.as_secs() + u64::from(since_epoch.subsec_nanos() > 0);
            httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(whole))
        }
    }
}

/// Delta-seconds for a wait of `left`, rounded up, at least 1.
pub(crate) fn seconds_until(left: Duration) -> String {
    let whole = left.as_secs() + u64::from(left.subsec_nanos() > 0);
    whole.max(1).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_seconds_are_rendered_as_is() {
        assert_eq!(retry_after_value(RetryAfterForm::Seconds(2), UNIX_EPOCH), "2");
    }

    #[test]
    fn an_http_date_is_the_wall_time_plus_the_delay_rounded_up() {
        let wall = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let value = retry_after_value(RetryAfterForm::HttpDate(Duration::from_secs(3)), wall);
        let at = httpdate::parse_http_date(&value).expect("an HTTP-date");
        assert_eq!(at, UNIX_EPOCH + Duration::from_secs(1_700_000_004));
    }

    #[test]
    fn waits_round_up_to_whole_seconds_and_never_to_zero() {
        assert_eq!(seconds_until(Duration::from_millis(2_001)), "3");
        assert_eq!(seconds_until(Duration::from_secs(2)), "2");
        assert_eq!(seconds_until(Duration::ZERO), "1");
    }

    #[test]
    fn injected_tool_errors_carry_a_code_and_the_fault_header() {
        let answer = Answer::injected(Flavor::Tool, 503, Some("1".into()), false);
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
