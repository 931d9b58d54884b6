//! The header names Ballast reads and writes, as `http::HeaderName` constants — one table for the library and the
//! gateway (the names of the wire protocol as text are `ballast-core`'s) — and the `Retry-After` reader and
//! writer every answer uses.
//!
//! Why constants: a header looked up or inserted by `&str` has its name parsed and validated on every call; the
//! stack touches a dozen headers per call, so the names are parsed once, here (measured on the tool-call bench).

use std::time::Duration;

use ballast_core::{ResponseInfo, WireError, parse_retry_after_ms};
use http::{HeaderMap, HeaderName, HeaderValue, Response};

use crate::clock;

/// The deadline a caller gives a call, in milliseconds.
pub const BALLAST_TIMEOUT_MS: HeaderName = HeaderName::from_static(ballast_core::BALLAST_TIMEOUT_MS);
/// Envoy's per-request timeout, read as a deadline.
pub const ENVOY_EXPECTED_RQ_TIMEOUT_MS: HeaderName =
    HeaderName::from_static(ballast_core::ENVOY_EXPECTED_RQ_TIMEOUT_MS);
/// The attempt number Ballast sends upstream (1-based).
pub const BALLAST_ATTEMPT: HeaderName = HeaderName::from_static(ballast_core::BALLAST_ATTEMPT);
/// Says a request came through a Ballast that retries itself.
pub const BALLAST_HOP: HeaderName = HeaderName::from_static(ballast_core::BALLAST_HOP);
/// W3C trace context.
pub const TRACEPARENT: HeaderName = HeaderName::from_static(ballast_core::TRACEPARENT);
/// The wait an answer asks for, in seconds (or an HTTP-date).
pub const RETRY_AFTER: HeaderName = HeaderName::from_static(ballast_core::RETRY_AFTER);
/// The wait an answer asks for, in milliseconds (OpenAI's; its SDKs read it first).
pub const RETRY_AFTER_MS: HeaderName = HeaderName::from_static(ballast_core::RETRY_AFTER_MS);
/// Whether a retry of this request can succeed.
pub const X_SHOULD_RETRY: HeaderName = HeaderName::from_static(ballast_core::X_SHOULD_RETRY);
/// `unknown` when a side effect may or may not have happened.
pub const BALLAST_OUTCOME: HeaderName = HeaderName::from_static(ballast_core::BALLAST_OUTCOME);
/// The deadline's time left when the answer was written, in milliseconds.
pub const BALLAST_REMAINING_MS: HeaderName = HeaderName::from_static(ballast_core::BALLAST_REMAINING_MS);
/// The stable code of an answer Ballast made itself (its problem type's last part), for a caller that reads
/// headers only.
pub const BALLAST_CODE: HeaderName = HeaderName::from_static("ballast-code");
/// The caller's idempotency key.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// `true` on an answer replayed from the record of an earlier request with the same key.
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
/// The agent request (run) a call belongs to.
pub const BALLAST_RUN_ID: HeaderName = HeaderName::from_static("ballast-run-id");
/// The step of the run a call is (a key is derived from run and step).
pub const BALLAST_STEP_ID: HeaderName = HeaderName::from_static("ballast-step-id");
/// Which call of the step this is, when a step makes several.
pub const BALLAST_CALL_ORDINAL: HeaderName = HeaderName::from_static("ballast-call-ordinal");
/// The call's priority class.
pub const BALLAST_PRIORITY: HeaderName = HeaderName::from_static("ballast-priority");
/// Attempts handed to upstreams for an answer.
pub const BALLAST_ATTEMPTS: HeaderName = HeaderName::from_static("ballast-attempts");
/// Which fallback answered.
pub const BALLAST_FALLBACK: HeaderName = HeaderName::from_static("ballast-fallback");
/// The idempotency key a side-effecting call used.
pub const BALLAST_IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("ballast-idempotency-key");
/// `replayed` on a repeat of a final failure answered from it.
pub const BALLAST_REPEAT: HeaderName = HeaderName::from_static("ballast-repeat");
/// `restarted` when a call started its run again.
pub const BALLAST_RUN: HeaderName = HeaderName::from_static("ballast-run");
/// Why a call was shed.
pub const BALLAST_SHED: HeaderName = HeaderName::from_static("ballast-shed");
/// How many messages were dropped to fit a context window.
pub const BALLAST_TRUNCATED: HeaderName = HeaderName::from_static("ballast-truncated");
/// The request's id.
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// A Stainless-generated SDK's retry count (0 on its first try).
pub const X_STAINLESS_RETRY_COUNT: HeaderName = HeaderName::from_static("x-stainless-retry-count");

/// The wait an answer asks for: `retry-after-ms`, else `Retry-After` as delta-seconds or an HTTP-date (its time
/// from the wall clock's now); `None` when it sent neither, or only malformed ones (logged at debug level).
/// When both are present the millisecond one wins ([`ResponseInfo::with_retry_after_headers`]).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    ResponseInfo::status(0)
        .with_retry_after_headers(
            read(headers, &RETRY_AFTER, clock::retry_after),
            read(headers, &RETRY_AFTER_MS, parse_retry_after_ms),
        )
        .retry_after
}

/// `Retry-After` in whole seconds (rounded up: never earlier than meant, and at least 1) and `retry-after-ms`
/// exactly, which the OpenAI SDKs read first.
pub fn set_retry_after(headers: &mut HeaderMap, wait: Duration) {
    let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    headers.insert(RETRY_AFTER, HeaderValue::from(millis.div_ceil(1000).max(1)));
    headers.insert(RETRY_AFTER_MS, HeaderValue::from(millis));
}

/// The header `name` read by `parse`; `None` when absent, not text, or malformed (logged: a hint a peer sent
/// wrong is ignored, never a failure).
pub(crate) fn read<T>(
    headers: &HeaderMap,
    name: &HeaderName,
    parse: impl Fn(&str) -> Result<T, WireError>,
) -> Option<T> {
    let value = headers.get(name)?;
    let Ok(text) = value.to_str() else {
        tracing::debug!(header = %name, value = ?value, "ignoring a header that is not text");
        return None;
    };
    match parse(text) {
        Ok(parsed) => Some(parsed),
        Err(error) => {
            tracing::debug!(header = %name, %error, "ignoring a malformed header");
            None
        }
    }
}

/// Whether the answer says it was replayed from an earlier attempt (`Idempotent-Replayed: true`): not counted
/// by the breaker, and reported as a replay.
pub(crate) fn is_replayed<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get(IDEMPOTENT_REPLAYED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&HeaderName, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| ((*name).clone(), HeaderValue::from_str(value).unwrap()))
            .collect()
    }

    #[test]
    fn the_asked_wait_is_the_millisecond_header_else_the_seconds_and_a_bad_hint_is_none() {
        let both = headers(&[(&RETRY_AFTER, "2"), (&RETRY_AFTER_MS, "1500")]);
        assert_eq!(retry_after(&both), Some(Duration::from_millis(1500)));
        let seconds = headers(&[(&RETRY_AFTER, "3")]);
        assert_eq!(retry_after(&seconds), Some(Duration::from_secs(3)));
        let past = headers(&[(&RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!(
            retry_after(&past),
            Some(Duration::ZERO),
            "a date in the past: no wait"
        );
        let bad = headers(&[(&RETRY_AFTER, "soon"), (&RETRY_AFTER_MS, "-1")]);
        assert_eq!(retry_after(&bad), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn a_wait_is_written_in_whole_seconds_rounded_up_and_exactly_in_milliseconds() {
        let mut written = HeaderMap::new();
        set_retry_after(&mut written, Duration::from_millis(1200));
        assert_eq!(
            (&written[RETRY_AFTER], &written[RETRY_AFTER_MS]),
            (
                &"2".parse::<HeaderValue>().unwrap(),
                &"1200".parse::<HeaderValue>().unwrap()
            )
        );
        set_retry_after(&mut written, Duration::ZERO);
        assert_eq!(written[RETRY_AFTER], "1", "never 0: a client would retry at once");
        assert_eq!(
            retry_after(&written),
            Some(Duration::ZERO),
            "the exact wait reads back"
        );
    }
}
