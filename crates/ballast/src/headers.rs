//! Header names as `http::HeaderName` constants, and the header checks more than one layer makes.
//!
//! Why constants: a header looked up or inserted by `&str` has its name parsed and validated on every call; the
//! stack touches a dozen headers per call, so the names are parsed once, here (measured on the tool-call bench).

use http::{HeaderName, Response};

pub(crate) const BALLAST_TIMEOUT_MS: HeaderName = HeaderName::from_static(ballast_core::BALLAST_TIMEOUT_MS);
pub(crate) const ENVOY_EXPECTED_RQ_TIMEOUT_MS: HeaderName =
    HeaderName::from_static(ballast_core::ENVOY_EXPECTED_RQ_TIMEOUT_MS);
pub(crate) const BALLAST_ATTEMPT: HeaderName = HeaderName::from_static(ballast_core::BALLAST_ATTEMPT);
pub(crate) const BALLAST_HOP: HeaderName = HeaderName::from_static(ballast_core::BALLAST_HOP);
pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static(ballast_core::TRACEPARENT);
pub(crate) const RETRY_AFTER: HeaderName = HeaderName::from_static(ballast_core::RETRY_AFTER);
pub(crate) const RETRY_AFTER_MS: HeaderName = HeaderName::from_static(ballast_core::RETRY_AFTER_MS);
pub(crate) const X_SHOULD_RETRY: HeaderName = HeaderName::from_static(ballast_core::X_SHOULD_RETRY);
pub(crate) const BALLAST_OUTCOME: HeaderName = HeaderName::from_static(ballast_core::BALLAST_OUTCOME);
/// The stable code of an answer Ballast made itself (its problem type's last part), for a caller that reads
/// headers only.
pub(crate) const BALLAST_CODE: HeaderName = HeaderName::from_static("ballast-code");
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub(crate) const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
pub(crate) const BALLAST_RUN_ID: HeaderName = HeaderName::from_static("ballast-run-id");
pub(crate) const BALLAST_STEP_ID: HeaderName = HeaderName::from_static("ballast-step-id");

/// Whether the answer says it was replayed from an earlier attempt (`Idempotent-Replayed: true`): not counted
/// by the breaker, and reported as a replay.
pub(crate) fn is_replayed<B>(response: &Response<B>) -> bool {
    response
        .headers()
        .get(IDEMPOTENT_REPLAYED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}
