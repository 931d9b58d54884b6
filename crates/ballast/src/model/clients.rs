//! Every model route's client: built from one `Config` ([`Clients::from_config`](crate::Clients::from_config)),
//! or gathered from clients built one by one.

use std::collections::HashMap;
use std::sync::Arc;

use ballast_config::{Config, Env};

use super::ModelClient;
use super::call::UnknownRoute;
use super::deployment::{InvalidModelRoute, authorization_from_env};
use super::responses::StateRecords;
use crate::Runs;
use crate::transport::Transport;

/// The clients of every model route of a configuration, sharing one transport and one registry of runs (which
/// may be shared with the tools' clients too).
#[derive(Clone, Debug, Default)]
pub struct ModelClients {
    clients: HashMap<String, ModelClient>,
}

impl ModelClients {
    /// A client per configured model route (see [`Clients::from_config`](crate::Clients::from_config)), each
    /// deployment with its own breaker and budget, all sending through `transport`, its API keys read from `env`,
    /// the records of which deployment keeps which response in `records`, shared by every route.
    pub(crate) fn assemble<T>(
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
