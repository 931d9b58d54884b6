//! One deployment of a model route: its URL, model name and key, and its own stack (the client core's
//! `Upstream`) — admission, breaker, throttle and retry budget its own, so a failing deployment is isolated from
//! the others of the route.
//!
//! ```text
//! deadline -> admission -> retry -> BreakerLayer (throttle, breaker) -> AttemptLayer -> transport
//! ```
//!
//! Admission on every deployment (the route's `concurrency` and `queue`, per deployment): 200 agents must not
//! reach a provider at once because nobody limited them — a crowd queues here, by priority and deadline, and a
//! call that cannot be served before its deadline is shed at once, which moves it to the next deployment.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast_config::{
    Api, ConfigErrors, Deployment, Env, MissingSecret, ModelRoute, SecretProblem, ServerConfig,
};
use ballast_core::{Instant, InvalidAdmission, InvalidRetryPolicy};
use bytes::Bytes;
use http::{HeaderValue, Request, Uri};

use super::responses::StateHome;
use crate::CallContext;
use crate::client::Upstream;
use crate::client::upstream::{InvalidSettings, Parts, Settings};
use crate::outcome::Trip;
use crate::retry::Polling;
use crate::transport::Transport;

/// A model route whose settings the client cannot use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidModelRoute {
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
    /// Its admission settings (validation normally catches these first).
    #[error("models.{route}: {source}")]
    Admission {
        /// The route.
        route: String,
        /// Why.
        source: ballast_core::InvalidAdmission,
    },
    /// A deployment's API key is missing from the environment, or cannot be sent as a header.
    #[error(transparent)]
    ApiKey(#[from] MissingSecret),
    /// A deployment's API key, given to the builder as a value, cannot be sent (the value is never shown).
    #[error("model route {route:?}: deployments[{index}].api_key: the key given {problem}")]
    ApiKeyValue {
        /// The route.
        route: String,
        /// The deployment's index.
        index: usize,
        /// What is wrong with it.
        problem: SecretProblem,
    },
    /// Settings given to [`ModelClient::builder`](crate::model::ModelClient::builder) that the configuration's rules
    /// refuse: every one, each with its field as the builder names it (`deployments[0].base_url`).
    #[error("{}", crate::settings::refused("model route", route, errors))]
    Settings {
        /// The route.
        route: String,
        /// What validation said.
        errors: ConfigErrors,
    },
}

/// One deployment, ready to send.
#[derive(Debug)]
pub(super) struct DeploymentClient {
    /// Its name in reports: `route[index] model`.
    pub(super) name: String,
    /// The same, for every call's context.
    pub(super) target: Arc<str>,
    pub(super) config: Deployment,
    /// `base_url` without its trailing slashes: every path of the APIs goes after it.
    base: String,
    /// Where each API's calls go, for the APIs it speaks (by [`api_slot`]).
    uris: [Option<Uri>; 3],
    authorization: Option<HeaderValue>,
    /// Its account in the records of provider state (`StateHome::account`).
    account: Option<String>,
    pub(super) upstream: Upstream,
    /// Until when this deployment is skipped: it answered insufficient quota (DESIGN.md, "Fallback").
    quota_spent_until: Mutex<Option<Instant>>,
    /// The longest skip: `server.max_retry_after` (a `Retry-After` of a day does not take a deployment out for a
    /// day).
    max_skip: Duration,
}

impl InvalidSettings for InvalidModelRoute {
    fn retry(route: &str, source: InvalidRetryPolicy) -> Self {
        InvalidModelRoute::Retry {
            route: route.to_owned(),
            source,
        }
    }

    fn admission(route: &str, source: InvalidAdmission) -> Self {
        InvalidModelRoute::Admission {
            route: route.to_owned(),
            source,
        }
    }
}

/// How long a deployment that answered insufficient quota without a `Retry-After` is skipped.
pub(super) const QUOTA_SKIP: Duration = Duration::from_secs(60);

impl DeploymentClient {
    /// Deployment `index` of `route`, sending `authorization` (its API key, read by the caller), through
    /// `transport`.
    pub(super) fn build<T>(
        route: &ModelRoute,
        index: usize,
        server: &ServerConfig,
        authorization: Option<HeaderValue>,
        transport: T,
    ) -> Result<Self, InvalidModelRoute>
    where
        T: Transport,
    {
        let config = route.deployments[index].clone();
        let base = config.base_url.trim_end_matches('/').to_owned();
        let mut uris = [None, None, None];
        for api in config.apis.iter() {
            let url = format!("{base}{}", api_path(api));
            let uri = Uri::try_from(url.as_str()).map_err(|_| InvalidModelRoute::BaseUrl {
                route: route.name.clone(),
                index,
                url: config.base_url.clone(),
            })?;
            uris[api_slot(api)] = Some(uri);
        }
        let settings = Settings {
            retry: &route.retry,
            budget: &route.budget,
            breaker: route.breaker,
            throttle: route.throttle,
            concurrency: route.concurrency,
            queue: route.queue,
            per_try: config.per_try_timeout,
        };
        let parts = Parts::of::<InvalidModelRoute>(&route.name, &settings, server)?;
        let name = deployment_name(route, index);
        let account = account(&config, authorization.as_ref());
        Ok(DeploymentClient {
            account,
            target: Arc::from(name.as_str()),
            name,
            config,
            base,
            uris,
            authorization,
            upstream: Upstream::new(parts, transport),
            quota_spent_until: Mutex::new(None),
            max_skip: server.max_retry_after,
        })
    }

    /// Skips this deployment from `now` for `retry_after` (else [`QUOTA_SKIP`]): it answered insufficient quota,
    /// which no retry fixes, so calls go to the next deployment first rather than each asking it again.
    pub(super) fn quota_spent(&self, retry_after: Option<Duration>, now: Instant) {
        let until = now + retry_after.unwrap_or(QUOTA_SKIP).min(self.max_skip);
        let mut spent = self
            .quota_spent_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *spent = Some(spent.map_or(until, |before| before.max(until)));
    }

    /// Until when the deployment is skipped, if it is at `now` (its quota was spent, and the wait it asked has
    /// not passed).
    pub(super) fn quota_skipped_until(&self, now: Instant) -> Option<Instant> {
        let spent = self
            .quota_spent_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        spent.filter(|until| now < *until)
    }

    /// What the records of provider state call this deployment.
    pub(super) fn home(&self) -> StateHome {
        StateHome {
            base_url: self.config.base_url.clone(),
            model: self.config.model.clone(),
            account: self.account.clone(),
        }
    }

    /// Whether the deployment speaks `api` (its config's `api`).
    pub(super) fn speaks(&self, api: Api) -> bool {
        self.uris[api_slot(api)].is_some()
    }

    /// The URI of `path` under the deployment's base URL (`/responses/resp_1/cancel`); `None` when it makes none.
    pub(super) fn uri_of(&self, path: &str) -> Option<Uri> {
        Uri::try_from(format!("{}{path}", self.base)).ok()
    }

    /// One trip through the stack of a call of `api` with `body` under `ctx` (streamed when `ctx` has a commit
    /// rule); `attempts_before` attempts of this call were already made on this deployment (a resend after
    /// truncation numbers its attempts after them). The caller sends only APIs the deployment speaks.
    pub(super) async fn send(&self, api: Api, body: Bytes, ctx: &CallContext, attempts_before: u32) -> Trip {
        let Some(uri) = &self.uris[api_slot(api)] else {
            unreachable!("{}: a call of an API it does not speak ({api})", self.name)
        };
        self.send_to(http::Method::POST, uri.clone(), body, ctx, attempts_before)
            .await
    }

    /// One trip through the stack with `method` to `uri` (under the deployment's base URL), `body` (JSON, or
    /// empty for none) under `ctx`.
    pub(super) async fn send_to(
        &self,
        method: http::Method,
        uri: Uri,
        body: Bytes,
        ctx: &CallContext,
        attempts_before: u32,
    ) -> Trip {
        let has_body = !body.is_empty();
        let mut request = Request::new(body);
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        if has_body {
            headers.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        if let Some(authorization) = &self.authorization {
            headers.insert(http::header::AUTHORIZATION, authorization.clone());
        }
        if ctx.stream.is_some() {
            headers.insert(
                http::header::ACCEPT,
                HeaderValue::from_static("text/event-stream"),
            );
        }
        request.extensions_mut().insert(ctx.clone());
        self.upstream
            .trip(request, ctx, Polling { attempts_before })
            .await
    }
}

/// The account a deployment's state records name: its key's variable, else a digest of the key it was given.
fn account(config: &Deployment, authorization: Option<&HeaderValue>) -> Option<String> {
    if let Some(var) = &config.api_key_env {
        return Some(format!("env:{var}"));
    }
    let key = authorization?;
    let digest = ballast_core::fingerprint("KEY", "", None, key.as_bytes()).ok()?;
    Some(format!("key:{}", &digest.to_hex()[..16]))
}

/// Deployment `index` of `route` as reports, metrics and `/status` name it: `route[index] model`.
pub fn deployment_name(route: &ModelRoute, index: usize) -> String {
    format!("{}[{index}] {}", route.name, route.deployments[index].model)
}

/// The path of `api`'s calls after a base URL.
fn api_path(api: Api) -> &'static str {
    match api {
        Api::Responses => "/responses",
        Api::Chat => "/chat/completions",
        Api::Embeddings => "/embeddings",
    }
}

/// Where `api`'s URI is kept.
fn api_slot(api: Api) -> usize {
    match api {
        Api::Responses => 0,
        Api::Chat => 1,
        Api::Embeddings => 2,
    }
}

/// The `Authorization` of deployment `index` of `route`: `Bearer <key>` from the variable its `api_key_env`
/// names in `env` (`None` when it names none).
pub(super) fn authorization_from_env(
    route: &ModelRoute,
    index: usize,
    env: &dyn Env,
) -> Result<Option<HeaderValue>, MissingSecret> {
    let Some(var) = &route.deployments[index].api_key_env else {
        return Ok(None);
    };
    let path = format!("models.{}.deployments[{index}].api_key_env", route.name);
    let missing = |problem| MissingSecret {
        path: path.clone(),
        var: var.clone(),
        problem,
    };
    let key = env.var(var).ok_or_else(|| missing(SecretProblem::Unset))?;
    bearer(&key).map(Some).map_err(missing)
}

/// `Bearer <key>`, marked sensitive (never logged); refused when the key is empty or cannot be sent in a header.
pub(super) fn bearer(key: &str) -> Result<HeaderValue, SecretProblem> {
    if key.is_empty() {
        return Err(SecretProblem::Empty);
    }
    let mut value =
        HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| SecretProblem::NotHeaderValue)?;
    value.set_sensitive(true);
    Ok(value)
}
