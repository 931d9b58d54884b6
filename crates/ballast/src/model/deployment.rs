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
    /// Where each call goes, by its protocol's path (`/chat/completions`), for the APIs it speaks.
    uris: Vec<(&'static str, Uri)>,
    /// Its API key, as each API sends it (`None`: no key).
    credentials: Option<Credentials>,
    /// Its account in the records of provider state (`StateHome::account`).
    account: Option<String>,
    pub(super) upstream: Upstream,
    /// Until when this deployment is skipped: it answered insufficient quota (DESIGN.md, "Fallback").
    quota_spent_until: Mutex<Option<Instant>>,
    /// The longest skip: `server.max_retry_after` (a `Retry-After` of a day does not take a deployment out for a
    /// day).
    max_skip: Duration,
}

/// A deployment's API key as the APIs send it: OpenAI's `Authorization: Bearer <key>`, Anthropic's
/// `x-api-key: <key>` (both marked sensitive, never logged).
#[derive(Debug)]
struct Credentials {
    bearer: HeaderValue,
    key: HeaderValue,
}

impl Credentials {
    /// The credentials of `bearer` (`Bearer <key>`, as [`bearer`] made it).
    fn of(bearer: HeaderValue) -> Self {
        let raw = bearer.as_bytes();
        let mut key = HeaderValue::from_bytes(raw.strip_prefix(b"Bearer ").unwrap_or(raw))
            .unwrap_or_else(|_| bearer.clone());
        key.set_sensitive(true);
        Credentials { bearer, key }
    }

    /// The header `api` sends it in.
    fn header(&self, api: Api) -> (http::HeaderName, HeaderValue) {
        match api {
            Api::Messages => (X_API_KEY, self.key.clone()),
            _ => (http::header::AUTHORIZATION, self.bearer.clone()),
        }
    }
}

/// `x-api-key`: Anthropic's key header.
const X_API_KEY: http::HeaderName = http::HeaderName::from_static("x-api-key");

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
        runs: &crate::Runs,
    ) -> Result<Self, InvalidModelRoute>
    where
        T: Transport,
    {
        let config = route.deployments[index].clone();
        let base = config.base_url.trim_end_matches('/').to_owned();
        let mut uris = Vec::new();
        for path in config.apis.iter().flat_map(api_paths) {
            let url = format!("{base}{path}");
            let uri = Uri::try_from(url.as_str()).map_err(|_| InvalidModelRoute::BaseUrl {
                route: route.name.clone(),
                index,
                url: config.base_url.clone(),
            })?;
            uris.push((*path, uri));
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
        let mut parts = Parts::of::<InvalidModelRoute>(&route.name, &settings, server)?;
        let name = deployment_name(route, index);
        let account = account(&config, authorization.as_ref());
        parts.limits = config.limits.map(|limits| {
            // The same key on every instance: what the provider counts the limit against.
            let key = format!(
                "{base}|{}|{}",
                config.model,
                account.as_deref().unwrap_or_default()
            );
            Arc::new(crate::limit::AccountLimits::new(
                Arc::from(name.as_str()),
                &key,
                &limits,
                |body| super::usage::usage_of_body(body).map(|usage| usage.total_tokens),
                #[cfg(feature = "idempotency")]
                runs.sharing().cloned(),
            ))
        });
        #[cfg(not(feature = "idempotency"))]
        let _ = runs;
        Ok(DeploymentClient {
            account,
            target: Arc::from(name.as_str()),
            name,
            config,
            base,
            uris,
            credentials: authorization.map(Credentials::of),
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
        self.config.apis.contains(api)
    }

    /// The URI of `path` under the deployment's base URL (`/responses/resp_1/cancel`); `None` when it makes none.
    pub(super) fn uri_of(&self, path: &str) -> Option<Uri> {
        Uri::try_from(format!("{}{path}", self.base)).ok()
    }

    /// One trip through the stack of a call of `api` to `path` (its protocol's) with `body` and the protocol's
    /// own `headers` under `ctx` (streamed when `ctx` has a commit rule); `attempts_before` attempts of this call
    /// were already made on this deployment (a resend after truncation numbers its attempts after them). The
    /// caller sends only APIs the deployment speaks.
    pub(super) async fn send(
        &self,
        (api, path): (Api, &'static str),
        body: Bytes,
        headers: http::HeaderMap,
        ctx: &CallContext,
        attempts_before: u32,
    ) -> Trip {
        let Some((_, uri)) = self.uris.iter().find(|(p, _)| *p == path) else {
            unreachable!("{}: a call of an API it does not speak ({api} {path})", self.name)
        };
        let mut request = self.request(api, http::Method::POST, uri.clone(), body);
        request.headers_mut().extend(headers);
        self.trip(request, ctx, attempts_before).await
    }

    /// One trip through the stack with `method` to `uri` (under the deployment's base URL), `body` (JSON, or
    /// empty for none) under `ctx`: a call of `api` about a kept response.
    pub(super) async fn send_to(&self, api: Api, method: http::Method, uri: Uri, ctx: &CallContext) -> Trip {
        let request = self.request(api, method, uri, Bytes::new());
        self.trip(request, ctx, 0).await
    }

    /// A request of `api` to `uri` with `body` (JSON, or empty for none) and the deployment's key.
    fn request(&self, api: Api, method: http::Method, uri: Uri, body: Bytes) -> Request<Bytes> {
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
        if let Some(credentials) = &self.credentials {
            let (name, value) = credentials.header(api);
            headers.insert(name, value);
        }
        request
    }

    /// `request`'s trip through the stack under `ctx` (streamed when it has a commit rule).
    async fn trip(&self, mut request: Request<Bytes>, ctx: &CallContext, attempts_before: u32) -> Trip {
        let headers = request.headers_mut();
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

/// The paths of `api`'s calls after a base URL (each protocol's `PATH`).
fn api_paths(api: Api) -> &'static [&'static str] {
    use super::api::Protocol;
    use super::{chat::Chat, embeddings::Embeddings, messages, responses::Responses};
    match api {
        Api::Responses => &[Responses::PATH],
        Api::Chat => &[Chat::PATH],
        Api::Embeddings => &[Embeddings::PATH],
        Api::Messages => &[messages::Messages::PATH, messages::CountTokens::PATH],
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
