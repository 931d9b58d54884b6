//! The router: every endpoint and the auth in front of the ones that need it (what every answer carries is
//! [`crate::edge`]'s).

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ballast::idempotency::operations_route;

use crate::edge::{AuthenticateLayer, FinishLayer};
use crate::error::AppError;
use crate::{Gateway, StartError, admin, dashboard, models, tools};

/// Where `/metrics` and `/status` are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AdminRoutes {
    /// On this router, behind the same auth as the rest (an admin principal when one is configured).
    Here,
    /// Not on this router: on the admin listener.
    Elsewhere,
}

/// The gateway's router: `POST /v1/tools/{name}`, `GET /v1/operations/{key}`, `/healthz`, `/readyz`, and —
/// unless `server.admin_listen` is set — `/metrics`, `/status` and `/dashboard` (the page holds no data: what it
/// shows, it reads from `/status`, with the caller's key). Served on a listener of your own, set
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

/// The admin listener's router: `/metrics`, `/status`, `/dashboard`, `/healthz` and `/readyz`, without auth (the
/// address is the access control).
pub fn admin_app(gateway: Gateway) -> Router {
    Router::new()
        .route("/metrics", get(admin::metrics))
        .route("/status", get(admin::status))
        .route("/dashboard", get(dashboard::page))
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .fallback(crate::error::not_found)
        .with_state(gateway)
        .layer(FinishLayer::default())
}

pub(crate) fn router(gateway: Gateway, admin_here: AdminRoutes) -> Result<Router, StartError> {
    let operations_routes: Vec<String> = gateway
        .inner
        .config
        .tools
        .iter()
        .map(|tool| format!("POST /v1/tools/{}", tool.name))
        .collect();
    let mut authed = tools::routes(&gateway)?
        .route(
            "/v1/operations/{key}",
            operations_route(std::sync::Arc::clone(&gateway.inner.store), operations_routes),
        )
        .route_service("/mcp", crate::mcp::service(&gateway)?);
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
    // Anthropic's: the same, every error (the 401 included) then rewritten in Anthropic's envelope.
    let messages = models::anthropic_errors(models::messages_routes().route_layer(AuthenticateLayer {
        gateway: gateway.clone(),
        openai: true,
    }));
    let telemetry = gateway.inner.telemetry.clone();
    let mut open = Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz));
    if admin_here == AdminRoutes::Here {
        open = open.route("/dashboard", get(dashboard::page));
    }
    Ok(open
        .merge(authed)
        .merge(models)
        .merge(messages)
        .fallback(crate::error::not_found)
        .with_state(gateway)
        .layer(FinishLayer { telemetry }))
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
