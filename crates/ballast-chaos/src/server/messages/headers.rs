//! The headers of Anthropic's answers: `request-id` on every one (the same id as the error body's `request_id`),
//! and on a `200` or a `429` the rate-limit headers a client may read to pace itself.
//!
//! The numbers are fixed and plausible — the mock has no token bucket; its rate limits are the profile's faults —
//! with one rule a client can rely on: a `429` says nothing is left (`remaining: 0`). The resets are the next
//! whole second, in RFC 3339 as Anthropic writes them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;

/// `request-id`: Anthropic's id of one answer.
pub(super) const REQUEST_ID: HeaderName = HeaderName::from_static("request-id");

/// Requests a minute, as the headers say.
const REQUESTS_LIMIT: u64 = 4_000;
/// Tokens a minute, as the headers say.
const TOKENS_LIMIT: u64 = 400_000;

/// Adds Anthropic's headers to `response`, answered at `wall` with `request_id`.
pub(super) fn stamp(response: &mut Response, request_id: &str, wall: SystemTime) {
    let status = response.status();
    let headers = response.headers_mut();
    if let Ok(id) = HeaderValue::from_str(request_id) {
        headers.insert(REQUEST_ID, id);
    }
    let limited = status == StatusCode::TOO_MANY_REQUESTS;
    if status != StatusCode::OK && !limited {
        return;
    }
    let (requests_left, tokens_left) = if limited {
        (0, 0)
    } else {
        (REQUESTS_LIMIT - 1, TOKENS_LIMIT)
    };
    let reset = rfc3339(next_second(wall));
    let values = [
        ("anthropic-ratelimit-requests-limit", REQUESTS_LIMIT.to_string()),
        (
            "anthropic-ratelimit-requests-remaining",
            requests_left.to_string(),
        ),
        ("anthropic-ratelimit-requests-reset", reset.clone()),
        ("anthropic-ratelimit-tokens-limit", TOKENS_LIMIT.to_string()),
        ("anthropic-ratelimit-tokens-remaining", tokens_left.to_string()),
        ("anthropic-ratelimit-tokens-reset", reset),
    ];
    for (name, value) in values {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

/// The first whole second after `at`.
fn next_second(at: SystemTime) -> SystemTime {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    UNIX_EPOCH + Duration::from_secs(since.as_secs() + 1)
}

/// `at` (whole seconds) as RFC 3339 in UTC: `2026-05-01T12:00:01Z`.
fn rfc3339(at: SystemTime) -> String {
    let seconds = at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, in_day) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        in_day / 3_600,
        in_day % 3_600 / 60,
        in_day % 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn instants_are_written_in_rfc_3339() {
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(1_700_000_000)), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00Z", "a leap day");
        assert_eq!(rfc3339(at(4_102_444_799)), "2099-12-31T23:59:59Z");
        assert_eq!(
            rfc3339(next_second(UNIX_EPOCH + Duration::from_millis(1_500))),
            "1970-01-01T00:00:02Z"
        );
    }

    #[test]
    fn a_429_says_nothing_is_left_and_an_error_carries_only_its_id() {
        let mut limited = Response::new(axum::body::Body::empty());
        *limited.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        stamp(&mut limited, "req_1", at(0));
        assert_eq!(limited.headers()["request-id"], "req_1");
        assert_eq!(limited.headers()["anthropic-ratelimit-requests-remaining"], "0");
        assert_eq!(
            limited.headers()["anthropic-ratelimit-requests-reset"],
            "1970-01-01T00:00:01Z"
        );
        let mut overloaded = Response::new(axum::body::Body::empty());
        *overloaded.status_mut() = StatusCode::from_u16(529).expect("a status");
        stamp(&mut overloaded, "req_2", at(0));
        assert_eq!(overloaded.headers()["request-id"], "req_2");
        assert!(
            overloaded
                .headers()
                .get("anthropic-ratelimit-requests-limit")
                .is_none()
        );
    }
}
