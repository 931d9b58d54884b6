//! Retries at one layer whatever the client does: a request that repeats one just answered with a final failure
//! is answered again from that failure, nothing sent (the rule, and why it never takes a new request for a retry:
//! [`ballast_core::RecentFailures`]; DESIGN.md, "Retries").
//!
//! The model routes (`POST /v1/responses`, `/v1/chat/completions`, `/v1/embeddings`, `/v1/messages`) and the
//! tool calls without an idempotency key are guarded; a keyed tool call already has the idempotency layer, which replays its stored
//! answer by key. The failures are kept in this process's memory, at most [`MAX_COST`] bytes of them; behind a
//! load balancer, a repeat that lands on another instance is served in full, as it would be without this.
//!
//! A repeat's answer is the failure's status, headers and body, with `ballast-repeat: replayed`,
//! `ballast-attempts: 0`, `Retry-After` counting down what is left of the wait it said, and the caller's own
//! `ballast-remaining-ms`; it is counted in `ballast_sdk_retries_total`.

use std::sync::Mutex;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use ballast::policy::Deadline;
use ballast_core::{RecentFailures, Repeat, RepeatKey, is_final_failure};
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use http_body::Body as _;
use http_body_util::BodyExt as _;

use ballast::headers::{
    BALLAST_ATTEMPTS, BALLAST_CALL_ORDINAL, BALLAST_REPEAT, BALLAST_RUN_ID, BALLAST_STEP_ID, IDEMPOTENCY_KEY,
    X_SHOULD_RETRY,
};

/// What all the failures kept may cost together, in bytes (their bodies and headers).
const MAX_COST: usize = 4 << 20;
/// The largest failure body kept (an error answer is well under 1 KiB; a provider's HTML error page is not kept).
const MAX_BODY: usize = 16 << 10;

/// A failure as it was answered.
#[derive(Clone, Debug)]
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// The final failures this gateway answered in the last `server.repeat_window`.
#[derive(Debug)]
pub(crate) struct Repeats {
    failures: Mutex<RecentFailures<Answer>>,
}

/// What tells a request from its repeats, read from it once: its key's parts and its SDK's retry count.
#[derive(Debug)]
pub(crate) struct Identity {
    /// The principal, method, path and the headers that matter, framed ([`RepeatKey::of`]).
    parts: Vec<Vec<u8>>,
    body: Bytes,
    repeat: Repeat,
}

impl Identity {
    /// The identity of a request of `principal` to `path` (with its query) with `headers` and `body`.
    pub(crate) fn of(
        principal: &str,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
        sdk_retry: Option<u32>,
    ) -> Identity {
        let mut parts = vec![principal.as_bytes().to_vec(), path.as_bytes().to_vec()];
        // Sorted, so that two spellings of one request in another header order are one.
        let mut matter: Vec<(&str, &[u8])> = headers
            .iter()
            .filter(|(name, _)| matters(name))
            .map(|(name, value)| (name.as_str(), value.as_bytes()))
            .collect();
        matter.sort_unstable();
        for (name, value) in matter {
            parts.push(name.as_bytes().to_vec());
            parts.push(value.to_vec());
        }
        Identity {
            parts,
            body,
            repeat: Repeat::from_retry_count(sdk_retry),
        }
    }

    fn key(&self) -> RepeatKey {
        RepeatKey::of((self.parts.iter().map(Vec::as_slice)).chain(std::iter::once(self.body.as_ref())))
    }
}

/// Anthropic's version and betas: they change what the provider does with a body.
const ANTHROPIC_VERSION: HeaderName = HeaderName::from_static("anthropic-version");
const ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");

/// The headers that make a request another one when they differ: its run, step and call ordinal, its key, its
/// deadline (a caller that sends a longer one is asking something new), and Anthropic's version and betas. Not
/// `x-stainless-retry-count`, which an SDK's retry changes.
fn matters(name: &HeaderName) -> bool {
    [
        &BALLAST_RUN_ID,
        &BALLAST_STEP_ID,
        &BALLAST_CALL_ORDINAL,
        &IDEMPOTENCY_KEY,
        &ANTHROPIC_VERSION,
        &ANTHROPIC_BETA,
    ]
    .contains(&name)
        || ballast_core::DeadlineHeader::from_name(name.as_str()).is_some()
}

impl Repeats {
    /// Failures kept for `window` (zero: none).
    pub(crate) fn new(window: Duration) -> Repeats {
        Repeats {
            failures: Mutex::new(RecentFailures::new(window, MAX_COST)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RecentFailures<Answer>> {
        // A panic while holding the lock leaves the failures as they were: still usable.
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The answer to `request` if it repeats a failure kept (module docs), to a call of `target` whose deadline
    /// is `deadline`; counted as an SDK's retry.
    pub(crate) fn answer(&self, request: &Identity, target: &str, deadline: &Deadline) -> Option<Response> {
        let now = ballast::clock::now();
        if request.repeat == Repeat::FirstTry || !self.lock().any(now) {
            return None;
        }
        let key = request.key();
        let (answer, left) = self.lock().repeat_of(&key, request.repeat, now)?;
        // Counted once: an SDK's numbered retry already was.
        if request.repeat == Repeat::Unsaid {
            crate::metrics::sdk_retry(target, Some(1));
        }
        tracing::info!(
            target,
            status = answer.status.as_u16(),
            "a repeat of a final failure answered from it, nothing sent"
        );
        let mut response = Response::new(Body::from(answer.body));
        *response.status_mut() = answer.status;
        *response.headers_mut() = answer.headers;
        let headers = response.headers_mut();
        headers.insert(BALLAST_REPEAT, HeaderValue::from_static("replayed"));
        headers.insert(BALLAST_ATTEMPTS, HeaderValue::from_static("0"));
        if headers.contains_key(http::header::RETRY_AFTER) {
            crate::error::set_retry_after(headers, left);
        }
        crate::error::insert_remaining(headers, deadline);
        Some(response)
    }

    /// `response`, the answer to `request`, kept first if it is a final failure (module docs).
    pub(crate) async fn keep(&self, request: &Identity, response: Response) -> Response {
        let should_retry = (response.headers().get(&X_SHOULD_RETRY))
            .and_then(|v| v.to_str().ok())
            .and_then(|v| ballast_core::parse_should_retry(v).ok());
        if !is_final_failure(response.status().as_u16(), should_retry) {
            return response;
        }
        let small = (response.body().size_hint().exact()).is_some_and(|n| n <= MAX_BODY as u64);
        if !small {
            return response;
        }
        let (parts, body) = response.into_parts();
        // An error answer's body is in memory: collecting it does not wait.
        let Ok(collected) = body.collect().await else {
            return Response::from_parts(parts, Body::empty());
        };
        let body = collected.to_bytes();
        let answer = Answer {
            status: parts.status,
            headers: parts.headers.clone(),
            body: body.clone(),
        };
        let cost = body.len() + header_bytes(&answer.headers) + 256;
        let wait = ballast::headers::retry_after(&answer.headers);
        self.lock()
            .remember(request.key(), answer, cost, wait, ballast::clock::now());
        Response::from_parts(parts, Body::from(body))
    }
}

fn header_bytes(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 32)
        .sum()
}
