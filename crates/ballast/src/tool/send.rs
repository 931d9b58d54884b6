//! The call through the stack: the request (refused when too large) and the 409 "in progress" wait.
//!
//! Why the client polls and not the retry layer: a 409 in progress is an answer to wait on for as long as the
//! deadline allows, not a failure to retry a few times. Each poll is a trip through the whole stack (deadline,
//! admission, retry, breaker, attempt), marked [`Polling`] so the retry layer hands the 409 back at once without
//! spending a retry or depositing in the budget, and numbers the poll's attempts after the operation's earlier
//! ones (`ballast-attempt` keeps counting). The waits between polls are `poll.rs`'s.

use ballast_core::{ProblemKind, ResponseInfo, StopReason};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderValue, Request, Response, StatusCode};

use super::poll::PollWaits;
use super::{ToolCall, ToolClient};
use crate::headers::{BALLAST_RUN_ID, BALLAST_STEP_ID, IDEMPOTENCY_KEY};
use crate::retry::Polling;
use crate::{CallContext, Error, OutcomeReport, Report, classify_response, clock};

impl ToolClient {
    /// Sends the call through the stack; while the upstream answers 409 "in progress" for this key, waits (see
    /// `poll.rs`) and asks again, until another answer, the deadline or cancellation.
    ///
    /// `first` is the call's first trip, already under way ([`ToolClient::send`]): the request itself is never
    /// held here, where every poll would carry it.
    pub(super) async fn send_until_settled(
        &self,
        first: BoxFuture<'static, Result<Response<Bytes>, Error>>,
        call: &ToolCall,
        ctx: &CallContext,
    ) -> Result<Response<Bytes>, Error> {
        let mut waits: Option<PollWaits> = None;
        let mut trip = first;
        loop {
            let response = trip.await?;
            let Some(info) = in_progress(&response) else {
                return Ok(response);
            };
            let now = clock::now();
            let wait = waits.get_or_insert_with(PollWaits::new).next(
                info.retry_after,
                &ctx.effective_deadline(),
                now,
            );
            let wait = match wait {
                Ok(wait) => wait,
                Err(exceeded) => {
                    let stop = StopReason::Deadline(exceeded);
                    ctx.report.update(|r| {
                        r.stop = Some(stop);
                        r.code = Some(stop.code());
                    });
                    return Ok(response);
                }
            };
            tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return Err(Error::Cancelled),
                () = clock::sleep_until(now + wait) => {}
            }
            // A poll sends the same request again, built anew: cheaper for the common call, which never polls,
            // than a copy of the first kept in case.
            let key = ctx.report.read(|r| {
                r.idempotency_key
                    .as_deref()
                    .and_then(|k| HeaderValue::from_str(k).ok())
            });
            trip = self.send(self.request(call, key)?, ctx, attempts_so_far(&ctx.report));
        }
    }

    /// One trip through the stack: `request` carrying the call's context and the poll marker (`attempts_before`:
    /// the operation's attempts so far).
    pub(super) fn send(
        &self,
        mut request: Request<Bytes>,
        ctx: &CallContext,
        attempts_before: u32,
    ) -> BoxFuture<'static, Result<Response<Bytes>, Error>> {
        request.extensions_mut().insert(ctx.clone());
        request.extensions_mut().insert(Polling { attempts_before });
        self.inner.stack.call(request)
    }

    /// The call's request with its `Idempotency-Key` (`key`), without its context (built again for each poll).
    /// Arguments whose JSON is over the server's `body_limit` are refused here, before anything is sent.
    pub(super) fn request(&self, call: &ToolCall, key: Option<HeaderValue>) -> Result<Request<Bytes>, Error> {
        let upstream = &self.inner.tool.upstream;
        let body = serde_json::to_vec(&call.arguments).map_err(|e| Error::transport(false, e))?;
        let limit = self.inner.server.body_limit;
        if u64::try_from(body.len()).unwrap_or(u64::MAX) > limit {
            return Err(Error::BodyTooLarge {
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            });
        }
        let mut request = match &self.inner.target {
            // Parsed once: the request is put together in place (no builder moving it at every step).
            Some((method, uri)) => {
                let mut request = Request::new(Bytes::from(body));
                *request.method_mut() = method.clone();
                *request.uri_mut() = uri.clone();
                request
            }
            None => Request::builder()
                .method(upstream.method.as_str())
                .uri(&upstream.url)
                .body(Bytes::from(body))
                .map_err(|e| Error::transport(false, e))?,
        };
        request.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let headers = request.headers_mut();
        if let Some(key) = key {
            headers.insert(IDEMPOTENCY_KEY, key);
        }
        if let Some(run) = call.run_id.as_deref().and_then(|r| HeaderValue::from_str(r).ok()) {
            headers.insert(BALLAST_RUN_ID, run);
        }
        if let Some((step, _)) = &call.step
            && let Ok(step) = HeaderValue::from_str(step)
        {
            headers.insert(BALLAST_STEP_ID, step);
        }
        Ok(request)
    }
}

/// The answer read, when it is a 409 "in progress" for the operation's key.
pub(super) fn in_progress(response: &Response<Bytes>) -> Option<ResponseInfo> {
    if response.status() != StatusCode::CONFLICT {
        return None;
    }
    let info = classify_response(response);
    (info.problem == ProblemKind::IdempotencyInProgress).then_some(info)
}

/// The highest attempt number the report holds: the operation's attempts so far.
fn attempts_so_far(report: &Report) -> u32 {
    report.read(attempts_in)
}

/// The highest attempt number in `report`.
pub(super) fn attempts_in(report: &OutcomeReport) -> u32 {
    report.attempts.iter().map(|a| a.number).max().unwrap_or(0)
}
