//! Every model route's client: built from one `Config`, the environment and one transport, or gathered from
//! clients built one by one.

use std::collections::HashMap;
use std::sync::Arc;

use ballast_config::{Config, Env, ProcessEnv};

use super::ModelClient;
use super::call::UnknownRoute;
use super::deployment::{InvalidModelRoute, authorization_from_env};
use super::responses::{MemoryStateRecords, StateRecords};
use crate::Runs;
use crate::transport::Transport;

/// The clients of every model route of a configuration, sharing one transport and one registry of runs (which
/// may be shared with the tools' clients too).
#[derive(Clone, Debug, Default)]
pub struct ModelClients {
    clients: HashMap<String, ModelClient>,
}

impl ModelClients {
    /// A client per configured model route, each deployment with its own breaker and budget, all sending through
    /// `transport` (`HttpTransport` in production, `ServiceTransport` over the chaos router in tests: the same
    /// transports as the tools'). A transport of your own that answers with whole bytes is read whole: a streamed
    /// call over it commits at once, without the commit point's checks (a first event that is an error is then
    /// the stream's error, not a retry) — read a body with Ballast's transports to keep them.
    ///
    /// API keys are read here, once, from the process environment ([`ProcessEnv`]) — only the variables the
    /// deployments name in `api_key_env`, so a config that names none reads nothing. A key that is missing is an
    /// error now, not at the first call. The clients keep their own registry of runs; an agent that also calls
    /// tools builds both on one with [`ModelClients::from_config_with_runs`].
    pub fn from_config<T>(config: &Config, transport: T) -> Result<Self, InvalidModelRoute>
    where
        T: Transport,
    {
        let runs = Arc::new(Runs::of(&config.run));
        Self::from_config_with_runs(config, transport, runs)
    }

    /// [`ModelClients::from_config`] over the registry of runs `runs`: give the agent's
    /// [`ToolClients`](crate::ToolClients) the same one
    /// ([`ToolClients::from_config_with_runs`](crate::ToolClients::from_config_with_runs)) and a run's deadline
    /// and retry allowance hold across its model and tool calls alike — three retries for the whole agent
    /// request, not three for its model calls and three more for its tools.
    pub fn from_config_with_runs<T>(
        config: &Config,
        transport: T,
        runs: Arc<Runs>,
    ) -> Result<Self, InvalidModelRoute>
    where
        T: Transport,
    {
        Self::from_config_with_env(config, &ProcessEnv, transport, runs)
    }

    /// [`ModelClients::from_config_with_runs`] with the API keys read from `env` instead of the process
    /// environment: tests (a `HashMap`, a closure), or keys kept somewhere else.
    pub fn from_config_with_env<T>(
        config: &Config,
        env: &dyn Env,
        transport: T,
        runs: Arc<Runs>,
    ) -> Result<Self, InvalidModelRoute>
    where
        T: Transport,
    {
        let states = Arc::new(MemoryStateRecords::default());
        Self::from_config_with_records(config, env, transport, runs, states)
    }

    /// [`ModelClients::from_config_with_env`] with the records of which deployment keeps which response in
    /// `records` (the gateway's: [`StoreStateRecords`](super::StoreStateRecords) over its store), shared by
    /// every route.
    pub fn from_config_with_records<T>(
        config: &Config,
        env: &dyn Env,
        transport: T,
        runs: Arc<Runs>,
        records: Arc<dyn StateRecords>,
    ) -> Result<Self, InvalidModelRoute>
    where
        T: Transport,
    {
        let mut clients = HashMap::new();
        for route in &config.models {
            let keys = (0..route.deployments.len())
                .map(|index| authorization_from_env(route, index, env))
                .collect::<Result<Vec<_>, _>>()?;
            let client = ModelClient::assemble(
                route.clone(),
                &config.server,
                keys,
                transport.clone(),
                Arc::clone(&runs),
                Arc::clone(&records),
            )?;
            clients.insert(route.name.clone(), client);
        }
        Ok(ModelClients { clients })
    }

    /// Adds `client` under its route's name; returns the client it replaces, if one had that name.
    pub fn insert(&mut self, client: ModelClient) -> Option<ModelClient> {
        self.clients.insert(client.name().to_owned(), client)
    }

    /// The client of route `name`.
    pub fn get(&self, name: &str) -> Option<&ModelClient> {
        self.clients.get(name)
    }

    /// The client of route `name`, or [`UnknownRoute`] (what the gateway answers with 404).
    pub fn route(&self, name: &str) -> Result<&ModelClient, UnknownRoute> {
        self.get(name).ok_or_else(|| UnknownRoute(name.to_owned()))
    }

    /// Every client, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &ModelClient> {
        self.clients.values()
    }
}

/// Clients built one by one ([`ModelClient::builder`]), keyed by their routes' names (a later one of the same name
/// replaces the earlier).
impl FromIterator<ModelClient> for ModelClients {
    fn from_iter<I: IntoIterator<Item = ModelClient>>(clients: I) -> Self {
        let clients = (clients.into_iter())
            .map(|client| (client.name().to_owned(), client))
            .collect();
        ModelClients { clients }
    }
}
