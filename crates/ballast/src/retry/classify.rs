//! From an upstream's answer to what the retry decision needs to know about it ([`ResponseInfo`]).
//!
//! Why here and not in the core: the answer is an `http::Response`, and an HTTP-date `Retry-After` needs the wall
//! clock, which only [`clock`](crate::clock) reads. Every value is read by the core's parsers; this module only
//! finds the headers and the structured problem code, and turns a malformed header into "not sent" (logged at
//! debug level) rather than a failure: a retry decision must never fail because an upstream sent a bad hint.

use ballast_core::{ProblemKind, ResponseInfo, is_json_content_type, parse_should_retry};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, Response};
use serde_json::Value;

use crate::Body;
use crate::headers::{self, BALLAST_OUTCOME, X_SHOULD_RETRY};

/// What the retry decision needs from an upstream's answer: the status, `x-should-retry`, the wait asked for
/// (`retry-after-ms`, else `Retry-After` as delta-seconds or HTTP-date), and the structured problem the body
/// reports.
///
/// - A malformed header is ignored (as if absent) and logged at debug level.
/// - When both waits are present, `retry-after-ms` wins ([`ResponseInfo::with_retry_after_headers`]).
/// - The problem is read from error answers (status 400 and above) whose body is JSON (a JSON `Content-Type`, or
///   a body starting with `{`), from structured fields only — never from message text: a problem+json `type`
///   (`urn:ballast:idempotency_in_progress`), or an OpenAI/Stripe-style `error.code`, then Anthropic's
///   `error.details.error_code` (`enforced_spend_limit_reached`), then `error.type`
///   ([`ProblemKind::from_code`]). An error answer with `ballast-outcome: unknown` (another Ballast's) reports
///   [`ProblemKind::OutcomeUnknown`], whatever its body. Success bodies are not parsed: the decision never looks at their problem,
///   and a large success body should not cost a parse.
///
/// Never panics, whatever the headers and the body hold.
///
/// ```
/// use ballast::{Body, layer::classify_response};
/// use ballast_core::ProblemKind;
/// use std::time::Duration;
///
/// let answer = http::Response::builder()
///     .status(429)
///     .header("retry-after", "2")
///     .header("retry-after-ms", "1500")
///     .header("content-type", "application/json")
///     .body(Body::from(r#"{"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}"#))
///     .unwrap();
/// let info = classify_response(&answer);
/// assert_eq!(info.status, 429);
/// assert_eq!(info.retry_after, Some(Duration::from_millis(1500)));
/// assert_eq!(info.problem, ProblemKind::InsufficientQuota);
/// ```
pub fn classify_response(response: &Response<Body>) -> ResponseInfo {
    let headers = response.headers();
    let status = response.status().as_u16();
    let mut info = ResponseInfo::status(status);
    info.retry_after = headers::retry_after(headers);
    if let Some(should_retry) = headers::read(headers, &X_SHOULD_RETRY, parse_should_retry) {
        info = info.with_should_retry(should_retry);
    }
    // Error answers are always read whole; a stream (a 2xx) has no problem to read.
    let body = response.body().as_bytes().map_or(&[][..], |bytes| &bytes[..]);
    if !info.is_success() && looks_like_json(headers, body) {
        info = info.with_problem(problem(body));
    }
    // Another Ballast's word that the outcome is unknown, whatever its body says.
    if !info.is_success() && says_outcome_unknown(headers) {
        info = info.with_problem(ProblemKind::OutcomeUnknown);
    }
    info
}

/// Whether the answer carries `ballast-outcome: unknown`.
fn says_outcome_unknown(headers: &HeaderMap) -> bool {
    headers
        .get(BALLAST_OUTCOME)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("unknown"))
}

fn looks_like_json(headers: &HeaderMap, body: &[u8]) -> bool {
    let typed = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(is_json_content_type);
    typed || body.trim_ascii_start().starts_with(b"{")
}

/// The first known problem among the body's structured codes: a problem+json `type`, then `error.code`, then
/// Anthropic's `error.details.error_code`, then `error.type`. A body that does not parse, or names no known code, is [`ProblemKind::None`].
fn problem(body: &[u8]) -> ProblemKind {
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        return ProblemKind::None;
    };
    let error = json.get("error");
    let codes = [
        json.get("type"),
        error.and_then(|e| e.get("code")),
        error.and_then(|e| e.get("details")?.get("error_code")),
        error.and_then(|e| e.get("type")),
    ];
    codes
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(ProblemKind::from_code)
        .find(|kind| *kind != ProblemKind::None)
        .unwrap_or(ProblemKind::None)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use bytes::Bytes;
    use proptest::prelude::*;

    use super::*;
    use crate::headers::is_replayed;

    const SECOND: Duration = Duration::from_secs(1);

    fn answer(status: u16, headers: &[(&str, &str)], body: &'static [u8]) -> Response<Body> {
        let mut builder = Response::builder().status(status);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(Body::from(body)).expect("a valid response")
    }

    #[test]
    fn reads_status_and_should_retry() {
        let info = classify_response(&answer(503, &[("x-should-retry", "false")], b""));
        assert_eq!(info, ResponseInfo::status(503).with_should_retry(false));
        let info = classify_response(&answer(409, &[("x-should-retry", "True")], b""));
        assert_eq!(info.should_retry, Some(true));
    }

    #[test]
    fn malformed_headers_are_ignored() {
        let headers = [
            ("x-should-retry", "yes"),
            ("retry-after", "soon"),
            ("retry-after-ms", "-5"),
        ];
        assert_eq!(
            classify_response(&answer(503, &headers, b"")),
            ResponseInfo::status(503)
        );
        let not_text = Response::builder()
            .status(503)
            .header("retry-after", http::HeaderValue::from_bytes(b"\xff2").unwrap())
            .body(Body::empty())
            .unwrap();
        assert_eq!(classify_response(&not_text).retry_after, None);
    }

    #[test]
    fn retry_after_ms_wins_over_retry_after() {
        let both = [("retry-after", "2"), ("retry-after-ms", "1500")];
        assert_eq!(
            classify_response(&answer(429, &both, b"")).retry_after,
            Some(Duration::from_millis(1500))
        );
        let seconds = [("retry-after", "2")];
        assert_eq!(
            classify_response(&answer(429, &seconds, b"")).retry_after,
            Some(2 * SECOND)
        );
        // A malformed retry-after-ms leaves the valid Retry-After in force.
        let bad_ms = [("retry-after", "3"), ("retry-after-ms", "x")];
        assert_eq!(
            classify_response(&answer(429, &bad_ms, b"")).retry_after,
            Some(3 * SECOND)
        );
    }

    #[test]
    fn retry_after_reads_http_dates() {
        #[allow(clippy::disallowed_methods)] // an HTTP-date is wall time; the test builds one
        let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(31));
        let response = Response::builder()
            .status(503)
            .header("retry-after", date)
            .body(Body::empty())
            .unwrap();
        let wait = classify_response(&response).retry_after.expect("a wait");
        assert!(wait > 25 * SECOND && wait <= 31 * SECOND, "{wait:?}");
        let past = [("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")];
        assert_eq!(
            classify_response(&answer(503, &past, b"")).retry_after,
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn problem_json_type_is_read() {
        let body = br#"{"type": "urn:ballast:idempotency_in_progress", "title": "in progress"}"#;
        let info = classify_response(&answer(
            409,
            &[("content-type", "application/problem+json")],
            body,
        ));
        assert_eq!(info.problem, ProblemKind::IdempotencyInProgress);
    }

    #[test]
    fn provider_error_codes_are_read() {
        let cases: [(&[u8], ProblemKind); 4] = [
            (
                br#"{"error": {"type": "idempotency_error", "code": "idempotency_key_in_use"}}"#,
                ProblemKind::IdempotencyInProgress,
            ),
            (
                br#"{"error": {"type": "insufficient_quota", "code": null}}"#,
                ProblemKind::InsufficientQuota,
            ),
            (
                br#"{"error": {"code": "context_length_exceeded", "type": "invalid_request_error"}}"#,
                ProblemKind::ContextLengthExceeded,
            ),
            (
                br#"{"error": {"code": "rate_limit_exceeded", "type": "requests"}}"#,
                ProblemKind::None,
            ),
        ];
        for (body, expected) in cases {
            let response = Response::builder()
                .status(400)
                .header("content-type", "application/json; charset=utf-8")
                .body(Body::whole(Bytes::copy_from_slice(body)))
                .unwrap();
            assert_eq!(
                classify_response(&response).problem,
                expected,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_body_starting_with_a_brace_is_read_without_a_content_type() {
        let body = b"  \n{\"error\": {\"code\": \"insufficient_quota\"}}";
        assert_eq!(
            classify_response(&answer(429, &[], body)).problem,
            ProblemKind::InsufficientQuota
        );
        // Not JSON by type nor by shape: not parsed.
        let text = b"error code: insufficient_quota";
        assert_eq!(
            classify_response(&answer(429, &[("content-type", "text/plain")], text)).problem,
            ProblemKind::None
        );
    }

    #[test]
    fn message_text_is_never_read() {
        let body = br#"{"error": {"message": "idempotency_key_in_use insufficient_quota", "code": "oops"}}"#;
        assert_eq!(
            classify_response(&answer(409, &[], body)).problem,
            ProblemKind::None
        );
    }

    #[test]
    fn success_bodies_are_not_parsed_for_problems() {
        let body = br#"{"error": {"code": "insufficient_quota"}}"#;
        assert_eq!(
            classify_response(&answer(200, &[], body)).problem,
            ProblemKind::None
        );
    }

    #[test]
    fn odd_json_shapes_are_no_problem() {
        let bodies: [&[u8]; 6] = [
            br#"{"error": "insufficient_quota"}"#,
            br#"{"error": {"code": 429}}"#,
            br#"{"type": 7}"#,
            br#"{"error": ["insufficient_quota"]}"#,
            b"{",
            br#"{"error": {"code": "insufficient_quota""#,
        ];
        for body in bodies {
            let response = Response::builder()
                .status(500)
                .body(Body::whole(Bytes::copy_from_slice(body)))
                .unwrap();
            assert_eq!(classify_response(&response).problem, ProblemKind::None);
        }
    }

    #[test]
    fn replays_are_recognised() {
        assert!(is_replayed(&answer(200, &[("idempotent-replayed", "TRUE")], b"")));
        assert!(!is_replayed(&answer(
            200,
            &[("idempotent-replayed", "false")],
            b""
        )));
        assert!(!is_replayed(&answer(200, &[], b"")));
    }

    proptest! {
        #[test]
        fn never_panics_on_any_body(body in proptest::collection::vec(any::<u8>(), 0..256), status in 100u16..600) {
            let response = Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::whole(body))
                .unwrap();
            let info = classify_response(&response);
            prop_assert_eq!(info.status, status);
        }

        #[test]
        fn never_panics_on_any_json_like_body(text in r#"\{("(type|error|code)"|[:,\[\]{}0-9"a-z_ ])*\}?"#) {
            let response = Response::builder().status(500).body(Body::whole(text)).unwrap();
            let _ = classify_response(&response);
        }

        #[test]
        fn never_panics_on_any_header_text(value in "[ -~]{0,40}") {
            let response = Response::builder()
                .status(503)
                .header("retry-after", value.as_str())
                .header("retry-after-ms", value.as_str())
                .header("x-should-retry", value.as_str())
                .body(Body::empty())
                .unwrap();
            let _ = classify_response(&response);
        }
    }
}
