//! A model call's result as the caller's answer.
//!
//! - **An answer**: the provider's body byte for byte, its status, and what Ballast did: `ballast-attempts`
//!   (attempts handed to a provider, over every deployment tried), `ballast-remaining-ms`, `ballast-fallback`
//!   (the deployment that answered, when it was not the first tried), `ballast-truncated` (messages dropped to
//!   fit the context); and the provider's rate-limit headers and request id (`anthropic-ratelimit-*`,
//!   `x-ratelimit-*`, `request-id`), which a provider's error answer passes on too.
//! - **A stream**: `200` and `text/event-stream` at its commit point, with the same headers; then the API's
//!   events, and after a failure the API's own error event and nothing after it (`ModelStream::into_sse`).
//! - **An error**, OpenAI-style with a stable code in `error.code` and an explicit `x-should-retry`:
//!   - the provider's own answer to a request it refused as such (a 4xx but 408, 409 and 429:
//!     `context_length_exceeded`, an invalid request; and a 429 of a spent quota or spend limit, which no wait
//!     fixes) passes through as it came — its code is what the caller needs (LangChain matches
//!     `context_length_exceeded`, Anthropic's SDKs raise on `enforced_spend_limit_reached`); `x-should-retry:
//!     false`;
//!   - a provider's 5xx, 408 or 429 after the gateway's retries keeps its message, `type` and `param`, with the
//!     stable code in `code` (`upstream_error`, `retry_budget_exhausted`, `run_allowance_exhausted`) and the
//!     provider's own in `upstream_code`; `x-should-retry: false`: the retries were spent here, and an SDK that
//!     retried would multiply them;
//!   - no answer to pass on: as the tool routes map it (`tool_answer.rs`) — `overloaded` 503 inviting a retry
//!     after `Retry-After` when shed for room or throttled, `circuit_open` 503, `deadline_exceeded` 504,
//!     `upstream_error` 502 — in OpenAI's envelope;
//!   - refused before sending: `invalid_request` 400 (404 for a response this caller did not make here),
//!     `store_unavailable` 503.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use ballast::model::{ModelAnswer, ModelStream, Truncation};
use ballast::{CallError, Refusal, report::OutcomeReport};
use ballast_core::{ErrorCode, StopReason};
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use http::{HeaderValue, StatusCode, header};
use serde_json::Value;

use super::request::Settled;
use crate::error::{
    AppError, OpenAiError, bool_text, json_response, openai_body, openai_error, set_retry_after,
};
use crate::telemetry::CallTrace;
use ballast::headers::{BALLAST_ATTEMPTS, BALLAST_CODE, BALLAST_FALLBACK, BALLAST_TRUNCATED, X_SHOULD_RETRY};

/// A call's answer or its error.
pub(super) fn from_answer<T>(result: Result<ModelAnswer<T>, CallError>, settled: &Settled) -> Response {
    let traced = (settled.traced.clone()).map(|called| {
        let report = result.as_ref().map_or_else(|e| e.report(), |a| &a.report);
        CallTrace::ended(called, report.clone())
    });
    let mut response = match result {
        Ok(answer) => answered(answer, settled),
        Err(error) => failed(error, settled),
    };
    if let Some(traced) = traced {
        response.extensions_mut().insert(traced);
    }
    response
}

/// A streamed call's stream (written by `into_sse`, its API's writer) or its error.
pub(super) fn from_stream<E, S>(
    result: Result<ModelStream<E>, CallError>,
    into_sse: impl FnOnce(ModelStream<E>) -> S,
    settled: &Settled,
) -> Response
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let traced = (settled.traced.clone()).map(|called| match &result {
        Ok(stream) => CallTrace::streamed(called, stream.report_reader()),
        Err(error) => CallTrace::ended(called, error.report().clone()),
    });
    let mut response = match result {
        Ok(stream) => {
            let head = StreamHead::of(&stream);
            streamed(head, into_sse(stream), settled)
        }
        Err(error) => failed(error, settled),
    };
    if let Some(traced) = traced {
        response.extensions_mut().insert(traced);
    }
    response
}

/// A 2xx answer: the provider's body as it came.
pub(super) fn answered<T>(answer: ModelAnswer<T>, settled: &Settled) -> Response {
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    let content_type = (answer.headers.get(header::CONTENT_TYPE).cloned())
        .unwrap_or(HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    pass_on(&answer.headers, response.headers_mut());
    what_ballast_did(&mut response, &answer.report, answer.truncated, settled);
    response
}

/// The provider's headers a caller reads of an answer, passed on: its rate limits (Anthropic's
/// `anthropic-ratelimit-*`, OpenAI's `x-ratelimit-*`) and its request id (`request-id`, `x-request-id` is the
/// gateway's own).
fn pass_on(upstream: &http::HeaderMap, headers: &mut http::HeaderMap) {
    for (name, value) in upstream {
        let name_text = name.as_str();
        if name_text.starts_with("anthropic-ratelimit-")
            || name_text.starts_with("x-ratelimit-")
            || name_text == "request-id"
        {
            headers.append(name.clone(), value.clone());
        }
    }
}

/// What a stream said about itself at its commit point.
struct StreamHead {
    report: OutcomeReport,
    truncated: Option<Truncation>,
    upstream: http::HeaderMap,
}

impl StreamHead {
    /// The head of `stream`, read before it is consumed.
    fn of<E>(stream: &ModelStream<E>) -> Self {
        StreamHead {
            report: stream.report(),
            truncated: stream.truncated(),
            upstream: stream.headers().clone(),
        }
    }
}

/// A committed stream: `200`, `text/event-stream`, the events as they come.
fn streamed(
    head: StreamHead,
    events: impl Stream<Item = Bytes> + Send + 'static,
    settled: &Settled,
) -> Response {
    let mut response = Response::new(Body::from_stream(events.map(Ok::<_, Infallible>)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies that buffer (nginx) would hold the events back.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    pass_on(&head.upstream, headers);
    what_ballast_did(&mut response, &head.report, head.truncated, settled);
    response
}

/// A call that did not succeed (module docs).
pub(super) fn failed(error: CallError, settled: &Settled) -> Response {
    let code = error.code();
    let attempts = attempts_made(error.report());
    let retry_after = error.retry_after();
    let mut response = match error {
        CallError::Upstream {
            status,
            body,
            bytes,
            report,
            headers,
            ..
        } => {
            let mut response = upstream_error(status, &body, bytes, code, report.stop_reason(), retry_after);
            pass_on(&headers, response.headers_mut());
            response
        }
        CallError::Failed { target, error, .. } => {
            OpenAiError(without_an_answer(&target, code, &error, attempts, settled)).into_response()
        }
        CallError::Refused { target, refusal, .. } => refused(&target, &refusal, settled),
        CallError::Malformed { target, reason, .. } => OpenAiError(AppError::bad_gateway(
            ErrorCode::UpstreamError,
            format!("{target}: the upstream's answer is {reason}"),
        ))
        .into_response(),
        other => OpenAiError(AppError::bad_gateway(code, other.to_string())).into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(BALLAST_ATTEMPTS, HeaderValue::from(attempts));
    remaining(headers, settled);
    response
}

/// A call that ended without an answer to pass on, as the tool routes map it — but inviting a retry only when
/// nothing reached a provider, and a call cut by the gateway's shutdown before anything was sent as a shed: the
/// SDK retries it against another instance.
fn without_an_answer(
    target: &str,
    code: ErrorCode,
    error: &ballast::Error,
    attempts: usize,
    settled: &Settled,
) -> AppError {
    if matches!(error, ballast::Error::Cancelled) && settled.closing.is_cancelled() && attempts == 0 {
        return AppError::Call {
            code: ErrorCode::Overloaded,
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!(
                "{target}: this gateway is shutting down and sent nothing; retry (another instance)"
            ),
            retry_after: Some(std::time::Duration::from_secs(1)),
            should_retry: true,
            shed: Some("draining"),
        };
    }
    crate::tool_answer::call_error(target, code, error).inviting_only_if_unsent(attempts)
}

/// A response id no route knows for this caller.
pub(super) fn unknown_response(id: &str) -> Response {
    let message = format!(
        "no response {id:?} was made through this gateway by this caller (or its record has expired); a response is \
         retrieved, deleted or cancelled at the deployment that made it"
    );
    let mut response = openai_error(
        StatusCode::NOT_FOUND,
        ErrorCode::InvalidRequest.as_str(),
        &message,
    );
    not_retryable(&mut response, ErrorCode::InvalidRequest);
    response
}

/// The provider's own error answer (module docs).
fn upstream_error(
    status: u16,
    body: &Value,
    bytes: Bytes,
    code: ErrorCode,
    stop: Option<&StopReason>,
    retry_after: Option<std::time::Duration>,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    // A spent quota or spend limit (a 429 no wait fixes, never retried) is the provider's refusal as such too: its
    // own body says which (Anthropic's SDKs raise `EnforcedSpendLimitReachedError` from its `details`).
    let spent = matches!(stop, Some(StopReason::InsufficientQuota { .. }));
    let refused_as_such = status.is_client_error()
        && (spent || !matches!(status.as_u16(), 408 | 409 | 429))
        && body.get("error").is_some();
    let mut response = if refused_as_such {
        let mut response = Response::new(Body::from(bytes));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    } else {
        let provider = body.get("error");
        let text = |key: &str| provider.and_then(|e| e.get(key)).and_then(Value::as_str);
        // Why the gateway stopped, in the same words as the code: one truth per answer.
        let why = match stop {
            Some(stop @ (StopReason::Deadline(_) | StopReason::RetryAfterTooLong { .. })) => stop.to_string(),
            _ => "the gateway's retries are spent".to_owned(),
        };
        let message = text("message").map_or_else(
            || format!("the upstream answered {} and {why}", status.as_u16()),
            |m| format!("{m} (the upstream answered {}; {why})", status.as_u16()),
        );
        let mut body = openai_body(status, code.as_str(), &message);
        if let (Some(provider), Some(error)) =
            (provider, body.get_mut("error").and_then(Value::as_object_mut))
        {
            for key in ["type", "param"] {
                if let Some(value) = provider.get(key).filter(|v| !v.is_null()) {
                    error.insert(key.to_owned(), value.clone());
                }
            }
            if let Some(code) = provider.get("code").filter(|v| !v.is_null()) {
                error.insert("upstream_code".to_owned(), code.clone());
            }
        }
        json_response(status, &body)
    };
    // The provider's own wait, passed on so the caller can back off by itself (jittered and capped at 60 s as
    // every `Retry-After` the gateway sends).
    if let Some(wait) = retry_after {
        set_retry_after(response.headers_mut(), wait);
    }
    not_retryable(&mut response, code);
    response
}

/// A call refused before anything was sent.
fn refused(target: &str, refusal: &Refusal, settled: &Settled) -> Response {
    let code = refusal.code();
    let status = match (refusal, code) {
        (_, ErrorCode::StoreUnavailable) => StatusCode::SERVICE_UNAVAILABLE,
        (Refusal::UnknownState(_), _) if settled.about_a_response => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_REQUEST,
    };
    let message = format!("{target}: {refusal}; nothing was sent");
    let mut response = openai_error(status, code.as_str(), &message);
    not_retryable(&mut response, code);
    response
}

/// `ballast-code` and `x-should-retry: false`.
fn not_retryable(response: &mut Response, code: ErrorCode) {
    let headers = response.headers_mut();
    headers.insert(BALLAST_CODE, HeaderValue::from_static(code.as_str()));
    headers.insert(X_SHOULD_RETRY, HeaderValue::from_static(bool_text(false)));
}

/// The headers that say what Ballast did for an answer.
fn what_ballast_did(
    response: &mut Response,
    report: &OutcomeReport,
    truncated: Option<Truncation>,
    settled: &Settled,
) {
    let headers = response.headers_mut();
    headers.insert(BALLAST_ATTEMPTS, HeaderValue::from(attempts_made(report)));
    remaining(headers, settled);
    if report.answered_by_fallback()
        && let Ok(name) = HeaderValue::from_str(&report.answering().target)
    {
        headers.insert(BALLAST_FALLBACK, name);
    }
    if let Some(truncated) = truncated {
        headers.insert(BALLAST_TRUNCATED, HeaderValue::from(truncated.dropped_messages));
    }
}

/// `ballast-remaining-ms`: what is left of the call's deadline; `ballast-run: restarted` when the call started
/// its run again.
fn remaining(headers: &mut http::HeaderMap, settled: &Settled) {
    crate::error::insert_remaining(headers, &settled.deadline);
    crate::error::tell_restart(headers, settled.run_restarted);
}

/// The attempts handed to providers, over every deployment tried.
fn attempts_made(report: &OutcomeReport) -> usize {
    let mut count = 0;
    let mut current = Some(report);
    while let Some(report) = current {
        count += report.attempts_made();
        current = report.fallback_report.as_deref();
    }
    count
}
