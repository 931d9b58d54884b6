//! The header names the gateway reads and writes, parsed once.

use http::HeaderName;

pub(crate) const BALLAST_ATTEMPTS: HeaderName = HeaderName::from_static("ballast-attempts");
pub(crate) const BALLAST_CALL_ORDINAL: HeaderName = HeaderName::from_static("ballast-call-ordinal");
pub(crate) const BALLAST_CODE: HeaderName = HeaderName::from_static("ballast-code");
pub(crate) const BALLAST_FALLBACK: HeaderName = HeaderName::from_static("ballast-fallback");
pub(crate) const BALLAST_HOP: HeaderName = HeaderName::from_static(ballast_core::BALLAST_HOP);
pub(crate) const BALLAST_IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("ballast-idempotency-key");
pub(crate) const BALLAST_OUTCOME: HeaderName = HeaderName::from_static(ballast_core::BALLAST_OUTCOME);
pub(crate) const BALLAST_PRIORITY: HeaderName = HeaderName::from_static("ballast-priority");
pub(crate) const BALLAST_REMAINING_MS: HeaderName =
    HeaderName::from_static(ballast_core::BALLAST_REMAINING_MS);
pub(crate) const BALLAST_REPEAT: HeaderName = HeaderName::from_static("ballast-repeat");
pub(crate) const BALLAST_RUN: HeaderName = HeaderName::from_static("ballast-run");
pub(crate) const BALLAST_RUN_ID: HeaderName = HeaderName::from_static("ballast-run-id");
pub(crate) const BALLAST_SHED: HeaderName = HeaderName::from_static("ballast-shed");
pub(crate) const BALLAST_STEP_ID: HeaderName = HeaderName::from_static("ballast-step-id");
pub(crate) const BALLAST_TRUNCATED: HeaderName = HeaderName::from_static("ballast-truncated");
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub(crate) const RETRY_AFTER_MS: HeaderName = HeaderName::from_static(ballast_core::RETRY_AFTER_MS);
pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static(ballast_core::TRACEPARENT);
pub(crate) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub(crate) const X_SHOULD_RETRY: HeaderName = HeaderName::from_static(ballast_core::X_SHOULD_RETRY);
pub(crate) const X_STAINLESS_RETRY_COUNT: HeaderName = HeaderName::from_static("x-stainless-retry-count");
