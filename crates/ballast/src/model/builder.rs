//! [`ModelClient::builder`]: a model route in code, without TOML, checked at `build()` by the configuration's own
//! rules (`crate::settings`): a client built here is one a `[[models]]` entry could have described. An API key
//! may be given as a value here (never part of a config) or by the name of its environment variable.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ballast_config::{
    Api, ApiSet, Config, Deployment, Env, ModelRoute, OnOverflow, ProcessEnv, ServerConfig,
};
use http::HeaderValue;

use super::ModelClient;
use super::deployment::{DeploymentClient, InvalidModelRoute, authorization_from_env, bearer};
use super::responses::{MemoryStateRecords, StateRecords};
use super::route::Route;
use crate::Runs;
use crate::client::Core;
use crate::settings::validated;
use crate::transport::Transport;

/// A [`ModelClient`] in the making: a model route's settings and `[server]`'s, each at the default a config file
/// gives an omitted key, its deployments in fallback order; checked by the configuration's rules at
/// [`build`](ModelClientBuilder::build).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use ballast::{model::{ModelClient, ChatRequest, ChatCall, DeploymentBuilder}, transport::ServiceTransport};
/// use serde_json::json;
///
/// let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
/// let agent = ModelClient::builder("agent")
///     .deployment(DeploymentBuilder::new("http://chaos/v1").model("mock").api_key("sk-test"))
///     .deployment(DeploymentBuilder::new("http://chaos/v1").model("mock-small"))
///     .primary_share(0.5)
///     .build(transport)
///     .unwrap();
/// let request: ChatRequest = serde_json::from_value(json!({
///     "model": "agent",
///     "messages": [{"role": "user", "content": "Refund order 1234, op=op-1"}],
/// })).unwrap();
/// let answer = agent.complete(ChatCall::new(request)).await.unwrap();
/// assert_eq!(answer.status, 200);
///
/// // A key named by its variable is read at build(), from the process environment unless `.env(..)` is given.
/// let error = ModelClient::builder("agent")
///     .deployment(DeploymentBuilder::new("http://chaos/v1").api_key_env("NOT_SET_ANYWHERE"))
///     .env(|_: &str| None)
///     .build(ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default())))
///     .unwrap_err();
/// assert!(error.to_string().contains("NOT_SET_ANYWHERE is not set"));
/// # }
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until it is built"]
pub struct ModelClientBuilder {
    route: ModelRoute,
    deployments: Vec<DeploymentBuilder>,
    server: ServerConfig,
    runs: Option<Arc<Runs>>,
    env: Option<Arc<dyn Env + Send + Sync>>,
    states: Option<Arc<dyn StateRecords>>,
}

/// One deployment of a [`ModelClientBuilder`]'s route: its base URL, the model name sent upstream, its API key
/// and its per-try timeout.
#[derive(Clone)]
#[must_use = "a deployment is used once given to ModelClientBuilder::deployment"]
pub struct DeploymentBuilder {
    base_url: String,
    model: Option<String>,
    api_key: Option<ApiKey>,
    per_try_timeout: Option<Duration>,
    apis: ApiSet,
    limits: Option<ballast_config::Limits>,
}

/// Where a deployment's API key comes from.
#[derive(Clone)]
enum ApiKey {
    /// The key itself (never shown in `Debug`).
    Value(String),
    /// The name of the environment variable that holds it.
    Env(String),
}

impl ModelClient {
    /// A builder of the model route `name` (what callers put in `model`), every setting at its default; add its
    /// deployments with [`ModelClientBuilder::deployment`], first to last.
    pub fn builder(name: impl Into<String>) -> ModelClientBuilder {
        ModelClientBuilder {
            route: ModelRoute::new(name, Vec::new()),
            deployments: Vec::new(),
            server: ServerConfig::default(),
            runs: None,
            env: None,
            states: None,
        }
    }

    /// The client of `route` under `server`'s settings, each deployment sending its `authorization` (by index)
    /// through `transport`, its calls joining `runs`.
    pub(super) fn assemble<T>(
        route: ModelRoute,
        server: &ServerConfig,
        authorization: Vec<Option<HeaderValue>>,
        transport: T,
        runs: Arc<Runs>,
        states: Arc<dyn StateRecords>,
    ) -> Result<Self, InvalidModelRoute>
    where
        T: Transport,
    {
        let deployments = (authorization.into_iter().enumerate())
            .map(|(index, key)| DeploymentClient::build(&route, index, server, key, transport.clone(), &runs))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ModelClient::from_route(Route {
            config: route,
            core: Core::new(server, runs),
            deployments,
            states,
        }))
    }
}

impl DeploymentBuilder {
    /// The deployment at the OpenAI-compatible `base_url` (`http` or `https`, e.g. `https://api.openai.com/v1`),
    /// with no API key; the model name sent is the route's name unless [`model`](DeploymentBuilder::model) says
    /// otherwise.
    pub fn new(base_url: impl Into<String>) -> Self {
        DeploymentBuilder {
            base_url: base_url.into(),
            model: None,
            api_key: None,
            per_try_timeout: None,
            limits: None,
            apis: ApiSet::OPENAI,
        }
    }

    /// The APIs this deployment speaks (default: every one): a call of an API goes only to the deployments that
    /// speak it (a config's `api`).
    pub fn api(mut self, apis: impl IntoIterator<Item = Api>) -> Self {
        self.apis = apis.into_iter().collect();
        self
    }

    /// The model name sent upstream (default: the route's name).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The API key itself, sent as `Authorization: Bearer <key>` (never logged or shown). Replaces a key's
    /// variable.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::Value(key.into()));
        self
    }

    /// The environment variable holding the API key, read once at `build()` (a config's `api_key_env`).
    /// Replaces a key given as a value.
    pub fn api_key_env(mut self, var: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::Env(var.into()));
        self
    }

    /// The account's limits (requests and tokens per minute), charged before each attempt — across every instance
    /// when the clients share a store ([`Runs::with_sharing`](crate::Runs::with_sharing)), else in this process.
    pub fn limits(mut self, limits: ballast_config::Limits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// This deployment's longest single attempt (default: the route's `per_try_timeout`).
    pub fn per_try_timeout(mut self, timeout: Duration) -> Self {
        self.per_try_timeout = Some(timeout);
        self
    }

    /// The typed deployment of `route`, its defaults the route's.
    fn typed(&self, route: &ModelRoute) -> Deployment {
        Deployment {
            base_url: self.base_url.clone(),
            model: self.model.clone().unwrap_or_else(|| route.name.clone()),
            api_key_env: match &self.api_key {
                Some(ApiKey::Env(var)) => Some(var.clone()),
                Some(ApiKey::Value(_)) | None => None,
            },
            per_try_timeout: self.per_try_timeout.unwrap_or(route.per_try_timeout),
            apis: self.apis,
            limits: self.limits,
        }
    }
}

impl ModelClientBuilder {
    crate::settings::builder_setters!(route);

    /// Adds a deployment after those added before: the first is the primary, each next one its fallback.
    pub fn deployment(mut self, deployment: DeploymentBuilder) -> Self {
        self.deployments.push(deployment);
        self
    }

    /// With fallbacks, the share of the remaining time the first deployment may use, in (0, 1] (default 0.6).
    pub fn primary_share(mut self, share: f64) -> Self {
        self.route.primary_share = share;
        self
    }

    /// The longest gap between two chunks of a streamed answer once the first has arrived (default 30 s).
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.route.stream_idle_timeout = timeout;
        self
    }

    /// What a prompt over the model's context length does (default [`OnOverflow::Error`]; `Fallback` needs a
    /// second deployment).
    pub fn on_overflow(mut self, on_overflow: OnOverflow) -> Self {
        self.route.context.on_overflow = on_overflow;
        self
    }

    /// Where the records of which deployment keeps which response live (default: in memory,
    /// [`MemoryStateRecords`]); [`StoreStateRecords`](super::StoreStateRecords) keeps them in an idempotency
    /// store, for its retention and across restarts.
    pub fn state_records(mut self, records: Arc<dyn StateRecords>) -> Self {
        self.states = Some(records);
        self
    }

    /// Where keys named by [`DeploymentBuilder::api_key_env`] are read from (default: the process environment,
    /// [`ProcessEnv`]); a `HashMap` or a closure in tests.
    pub fn env(mut self, env: impl Env + Send + Sync + 'static) -> Self {
        self.env = Some(Arc::new(env));
        self
    }

    /// The client, sending through `transport`; or every setting the configuration's rules refuse
    /// ([`InvalidModelRoute::Settings`], each with its field), or an API key that cannot be sent or is not set.
    pub fn build<T>(self, transport: T) -> Result<ModelClient, InvalidModelRoute>
    where
        T: Transport,
    {
        let mut route = self.route;
        let name = route.name.clone();
        route.deployments = self.deployments.iter().map(|d| d.typed(&route)).collect();
        let config = Config {
            server: self.server,
            models: vec![route],
            ..Config::default()
        };
        let config = validated(&config, "models[0]").map_err(|errors| InvalidModelRoute::Settings {
            route: name.clone(),
            errors,
        })?;
        let route = &config.models[0];
        let env: &dyn Env = match &self.env {
            Some(env) => env.as_ref(),
            None => &ProcessEnv,
        };
        let mut keys = Vec::with_capacity(self.deployments.len());
        for (index, deployment) in self.deployments.iter().enumerate() {
            keys.push(match &deployment.api_key {
                None => None,
                Some(ApiKey::Env(_)) => authorization_from_env(route, index, env)?,
                Some(ApiKey::Value(key)) => {
                    Some(bearer(key).map_err(|problem| InvalidModelRoute::ApiKeyValue {
                        route: name.clone(),
                        index,
                        problem,
                    })?)
                }
            });
        }
        let runs = self.runs.unwrap_or_else(|| Arc::new(Runs::of(&config.run)));
        let states = self
            .states
            .unwrap_or_else(|| Arc::new(MemoryStateRecords::default()));
        ModelClient::assemble(route.clone(), &config.server, keys, transport, runs, states)
    }
}

impl fmt::Debug for ModelClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelClientBuilder")
            .field("route", &self.route)
            .field("deployments", &self.deployments)
            .field("server", &self.server)
            .field("runs", &self.runs)
            .field("states", &self.states)
            .field(
                "env",
                &self.env.as_ref().map_or("the process environment", |_| "given"),
            )
            .finish()
    }
}

impl fmt::Debug for DeploymentBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let api_key = match &self.api_key {
            None => None,
            Some(ApiKey::Value(_)) => Some("<given, not shown>".to_owned()),
            Some(ApiKey::Env(var)) => Some(format!("from ${var}")),
        };
        f.debug_struct("DeploymentBuilder")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &api_key)
            .field("per_try_timeout", &self.per_try_timeout)
            .field("apis", &self.apis)
            .finish()
    }
}
