//! The operation through the stack: the request (refused when too large) and the 409 "in progress" wait.
//!
//! Why the client polls and not the retry layer: a 409 in progress is an answer to wait on for as long as the
//! deadline allows, not a failure to retry a few times. Each poll is a trip through the whole stack (deadline,
//! admission, retry, breaker, attempt), run as [`Polling`] so the retry loop hands the 409 back at once without
//! spending a retry or depositing in the budget, and numbers the poll's attempts after the operation's earlier
//! ones (`ballast-attempt` keeps counting). The waits between polls are `poll.rs`'s.

use ballast_core::{ProblemKind, ResponseInfo, StopReason};
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};

use super::call::Arguments;
use super::client::Operation;
use super::poll::PollWaits;
use super::{ToolCall, ToolClient};
use crate::headers::{BALLAST_RUN_ID, BALLAST_STEP_ID, IDEMPOTENCY_KEY};
use crate::outcome::Trip;
use crate::retry::Polling;
use crate::{Body, CallContext, Error, classify_response, clock};

impl ToolClient {
    /// Sends the call through the stack; while the upstream answers 409 "in progress" for this key, waits (see
    /// `poll.rs`) and asks again, until another answer, the deadline or cancellation.
    pub(super) async fn operation(
        &self,
        call: &ToolCall,
        key: Option<HeaderValue>,
        ctx: &CallContext,
    ) -> Operation {
        let upstream = &self.inner.upstream;
        let mut waits: Option<PollWaits> = None;
        let mut polling = Polling { attempts_before: 0 };
        let mut reach = crate::outcome::Reach::Nothing;
        // Once the upstream said the operation is in progress, only a success or a replay tells how it ended: a
        // later poll that fails (503s until the retries run out, an open breaker) leaves it running, as far as
        // anyone knows.
        let mut seen_in_progress = false;
        loop {
            let mut trip = match self.request(call, key.clone(), ctx) {
                Ok(request) => upstream.trip(request, ctx, polling).await,
                Err(refused) => Trip::refused(refused),
            };
            reach = reach.then(trip.reach);
            trip.reach = reach;
            let Some(info) = trip.result.as_ref().ok().and_then(in_progress) else {
                return Operation {
                    trip,
                    in_progress: seen_in_progress,
                };
            };
            seen_in_progress = true;
            let now = clock::now();
            let wait = waits.get_or_insert_with(PollWaits::new).next(
                info.retry_after,
                &ctx.effective_deadline(),
                now,
            );
            let wait = match wait {
                Ok(wait) => wait,
                Err(exceeded) => {
                    trip.stop = Some(StopReason::Deadline(exceeded));
                    return Operation {
                        trip,
                        in_progress: true,
                    };
                }
            };
            tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => {
                    return Operation {
                        trip: Trip { result: Err(Error::Cancelled), stop: None, ..trip },
                        in_progress: true,
                    };
                }
                () = clock::sleep_until(now + wait) => {}
            }
            polling = Polling {
                attempts_before: trip.attempts,
            };
        }
    }

    /// The call's request, carrying its context and its `Idempotency-Key` (`key`); built again for each poll (the
    /// common call never polls: cheaper than a copy kept in case). Arguments whose JSON is over the server's
    /// `body_limit` are refused here, before anything is sent.
    fn request(
        &self,
        call: &ToolCall,
        key: Option<HeaderValue>,
        ctx: &CallContext,
    ) -> Result<Request<Bytes>, Error> {
        let upstream = &self.inner.tool.upstream;
        let body = match &call.arguments {
            Arguments::Value(value) => self.inner.core.encode(value)?,
            Arguments::Json(bytes) => self.inner.core.within_limit(bytes.clone())?,
        };
        let mut request = match &self.inner.target {
            // Parsed once: the request is put together in place (no builder moving it at every step).
            Some((method, uri)) => {
                let mut request = Request::new(body);
                *request.method_mut() = method.clone();
                *request.uri_mut() = uri.clone();
                request
            }
            None => Request::builder()
                .method(upstream.method.as_str())
                .uri(&upstream.url)
                .body(body)
                .map_err(|e| Error::transport(false, e))?,
        };
        let headers = request.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        // The upstream's own headers (its credentials, its API version); validation keeps them off every name set
        // here or below.
        for (name, value) in &self.inner.headers {
            headers.insert(name.clone(), value.clone());
        }
        if let Some(key) = key {
            headers.insert(IDEMPOTENCY_KEY, key);
        }
        if let Some(run) = call
            .options
            .run_id
            .as_deref()
            .and_then(|r| HeaderValue::from_str(r).ok())
        {
            headers.insert(BALLAST_RUN_ID, run);
        }
        if let Some((step, _)) = &call.step
            && let Ok(step) = HeaderValue::from_str(step)
        {
            headers.insert(BALLAST_STEP_ID, step);
        }
        request.extensions_mut().insert(ctx.clone());
        if let Some(progress) = &call.progress {
            request.extensions_mut().insert(progress.clone());
        }
        Ok(request)
    }
}

/// The answer read, when it is a 409 "in progress" for the operation's key.
pub(super) fn in_progress(response: &Response<Body>) -> Option<ResponseInfo> {
    if response.status() != StatusCode::CONFLICT {
        return None;
    }
    let info = classify_response(response);
    (info.problem == ProblemKind::IdempotencyInProgress).then_some(info)
}
