//! A claimed request from `dispatched` to its end: the handler runs, its answer is stored (or the claim
//! released, or marked `outcome_unknown`), and the caller gets the answer.
//!
//! All of it runs in the request's own task, spawned by the service from the claim on: a caller that disconnects
//! drops only the layer's future, which waits on the answer. If the handler ran inside that future, the side
//! effect could stop half-way and its outcome would never be recorded; in its own task it runs to the end and
//! its answer is stored for the retry that will come.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use axum::body::Body;
use ballast_store::StoreError;
use bytes::{Bytes, BytesMut};
use futures::{FutureExt as _, StreamExt as _};
use http::{Request, Response};
use http_body::Body as HttpBody;
use http_body_util::BodyExt as _;
use tokio::sync::oneshot;
use tower::{Service, ServiceExt as _};

use super::layer::Settings;
use super::problem::Problem;
use super::replay::to_stored;
use super::settle::{Answer, HeldClaim, KeepAlive, Sent, Settlement, finish};
use super::{NotStored, OutcomeUnknown};
use crate::headers::BALLAST_OUTCOME;
use crate::{BoxError, clock};
use ballast_core::Deadline;

/// Marks the claim dispatched, runs `request` through `inner`, and sends what it said on `answer` — then
/// settles the record, whether or not the caller still waits. Runs in the request's own task (see `handle`),
/// so a caller that disconnects cancels none of it. The lease is renewed from the claim to the last write.
pub(crate) async fn dispatch<S, B>(
    inner: S,
    settings: Arc<Settings>,
    claim: HeldClaim,
    deadline: Deadline,
    request: Request<Body>,
    answer: oneshot::Sender<Answer<S::Error>>,
) where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let renewing = claim.keep_alive();
    let wait = deadline.usable(clock::now());
    let (store, scope, owner) = (Arc::clone(&claim.store), claim.scope.clone(), claim.owner);
    let mut marking = std::pin::pin!(async move { store.mark_dispatched(&scope, owner).await });
    let marked = match tokio::time::timeout(wait, &mut marking).await {
        Ok(marked) => marked,
        Err(_) => {
            // The caller's time is up and nothing ran: say so now. The mark may still land; once it is decided,
            // give the key back (from `claimed` or `dispatched` alike).
            tracing::warn!(scope = ?claim.scope, ?wait, "the idempotency store did not mark the request dispatched in time; not running it");
            let _ = answer.send(Ok(Problem::StoreTooSlow { waited: wait }.into_response()));
            let _ = marking.await;
            let none = None::<Sent<S::Error>>;
            finish(&claim, renewing, Settlement::Release, none, &settings, &deadline).await;
            return;
        }
    };
    if let Err(error) = marked {
        tracing::warn!(scope = ?claim.scope, %error, "could not mark the request dispatched; not running it");
        let problem = match error {
            // The lease ran out before dispatch and another request took the key over: it is in progress there.
            StoreError::NotHeld => {
                let problem = Problem::InProgress {
                    retry_after: settings.max_retry_after,
                };
                let _ = answer.send(Ok(problem.into_response()));
                return;
            }
            StoreError::Unavailable(_) => Problem::StoreUnavailable,
            _ => Problem::StoreFailed,
        };
        // Nothing ran: give the key back. The mark may have landed with its reply lost, so without the release
        // the key would stay `dispatched` — and later `outcome_unknown` — for a request that never ran.
        let sent = (answer, Ok(problem.into_response()));
        finish(
            &claim,
            renewing,
            Settlement::Release,
            Some(sent),
            &settings,
            &deadline,
        )
        .await;
        return;
    }
    run_and_settle(inner, settings, claim, renewing, deadline, request, answer).await;
}

/// The handler's run, the caller's answer, and the record's last write, whether or not the caller still waits.
async fn run_and_settle<S, B>(
    inner: S,
    settings: Arc<Settings>,
    claim: HeldClaim,
    renewing: KeepAlive,
    deadline: Deadline,
    mut request: Request<Body>,
    answer_tx: oneshot::Sender<Answer<S::Error>>,
) where
    S: Service<Request<Body>, Response = Response<B>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // What a deferral keeps of the request (`request::read` put it there when the layer has a queue).
    let kept = request
        .extensions_mut()
        .remove::<super::deferred::StoredRequest>();
    let ran = AssertUnwindSafe(async {
        match inner.oneshot(request).await {
            Ok(response) => read_response(response, &settings).await,
            Err(error) => (Err(error), Settlement::OutcomeUnknown),
        }
    })
    .catch_unwind()
    .await;
    let (answer, settlement) = ran.unwrap_or_else(|_panic| {
        // In the handler, or while its response body was read: it may have acted.
        tracing::error!(scope = ?claim.scope, "handler panicked after dispatch; outcome unknown");
        (
            Ok(Problem::HandlerPanicked.into_response()),
            Settlement::OutcomeUnknown,
        )
    });
    let marker = match (&settlement, &answer) {
        (Settlement::Release, Ok(response)) => response.extensions().get::<super::deferred::Defer>().cloned(),
        _ => None,
    };
    if let (Some(marker), Some(kept)) = (marker, kept) {
        let sent = (answer_tx, answer);
        return super::defer::defer(&settings, &claim, renewing, marker, kept, sent, &deadline).await;
    }
    finish(
        &claim,
        renewing,
        settlement,
        Some((answer_tx, answer)),
        &settings,
        &deadline,
    )
    .await;
}

/// The caller's answer and the record's end, from the handler's response.
async fn read_response<B, E>(response: Response<B>, settings: &Settings) -> (Answer<E>, Settlement)
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    if parts.extensions.get::<NotStored>().is_some() {
        return (
            Ok(Response::from_parts(parts, Body::new(body))),
            Settlement::Release,
        );
    }
    if parts.extensions.get::<OutcomeUnknown>().is_some() {
        // The handler's own answer, and the layer's word that nobody knows whether it acted: a caller that reads
        // it (a ToolClient, another Ballast) checks before doing it again.
        let mut parts = parts;
        parts
            .headers
            .insert(BALLAST_OUTCOME, http::HeaderValue::from_static("unknown"));
        return (
            Ok(Response::from_parts(parts, Body::new(body))),
            Settlement::OutcomeUnknown,
        );
    }
    match buffer(body, settings.response_limit).await {
        Buffered::Whole(bytes) => {
            let stored = to_stored(&parts, bytes.clone(), &settings.stored_headers);
            (
                Ok(Response::from_parts(parts, Body::from(bytes))),
                Settlement::Complete(stored),
            )
        }
        Buffered::Over { read, rest } => {
            // Too large to replay: the caller still gets all of it; retries learn the outcome is not kept.
            let whole = futures::stream::once(async move { Ok(read) }).chain(rest.into_data_stream());
            (
                Ok(Response::from_parts(parts, Body::from_stream(whole))),
                Settlement::OutcomeUnknown,
            )
        }
        Buffered::Failed => (
            Ok(Problem::OutcomeUnknown.into_response()),
            Settlement::OutcomeUnknown,
        ),
    }
}

/// A response body read under a limit.
enum Buffered<B> {
    Whole(Bytes),
    /// Over the limit: what was read, and the body to read on from.
    Over {
        read: Bytes,
        rest: B,
    },
    /// The body failed before its end.
    Failed,
}

async fn buffer<B>(body: B, limit: usize) -> Buffered<std::pin::Pin<Box<B>>>
where
    B: HttpBody<Data = Bytes>,
{
    let mut body = Box::pin(body);
    let mut read = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Buffered::Failed;
        };
        if let Ok(data) = frame.into_data() {
            read.extend_from_slice(&data);
            if read.len() > limit {
                return Buffered::Over {
                    read: read.freeze(),
                    rest: body,
                };
            }
        }
    }
    Buffered::Whole(read.freeze())
}
