//! One deployment of a model route: its URL, model name and key, and its own stack — breaker and retry budget
//! its own, so a failing deployment is isolated from the others of the route.
//!
//! ```text
//! DeadlineLayer -> RetryLayer -> BreakerLayer -> AttemptLayer -> ChatTransport
//! ```
//!
//! No admission layer: a model route has no concurrency limit of its own in the configuration (the provider's
//! rate limits answer 429, which the retry layer honours).

use std::sync::Arc;

use ballast_config::{Deployment, Env, MissingSecret, ModelRoute, SecretProblem, ServerConfig};
use ballast_core::{CircuitBreaker, InvalidRetryPolicy, RetryBudget, RetryPolicy};
use bytes::Bytes;
use http::{HeaderValue, Request, Response, Uri};
use tower::util::BoxCloneSyncService;
use tower::{ServiceBuilder, ServiceExt as _};

use super::transport::{ChatTransport, StreamHandoff};
use crate::attempt::StreamedAttempt;
use crate::retry::Polling;
use crate::{AttemptLayer, BreakerLayer, CallContext, DeadlineLayer, Error, RetryLayer};

/// The layer stack of one deployment, boxed.
type Stack = BoxCloneSyncService<Request<Bytes>, Response<Bytes>, Error>;

/// A model route whose settings the client cannot use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidChatRoute {
    /// Its retry settings (validation normally catches these first).
    #[error("models.{route}.retry: {source}")]
    Retry {
        /// The route.
        route: String,
        /// Why.
        source: InvalidRetryPolicy,
    },
    /// A deployment's `base_url` does not make a URI (validation normally catches this first).
    #[error("models.{route}.deployments[{index}].base_url: {url:?} does not make a URI")]
    BaseUrl {
        /// The route.
        route: String,
        /// The deployment's index.
        index: usize,
        /// The URL as configured.
        url: String,
    },
    /// A deployment's API key is missing from the environment, or cannot be sent as a header.
    #[error(transparent)]
    ApiKey(#[from] MissingSecret),
}

/// One deployment, ready to send.
#[derive(Debug)]
pub(super) struct DeploymentClient {
    /// Its name in reports: `route[index] model`.
    pub(super) name: String,
    pub(super) config: Deployment,
    uri: Uri,
    authorization: Option<HeaderValue>,
    stack: Stack,
    pub(super) breaker: Arc<CircuitBreaker>,
    pub(super) budget: Arc<dyn RetryBudget>,
}

impl DeploymentClient {
    /// Deployment `index` of `route`, its key read from `env`, sending through `transport`.
    pub(super) fn build(
        route: &ModelRoute,
        index: usize,
        server: &ServerConfig,
        env: &dyn Env,
        transport: ChatTransport,
    ) -> Result<Self, InvalidChatRoute> {
        let config = route.deployments[index].clone();
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        let uri = Uri::try_from(url.as_str()).map_err(|_| InvalidChatRoute::BaseUrl {
            route: route.name.clone(),
            index,
            url: config.base_url.clone(),
        })?;
        let authorization = match &config.api_key_env {
            Some(var) => Some(authorization(route, index, var, env)?),
            None => None,
        };
        let policy = RetryPolicy::new(route.retry.max_attempts, route.retry.backoff)
            .map_err(|source| InvalidChatRoute::Retry {
                route: route.name.clone(),
                source,
            })?
            .with_max_retry_after(server.max_retry_after);
        let breaker = Arc::new(CircuitBreaker::seeded(route.breaker, None));
        let budget = route.budget.build();
        let stack = BoxCloneSyncService::new(
            ServiceBuilder::new()
                .layer(DeadlineLayer::new(server.default_timeout))
                .layer(RetryLayer::new(policy, Arc::clone(&budget)))
                .layer(BreakerLayer::new(Arc::clone(&breaker)))
                .layer(AttemptLayer::new(config.per_try_timeout))
                .service(transport),
        );
        Ok(DeploymentClient {
            name: format!("{}[{index}] {}", route.name, config.model),
            config,
            uri,
            authorization,
            stack,
            breaker,
            budget,
        })
    }

    /// One trip through the stack with `body` under `ctx`; `attempts_before` attempts of this call were already
    /// made on this deployment (a resend after truncation numbers its attempts after them). A streamed request
    /// carries `handoff`.
    pub(super) async fn send(
        &self,
        body: Bytes,
        ctx: &CallContext,
        attempts_before: u32,
        handoff: Option<&StreamHandoff>,
    ) -> Result<Response<Bytes>, Error> {
        let mut request = Request::post(self.uri.clone())
            .header(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )
            .body(body)
            .map_err(|e| Error::transport(false, e))?;
        if let Some(authorization) = &self.authorization {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, authorization.clone());
        }
        if let Some(handoff) = handoff {
            request.headers_mut().insert(
                http::header::ACCEPT,
                HeaderValue::from_static("text/event-stream"),
            );
            request.extensions_mut().insert(handoff.clone());
            // The stream runs until the call's own deadline (not a primary's share: that bounds the first chunk).
            let until = ctx.deadline;
            request.extensions_mut().insert(StreamedAttempt { until });
        }
        request.extensions_mut().insert(ctx.clone());
        request.extensions_mut().insert(Polling { attempts_before });
        self.stack.clone().oneshot(request).await
    }
}

/// `Bearer <key>`, marked sensitive (never logged), from the variable `var` of `env`.
fn authorization(
    route: &ModelRoute,
    index: usize,
    var: &str,
    env: &dyn Env,
) -> Result<HeaderValue, MissingSecret> {
    let path = format!("models.{}.deployments[{index}].api_key_env", route.name);
    let missing = |problem| MissingSecret {
        path: path.clone(),
        var: var.to_owned(),
        problem,
    };
    let key = env.var(var).ok_or_else(|| missing(SecretProblem::Unset))?;
    if key.is_empty() {
        return Err(missing(SecretProblem::Empty));
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
        .map_err(|_| missing(SecretProblem::NotHeaderValue))?;
    value.set_sensitive(true);
    Ok(value)
}
