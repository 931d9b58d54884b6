//! What a route does with an error answer that no retry fixes: a context-length error (the route's opt-in
//! `models.context.on_overflow`) and a spent quota.
//!
//! Both are read by the API's own classification ([`Protocol::classify`], for OpenAI's APIs
//! [`ProviderError::classify`]): structured codes first, then the per-provider
//! context-length wordings (vLLM and Ollama say it only in text), so the route recognises what the core's retry
//! decision, which reads structured codes only, may have judged a plain 400.
//!
//! Truncation resends to the **same** deployment: it asked for less, so it may now answer. Each round drops the
//! older turns the provider's numbers say are too many ([`TruncationGoal::for_overflow`]); when it cannot drop
//! anything more the context-length error is the answer.

use ballast_config::{ModelRoute, OnOverflow};
use http::Response;

use super::api::Protocol;
use super::{ProviderError, ProviderErrorKind, Truncation, TruncationGoal};
use crate::{Body, classify_response};

/// What the route does with an error answer, as far as the context is concerned.
#[derive(Debug)]
pub(super) enum ContextVerdict {
    /// Not a context-length error.
    NotContextLength,
    /// Move to the next deployment (`on_overflow = "fallback"`).
    Fallback,
    /// Answer the error (`on_overflow = "error"`, or nothing left to drop).
    Answer,
    /// The conversation was truncated in place: send it again.
    Truncated(Truncation),
}

/// The upstream's error answer, classified as API `P` reads its errors.
pub(super) fn classify<P: Protocol>(response: &Response<Body>) -> ProviderError {
    let retry_after = classify_response(response).retry_after;
    let body = response.body().as_bytes().map_or(&[][..], |b| &b[..]);
    P::classify(response.status().as_u16(), body, retry_after)
}

/// The route's handling of `error` when it is a context-length error; `request` is truncated in place.
pub(super) fn on_context_length<P: Protocol>(
    route: &ModelRoute,
    error: &ProviderError,
    request: &mut P::Request,
) -> ContextVerdict {
    if error.kind != ProviderErrorKind::ContextLength {
        return ContextVerdict::NotContextLength;
    }
    match route.context.on_overflow {
        OnOverflow::Error => ContextVerdict::Answer,
        OnOverflow::Fallback => ContextVerdict::Fallback,
        OnOverflow::Truncate => {
            let goal = TruncationGoal::for_overflow(error.tokens.as_ref());
            match P::truncate(request, goal) {
                Ok(dropped) => ContextVerdict::Truncated(dropped),
                Err(cannot) => {
                    tracing::debug!(route = %route.name, %cannot, "context-length error: nothing left to truncate");
                    ContextVerdict::Answer
                }
            }
        }
    }
}
