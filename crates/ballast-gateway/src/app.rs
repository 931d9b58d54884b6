//! The router: every endpoint, the auth in front of the ones that need it, and what every answer carries.

use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ballast::idempotency::operations_route;
use http::HeaderValue;
use rand::RngExt as _;

use crate::edge::{AuthenticateLayer, FinishLayer};
use crate::error::{AppError, OpenAiError, set_retry_after};
use crate::{Gateway, StartError, admin, models, tools};
use ballast::headers::{TRACEPARENT, X_REQUEST_ID, X_SHOULD_RETRY};

/// The longest `Retry-After` the gateway sends (some SDK versions obey any value).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The spread added to every `Retry-After` the gateway sends: a crowd told "1 s" comes back over a second.
const RETRY_AFTER_JITTER: Duration = Duration::from_secs(1);

/// Where `/metrics` and `/status` are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AdminRoutes {
    /// On this router, behind the same auth as the rest (an admin principal when one is configured).
    Here,
    /// Not on this router: on the admin listener.
    Elsewhere,
}

/// The gateway's router: `POST /v1/tools/{name}`, `GET /v1/operations/{key}`, `/healthz`, `/readyz`, and —
/// unless `server.admin_listen` is set — `/metrics` and `/status`. Served on a listener of your own, set
/// `TCP_NODELAY` on its connections as [`serve`](crate::serve) does (axum's `ListenerExt::tap_io`): without it a
/// stream's events after the first wait for the caller's delayed ACKs.
pub fn app(gateway: Gateway) -> Result<Router, StartError> {
    let admin_here = if gateway.inner.config.server.admin_listen.is_some() {
        AdminRoutes::Elsewhere
    } else {
        AdminRoutes::Here
    };
    router(gateway, admin_here)
}

/// The admin listener's router: `/metrics`, `/status`, `/healthz` and `/readyz`, without auth (the address is the
/// access control).
pub fn admin_app(gateway: Gateway) -> Router {
    Router::new()
        .route("/metrics", get(admin::metrics))
        .route("/status", get(admin::status))
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .fallback(not_found)
        .with_state(gateway)
        .layer(FinishLayer)
}

pub(crate) fn router(gateway: Gateway, admin_here: AdminRoutes) -> Result<Router, StartError> {
    let operations_routes: Vec<String> = gateway
        .inner
        .config
        .tools
        .iter()
        .map(|tool| format!("POST /v1/tools/{}", tool.name))
        .collect();
    let mut authed = tools::routes(&gateway)?.route(
        "/v1/operations/{key}",
        operations_route(std::sync::Arc::clone(&gateway.inner.store), operations_routes),
    );
    if admin_here == AdminRoutes::Here {
        let admin_only = Router::new()
            .route("/metrics", get(admin::metrics))
            .route("/status", get(admin::status))
            .route_layer(middleware::from_fn_with_state(gateway.clone(), require_admin));
        authed = authed.merge(admin_only);
    }
    let authed = authed.route_layer(AuthenticateLayer {
        gateway: gateway.clone(),
        openai: false,
    });
    // The model routes answer every error OpenAI-style, their 401 included, so an SDK raises its own exception.
    let models = models::routes().route_layer(AuthenticateLayer {
        gateway: gateway.clone(),
        openai: true,
    });
    Ok(Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .merge(authed)
        .merge(models)
        .fallback(not_found)
        .with_state(gateway)
        .layer(FinishLayer))
}

/// 404 for any other path: OpenAI-style under `/v1/` (where an SDK pointed at the gateway calls, so it raises
/// its `NotFoundError` with the message) but for Ballast's own `/v1/tools/` and `/v1/operations/`; problem+json
/// elsewhere.
async fn not_found(request: Request) -> Response {
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

/// With admin principals configured, only they read `/metrics` and `/status`.
async fn require_admin(State(gateway): State<Gateway>, request: Request, next: Next) -> Response {
    let admin = request
        .extensions()
        .get::<crate::auth::Caller>()
        .is_some_and(|c| c.admin);
    if gateway.inner.principals.any_admin() && !admin {
        return AppError::Forbidden.into_response();
    }
    next.run(request).await
}

/// The request's id — its `x-request-id`, else the trace id of its `traceparent`, else a new one — and its span,
/// in which every log line of the request carries that id ([`FinishLayer`] runs the request in it).
pub(crate) fn request_span(request: &Request) -> (HeaderValue, tracing::Span) {
    let request_id = request_id(request);
    let span = tracing::info_span!(
        "ballast.request",
        request_id = %request_id.to_str().unwrap_or_default(),
        method = %request.method(),
        path = %request.uri().path(),
        status = tracing::field::Empty,
    );
    (request_id, span)
}

/// What every answer carries: `x-request-id` (see [`request_span`]), an explicit `x-should-retry` on every error,
/// and every `Retry-After` jittered and capped at 60 s; its status is recorded on the request's span.
pub(crate) fn finish(mut response: Response, request_id: HeaderValue, span: &tracing::Span) -> Response {
    span.record("status", response.status().as_u16());
    let status = response.status();
    let headers = response.headers_mut();
    headers.insert(X_REQUEST_ID, request_id);
    if status.as_u16() >= 400 && !headers.contains_key(X_SHOULD_RETRY) {
        headers.insert(X_SHOULD_RETRY, HeaderValue::from_static("false"));
    }
    if let Some(wait) = ballast::headers::retry_after(headers) {
        set_retry_after(headers, jittered(wait, &mut rand::rng()));
    }
    response
}

/// `wait` plus up to [`RETRY_AFTER_JITTER`], at most [`MAX_RETRY_AFTER`]: never earlier than asked, and a crowd
/// told the same wait comes back spread over a second.
pub(crate) fn jittered(wait: Duration, rng: &mut impl rand::Rng) -> Duration {
    (wait + rng.random_range(Duration::ZERO..RETRY_AFTER_JITTER)).min(MAX_RETRY_AFTER)
}

/// The request's id: its `x-request-id` when it is short printable ASCII, else its trace's id, else a new one.
fn request_id(request: &Request) -> HeaderValue {
    let headers = request.headers();
    if let Some(id) = headers.get(X_REQUEST_ID).filter(|v| {
        (1..=128).contains(&v.len()) && v.to_str().is_ok_and(|s| s.bytes().all(|b| b.is_ascii_graphic()))
    }) {
        return id.clone();
    }
    let id = headers
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| ballast_core::TraceContext::parse(v).ok())
        .map_or_else(new_request_id, |trace| trace.trace_id_hex().to_string());
    HeaderValue::from_str(&id).expect("hex is a valid header value")
}

/// A new request id: a UUIDv4 (32 hex digits) from the thread's generator (rand's `ThreadRng`, seeded by the
/// system), as the library draws trace ids — not `Uuid::new_v4`, which asks the kernel for every id (a
/// `getrandom` system call on each request that brings no id of its own).
fn new_request_id() -> String {
    uuid::Builder::from_random_bytes(rand::rng().random())
        .into_uuid()
        .simple()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_request_id_is_a_uuid_v4_in_32_hex_digits() {
        let (a, b) = (new_request_id(), new_request_id());
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
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
