//! Every configured model route's client, built from one `Config`, the environment and one transport.

use std::collections::HashMap;
use std::sync::Arc;

use ballast_config::{Config, Env};
use bytes::Bytes;
use http::{Request, Response};
use tower::Service;

use super::ChatClient;
use super::call::UnknownRoute;
use super::client::Inner;
use super::deployment::{DeploymentClient, InvalidChatRoute};
use crate::client::Core;
use crate::{Body, Error, Runs};

/// The clients of every model route of a configuration, sharing one transport and one registry of runs (which
/// may be shared with the tools' clients too).
#[derive(Clone, Debug)]
pub struct ChatClients {
    clients: HashMap<String, ChatClient>,
}

impl ChatClients {
    /// A client per configured model route, each deployment with its own breaker and budget, all sending through
    /// `transport` (`HttpTransport` in production, `ServiceTransport` over the chaos router in tests: the same
    /// transports as the tools'). A transport of your own that answers with whole bytes is read whole: a streamed
    /// call over it commits at once, without the commit point's checks (a first event that is an error is then
    /// the stream's error, not a retry) — read a body with Ballast's transports to keep them. API keys are read from `env` here, once (`api_key_env`): a key that is missing is an error now,
    /// not at the first call. The clients keep their own registry of runs; an agent that also calls tools builds
    /// both on one with [`ChatClients::from_config_with_runs`].
    pub fn from_config<T, B>(config: &Config, env: &dyn Env, transport: T) -> Result<Self, InvalidChatRoute>
    where
        T: Service<Request<Bytes>, Response = Response<B>, Error = Error> + Clone + Send + Sync + 'static,
        T::Future: Send + 'static,
        B: Into<Body> + 'static,
    {
        let runs = Arc::new(Runs::of(&config.run));
        Self::from_config_with_runs(config, env, transport, runs)
    }

    /// [`ChatClients::from_config`] over the registry of runs `runs`: give the agent's
    /// [`ToolClients`](crate::ToolClients) the same one
    /// ([`ToolClients::from_config_with_runs`](crate::ToolClients::from_config_with_runs)) and a run's deadline
    /// and retry allowance hold across its model and tool calls alike — three retries for the whole agent
    /// request, not three for its model calls and three more for its tools.
    pub fn from_config_with_runs<T, B>(
        config: &Config,
        env: &dyn Env,
        transport: T,
        runs: Arc<Runs>,
    ) -> Result<Self, InvalidChatRoute>
    where
        T: Service<Request<Bytes>, Response = Response<B>, Error = Error> + Clone + Send + Sync + 'static,
        T::Future: Send + 'static,
        B: Into<Body> + 'static,
    {
        let mut clients = HashMap::new();
        for route in &config.models {
            let deployments = (0..route.deployments.len())
                .map(|index| DeploymentClient::build(route, index, &config.server, env, transport.clone()))
                .collect::<Result<Vec<_>, _>>()?;
            let client = ChatClient::from_inner(Inner {
                route: route.clone(),
                core: Core::new(&config.server, Arc::clone(&runs)),
                deployments,
            });
            clients.insert(route.name.clone(), client);
        }
        Ok(ChatClients { clients })
    }

    /// The client of route `name`.
    pub fn get(&self, name: &str) -> Option<&ChatClient> {
        self.clients.get(name)
    }

    /// The client of route `name`, or [`UnknownRoute`] (what the gateway answers with 404).
    pub fn route(&self, name: &str) -> Result<&ChatClient, UnknownRoute> {
        self.get(name).ok_or_else(|| UnknownRoute(name.to_owned()))
    }

    /// Every client, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &ChatClient> {
        self.clients.values()
    }
}
