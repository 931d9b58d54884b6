//! Every answer the gateway gives on its own, in one place (STYLE.md, convention 6): its status, its RFC 9457
//! problem+json body (`type = urn:ballast:<code>`), and whether a retry can help (`x-should-retry`, with
//! `Retry-After` only where a retry is invited). A caller matches on `type` or `code`; an SDK reads the status and
//! `x-should-retry`. Every message says what happened and what the caller can do.

use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use ballast::idempotency::{NotStored, OutcomeUnknown};
use ballast_core::ErrorCode;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rand::RngExt as _;
use serde_json::{Value, json};

use ballast::headers::{
    BALLAST_ATTEMPTS, BALLAST_CODE, BALLAST_OUTCOME, BALLAST_REMAINING_MS, BALLAST_SHED, X_SHOULD_RETRY,
};

/// The longest `Retry-After` the gateway sends (some SDK versions obey any value).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The spread added to every `Retry-After` the gateway sends: a crowd told "1 s" comes back over a second.
const RETRY_AFTER_JITTER: Duration = Duration::from_secs(1);

/// Why the gateway answered without an upstream answer to pass on.
#[derive(Debug)]
pub(crate) enum AppError {
    /// No key, or a key nobody configured.
    Unauthorized,
    /// A principal that may not read this endpoint (`/metrics`, `/status` with admin principals configured).
    Forbidden,
    /// No such endpoint.
    NotFound { path: String },
    /// No such tool.
    UnknownTool { name: String, tools: Vec<String> },
    /// A tool's name percent-encoded in the path (`/v1/tools/lookup%5Forder`): names are matched as written.
    EncodedToolName { written: String, name: String },
    /// No model route of this name (a model request's `model`).
    UnknownModel { name: String, models: Vec<String> },
    /// A model request the gateway cannot serve as sent: not the API's body, or a `model` no deployment of the
    /// route serves this API for.
    InvalidRequest { message: String },
    /// The endpoint exists, not with this method.
    MethodNotAllowed { allowed: &'static str },
    /// A header the gateway reads could not be read.
    BadHeader {
        header: &'static str,
        value: String,
        expected: String,
    },
    /// A header the gateway reads once came more than once: which value counts would be a guess.
    HeaderRepeated { header: &'static str },
    /// `ballast-step-id` without `ballast-run-id`.
    StepWithoutRun,
    /// A side-effecting tool called with neither an `Idempotency-Key` nor a run and step to derive one.
    KeyMissing { tool: String },
    /// The `Idempotency-Key` breaks the rules.
    KeyInvalid { reason: String },
    /// The body is over `server.body_limit`.
    BodyTooLarge { limit: u64 },
    /// The body could not be read.
    BodyUnreadable,
    /// The body did not arrive within `server.body_timeout` (the request's deadline, when shorter, is a 504).
    BodyTimeout { timeout: Duration },
    /// The JSON body names a member twice in one object.
    DuplicateMember { name: String },
    /// The body is not JSON.
    MalformedJson {
        line: usize,
        column: usize,
        reason: String,
    },
    /// The call failed without an upstream answer (`code` says why; `status` is the answer's).
    Call {
        code: ErrorCode,
        status: StatusCode,
        message: String,
        retry_after: Option<Duration>,
        should_retry: bool,
        shed: Option<&'static str>,
    },
    /// A side effect may or may not have happened.
    OutcomeUnknown { tool: String, key: Option<String> },
}

impl AppError {
    /// A call that failed upstream with `code` and nothing to retry here: a 502 saying `message`.
    pub(crate) fn bad_gateway(code: ErrorCode, message: String) -> AppError {
        AppError::Call {
            code,
            status: StatusCode::BAD_GATEWAY,
            message,
            retry_after: None,
            should_retry: false,
            shed: None,
        }
    }

    /// Status, code (the `urn:ballast:` slug) and title.
    fn kind(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            AppError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "API key missing or unknown",
            ),
            AppError::Forbidden => (StatusCode::FORBIDDEN, "forbidden", "Admin principal required"),
            AppError::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found", "No such endpoint"),
            AppError::UnknownTool { .. } | AppError::EncodedToolName { .. } => {
                (StatusCode::NOT_FOUND, "unknown_tool", "No such tool")
            }
            AppError::UnknownModel { .. } => (StatusCode::NOT_FOUND, "model_not_found", "No such model"),
            AppError::InvalidRequest { .. } => (
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidRequest.as_str(),
                "Invalid request",
            ),
            AppError::MethodNotAllowed { .. } => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "Method not allowed",
            ),
            AppError::BadHeader { .. } => (StatusCode::BAD_REQUEST, "invalid_header", "Header unreadable"),
            AppError::HeaderRepeated { .. } => (StatusCode::BAD_REQUEST, "invalid_header", "Header repeated"),
            AppError::StepWithoutRun => (
                StatusCode::BAD_REQUEST,
                "step_without_run",
                "ballast-step-id needs ballast-run-id",
            ),
            AppError::KeyMissing { .. } => (
                StatusCode::BAD_REQUEST,
                "idempotency_key_missing",
                "Idempotency-Key required",
            ),
            AppError::KeyInvalid { .. } => (
                StatusCode::BAD_REQUEST,
                "idempotency_key_invalid",
                "Idempotency-Key invalid",
            ),
            AppError::BodyTooLarge { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "Request body too large",
            ),
            AppError::BodyUnreadable => (
                StatusCode::BAD_REQUEST,
                "body_unreadable",
                "Request body unreadable",
            ),
            AppError::BodyTimeout { .. } => (
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                "Request body too slow",
            ),
            AppError::MalformedJson { .. } => (StatusCode::BAD_REQUEST, "malformed_json", "Body is not JSON"),
            AppError::DuplicateMember { .. } => (
                StatusCode::BAD_REQUEST,
                "json_duplicate_member",
                "JSON member named twice",
            ),
            AppError::Call { code, status, .. } => (*status, code.as_str(), code_title(*code)),
            AppError::OutcomeUnknown { .. } => (
                StatusCode::BAD_GATEWAY,
                ErrorCode::OutcomeUnknown.as_str(),
                "Outcome unknown",
            ),
        }
    }

    /// What happened and what the caller can do.
    fn detail(&self) -> String {
        match self {
            AppError::Unauthorized => {
                "send the API key of a configured principal as `Authorization: Bearer <key>` \
                (or `api-key` / `x-api-key`)"
                    .to_owned()
            }
            AppError::Forbidden => "this endpoint is served to admin principals only (`admin = true` in \
                [[principals]]); use an admin key or the `server.admin_listen` address"
                .to_owned(),
            AppError::NotFound { path } => format!(
                "nothing is served at {path}; the gateway serves POST /v1/responses, /v1/chat/completions, \
                 /v1/embeddings, GET /v1/models and /v1/models/{{id}}, GET and DELETE /v1/responses/{{id}}, POST /v1/responses/{{id}}/cancel, \
                 POST /v1/tools/{{name}}, GET /v1/operations/{{key}}, GET /healthz, /readyz, /metrics and /status \
                 (docs/gateway.md)"
            ),
            AppError::UnknownTool { name, tools } => format!(
                "no tool named {name:?} is configured; the tools are: {}",
                if tools.is_empty() {
                    "(none)".to_owned()
                } else {
                    tools.join(", ")
                }
            ),
            AppError::EncodedToolName { written, name } => format!(
                "no tool is served at /v1/tools/{written}: a tool's name is matched as written in the path, and this \
                 one is percent-encoded; call /v1/tools/{name}"
            ),
            AppError::UnknownModel { name, models } => format!(
                "no model route named {name:?} is configured; the models are: {}",
                if models.is_empty() {
                    "(none)".to_owned()
                } else {
                    models.join(", ")
                }
            ),
            AppError::InvalidRequest { message } => format!("{message}; nothing was sent"),
            AppError::MethodNotAllowed { allowed } => format!("this endpoint answers {allowed} only"),
            AppError::BadHeader {
                header,
                value,
                expected,
            } => {
                format!("{header}: {value:?} is not {expected}; fix or drop the header")
            }
            AppError::HeaderRepeated { header } => format!(
                "{header} came more than once: which value counts would be a guess (readers disagree), so the request \
                 was refused; send it once"
            ),
            AppError::StepWithoutRun => {
                "ballast-step-id was sent without ballast-run-id: steps of two agent \
                requests would share keys; send the run id (one per agent request) with every call of the run"
                    .to_owned()
            }
            AppError::KeyMissing { tool } => format!(
                "{tool} has side effects: send an Idempotency-Key (one per operation, the same on every retry), or \
                 ballast-run-id and ballast-step-id (and ballast-call-ordinal for a second call in one step) to \
                 derive one"
            ),
            AppError::KeyInvalid { reason } => {
                format!("{reason}; a key is 1 to 255 printable ASCII characters, sent once")
            }
            AppError::BodyTooLarge { limit } => {
                format!("the body is over server.body_limit ({limit} bytes); nothing was sent")
            }
            AppError::BodyUnreadable => "the request body could not be read; nothing was sent".to_owned(),
            AppError::BodyTimeout { timeout } => format!(
                "the request body did not arrive within server.body_timeout ({} ms); nothing was sent",
                timeout.as_millis()
            ),
            AppError::DuplicateMember { name } => format!(
                "the JSON body names the member {name:?} twice in one object; readers disagree on which value counts \
                 (the gateway, the upstream and a replay could each take another), so send each name once; nothing \
                 was sent"
            ),
            AppError::MalformedJson { line, column, reason } => format!(
                "the body must be the tool's JSON arguments: {reason} at line {line}, column {column}; nothing was sent"
            ),
            AppError::Call { message, .. } => message.clone(),
            AppError::OutcomeUnknown { tool, key } => {
                let check = key.as_ref().map_or_else(
                    || "check with the upstream".to_owned(),
                    |key| format!("check GET /v1/operations/{key} or the upstream"),
                );
                format!(
                    "{tool}: an attempt reached the upstream and its answer was lost, so the side effect may or may \
                     not have happened; do not send it again under a new key: {check}"
                )
            }
        }
    }

    /// When a retry of the same request is invited, and after how long.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            AppError::Call {
                should_retry: true,
                retry_after,
                ..
            } => Some(retry_after.unwrap_or(Duration::from_secs(1))),
            _ => None,
        }
    }
}

impl AppError {
    /// The same answer without inviting a retry when a sent attempt exists (`attempts` > 0): a shed or a
    /// throttle at a fallback after the primary's attempts reached a provider is no "nothing reached the
    /// upstream" — an SDK retrying it would run the primary's attempts again.
    pub(crate) fn inviting_only_if_unsent(self, attempts: usize) -> AppError {
        match self {
            AppError::Call {
                code,
                status,
                message,
                should_retry: true,
                shed,
                ..
            } if attempts > 0 => AppError::Call {
                code,
                status,
                message: format!("{message}; earlier attempts reached a provider, so a retry is not invited"),
                retry_after: None,
                should_retry: false,
                shed,
            },
            other => other,
        }
    }

    /// A request whose deadline (`exceeded`: the call's or its run's) cannot hold an attempt when it arrives:
    /// 504 `deadline_exceeded`, nothing sent; when it belongs to `run`, what a run id names.
    pub(crate) fn too_late(
        what: &str,
        exceeded: &ballast_core::DeadlineExceeded,
        run: Option<&str>,
    ) -> AppError {
        let mut message = format!("{what}: {exceeded}; nothing was sent");
        if let Some(run) = run {
            message.push_str(&format!(
                ". Run {run:?} is past its deadline: a run id names one agent request (a session id reused as a \
                 run id is the usual cause); start a new run id for a new request"
            ));
        }
        AppError::Call {
            code: ErrorCode::DeadlineExceeded,
            status: StatusCode::GATEWAY_TIMEOUT,
            message,
            retry_after: None,
            should_retry: false,
            shed: None,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        self.respond(Flavor::Problem)
    }
}

/// An error of a model route, answered OpenAI-style: `{"error": {"message", "type", "param", "code"}}`, so each
/// SDK raises its typed exception carrying the stable code. The status and headers are the problem's.
pub(crate) struct OpenAiError(pub(crate) AppError);

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        self.0.respond(Flavor::OpenAi)
    }
}

impl From<AppError> for OpenAiError {
    fn from(error: AppError) -> Self {
        OpenAiError(error)
    }
}

/// How an error's body is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// RFC 9457 problem+json (`type = urn:ballast:<code>`): tool routes and the rest.
    Problem,
    /// OpenAI's error envelope: the model routes.
    OpenAi,
}

impl AppError {
    fn respond(self, flavor: Flavor) -> Response {
        let (status, code, title) = self.kind();
        let detail = self.detail();
        let mut response = match flavor {
            Flavor::Problem => {
                let mut body = json!({
                    "type": format!("urn:ballast:{code}"),
                    "title": title,
                    "status": status.as_u16(),
                    "detail": detail,
                    "code": code,
                });
                if let AppError::UnknownTool { tools, .. } = &self {
                    body["tools"] = json!(tools);
                }
                ballast::idempotency::problem_json(status, &body)
            }
            Flavor::OpenAi => openai_error(status, code, &detail),
        };
        let retry_after = self.retry_after();
        // Told without inviting a retry: how long an open breaker stays open.
        let informative = match &self {
            AppError::Call {
                should_retry: false,
                retry_after,
                ..
            } => *retry_after,
            _ => None,
        };
        let headers = response.headers_mut();
        headers.insert(BALLAST_CODE, HeaderValue::from_static(code));
        headers.insert(
            X_SHOULD_RETRY,
            HeaderValue::from_static(bool_text(retry_after.is_some())),
        );
        if let Some(wait) = retry_after.or(informative) {
            set_retry_after(headers, wait);
        }
        match &self {
            AppError::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            AppError::MethodNotAllowed { allowed } => {
                headers.insert(header::ALLOW, HeaderValue::from_static(allowed));
            }
            // Answered before the body was read (or while it was still arriving): the connection cannot carry
            // another request, and keeping it open would leave the rest of the body to a reader nobody runs.
            AppError::BodyTooLarge { .. } | AppError::BodyTimeout { .. } => {
                headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            AppError::Call {
                shed: Some(reason), ..
            } => {
                headers.insert(BALLAST_SHED, HeaderValue::from_static(reason));
            }
            _ => {}
        }
        match self {
            AppError::OutcomeUnknown { .. } => {
                headers.insert(BALLAST_OUTCOME, HeaderValue::from_static("unknown"));
                response.extensions_mut().insert(OutcomeUnknown);
            }
            // Decided before any upstream answer: a retry with the same key runs.
            _ => {
                response.extensions_mut().insert(NotStored);
            }
        }
        response
    }
}

/// A call refused before anything was claimed or sent: the error, the call's deadline once it was read (its
/// answer then says `ballast-remaining-ms`, as every answer of a call does), and whether its lookup started the
/// call's run again after it was evicted (then it says `ballast-run: restarted`, or nobody would).
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) error: AppError,
    pub(crate) deadline: Option<ballast::policy::Deadline>,
    pub(crate) run_restarted: bool,
}

impl From<AppError> for Refused {
    fn from(error: AppError) -> Self {
        Refused {
            error,
            deadline: None,
            run_restarted: false,
        }
    }
}

/// A refusal on a model route, answered OpenAI-style ([`Refused::into_openai`]): what the model routes' handlers
/// and the [`Inbound`](crate::inbound::Inbound) extractor return as their error, so a handler uses `?`.
#[derive(Debug)]
pub(crate) struct OpenAiRefused(pub(crate) Refused);

impl From<Refused> for OpenAiRefused {
    fn from(refused: Refused) -> Self {
        OpenAiRefused(refused)
    }
}

impl From<AppError> for OpenAiRefused {
    fn from(error: AppError) -> Self {
        OpenAiRefused(Refused::from(error))
    }
}

impl IntoResponse for OpenAiRefused {
    fn into_response(self) -> Response {
        self.0.into_openai()
    }
}

impl Refused {
    /// The refusal as problem+json (the tool routes).
    pub(crate) fn into_problem(self) -> Response {
        let response = refusal(self.error.into_response(), self.deadline.as_ref());
        told_restart(response, self.run_restarted)
    }

    /// The refusal OpenAI-style (the model routes).
    pub(crate) fn into_openai(self) -> Response {
        let response = refusal(OpenAiError(self.error).into_response(), self.deadline.as_ref());
        told_restart(response, self.run_restarted)
    }
}

/// `ballast-run: restarted` on the answer of a call that started its run again after the run was evicted for
/// room (`[run] max_runs`): its deadline and retry allowance started over with this call.
pub(crate) fn tell_restart(headers: &mut HeaderMap, restarted: bool) {
    if restarted {
        headers.insert(
            ballast::headers::BALLAST_RUN,
            http::HeaderValue::from_static("restarted"),
        );
    }
}

fn told_restart(mut response: Response, restarted: bool) -> Response {
    tell_restart(response.headers_mut(), restarted);
    response
}

/// `ballast-remaining-ms`: what is left of `deadline` now (whether the agent's next step still fits).
pub(crate) fn insert_remaining(headers: &mut http::HeaderMap, deadline: &ballast::policy::Deadline) {
    let remaining = deadline.remaining(ballast::clock::now());
    headers.insert(
        BALLAST_REMAINING_MS,
        HeaderValue::from(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX)),
    );
}

/// The answer to a call refused before anything was claimed or sent: `ballast-attempts: 0` and, once the call's
/// deadline was read (not for an unreadable header or a wrong method), `ballast-remaining-ms`.
pub(crate) fn refusal(mut response: Response, deadline: Option<&ballast::policy::Deadline>) -> Response {
    let headers = response.headers_mut();
    headers.insert(BALLAST_ATTEMPTS, HeaderValue::from_static("0"));
    if let Some(deadline) = deadline {
        insert_remaining(headers, deadline);
    }
    response
}

/// OpenAI's error envelope with `status`: `type` is `invalid_request_error` for a 4xx (`rate_limit_error` for a
/// 429), `server_error` otherwise.
pub(crate) fn openai_error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(status, &openai_body(status, code, message))
}

/// The body of [`openai_error`].
pub(crate) fn openai_body(status: StatusCode, code: &str, message: &str) -> Value {
    let kind = match status.as_u16() {
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// A JSON response with `status`.
pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// `true` / `false`.
pub(crate) fn bool_text(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

pub(crate) use ballast::headers::set_retry_after;

/// 404 for any other path: OpenAI-style under `/v1/` (where an SDK pointed at the gateway calls, so it raises
/// its `NotFoundError` with the message) but for Ballast's own `/v1/tools/` and `/v1/operations/`; problem+json
/// elsewhere.
pub(crate) async fn not_found(request: axum::extract::Request) -> Response {
    let path = request.uri().path();
    let error = AppError::NotFound {
        path: path.to_owned(),
    };
    let ours = ["/v1/tools/", "/v1/operations/"]
        .iter()
        .any(|p| path.starts_with(p));
    if path.starts_with("/v1/") && !ours {
        OpenAiError(error).into_response()
    } else {
        error.into_response()
    }
}

/// A title per stable code.
fn code_title(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::DeadlineExceeded => "Deadline exceeded",
        ErrorCode::Overloaded => "Overloaded",
        ErrorCode::CircuitOpen => "Circuit open",
        ErrorCode::OutcomeUnknown => "Outcome unknown",
        ErrorCode::RetryBudgetExhausted => "Retry budget exhausted",
        ErrorCode::RunAllowanceExhausted => "Run allowance exhausted",
        ErrorCode::InvalidRequest => "Invalid request",
        ErrorCode::StoreUnavailable => "Store unavailable",
        _ => "Upstream error",
    }
}

/// `wait` plus up to [`RETRY_AFTER_JITTER`], at most [`MAX_RETRY_AFTER`]: never earlier than asked, and a crowd
/// told the same wait comes back spread over a second.
pub(crate) fn jittered(wait: Duration, rng: &mut impl rand::Rng) -> Duration {
    (wait + rng.random_range(Duration::ZERO..RETRY_AFTER_JITTER)).min(MAX_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shed or a throttle at a fallback after the primary's attempts were sent invites no retry: the SDK's
    /// retry would send the primary's attempts again.
    #[test]
    fn a_retry_is_invited_only_when_nothing_was_sent() {
        let shed = || AppError::Call {
            code: ErrorCode::Overloaded,
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "agent: shed".into(),
            retry_after: Some(Duration::from_secs(1)),
            should_retry: true,
            shed: Some("queue_full"),
        };
        let unsent = shed().inviting_only_if_unsent(0).into_response();
        assert_eq!(unsent.headers()[X_SHOULD_RETRY], "true");
        assert!(unsent.headers().contains_key(header::RETRY_AFTER));
        let sent = shed().inviting_only_if_unsent(3).into_response();
        assert_eq!(sent.headers()[X_SHOULD_RETRY], "false");
        assert!(!sent.headers().contains_key(header::RETRY_AFTER));
        assert_eq!(sent.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(sent.headers()[BALLAST_SHED], "queue_full");
    }

    #[test]
    fn a_retry_after_is_never_earlier_than_asked_spread_over_a_second_and_at_most_60_s() {
        let mut rng = ballast_core::default_rng(Some(7));
        let waits: Vec<Duration> = (0..200)
            .map(|_| jittered(Duration::from_secs(1), &mut rng))
            .collect();
        assert!(
            waits
                .iter()
                .all(|w| *w >= Duration::from_secs(1) && *w < Duration::from_secs(2))
        );
        let (low, high) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
        assert!(
            *high - *low > Duration::from_millis(800),
            "spread over the second: {low:?}..{high:?}"
        );
        assert!(jittered(Duration::from_millis(59_900), &mut rng) <= MAX_RETRY_AFTER);
        assert_eq!(jittered(Duration::from_secs(600), &mut rng), MAX_RETRY_AFTER);
    }
}
