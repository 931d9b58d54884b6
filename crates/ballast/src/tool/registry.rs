//! Every tool's client: built from one `Config` and one transport, or gathered from clients built one by one.

use std::collections::HashMap;
use std::sync::Arc;

use ballast_config::{Config, ConfigErrors, ToolConfig, ToolFallback};
use ballast_core::{AdaptiveThrottle, CircuitBreaker, InvalidAdmission, InvalidRetryPolicy, RetryPolicy};
use bytes::Bytes;
use http::{Request, Response};
use tower::Service;

use super::ToolClient;
use super::client::{Fallback, Inner};
use crate::client::{Core, Upstream, upstream};
use crate::{Body, Error, Runs};

/// A tool whose settings are refused: by the configuration's rules (a builder's settings), or by the async
/// layers (validation normally catches those first).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidTool {
    /// Its retry settings.
    #[error("tools.{tool}.retry: {source}")]
    Retry {
        /// The tool.
        tool: String,
        /// Why.
        source: InvalidRetryPolicy,
    },
    /// Its concurrency or queue.
    #[error("tools.{tool}: {source}")]
    Admission {
        /// The tool.
        tool: String,
        /// Why.
        source: InvalidAdmission,
    },
    /// Settings given to [`ToolClient::builder`] that the configuration's rules refuse: every one, each with its
    /// field as the builder names it (`concurrency`, `retry.max_attempts`, `body_limit`).
    #[error("{}", crate::settings::refused("tool", tool, errors))]
    Settings {
        /// The tool.
        tool: String,
        /// What validation said.
        errors: ConfigErrors,
    },
}

/// The clients of every tool of a configuration, sharing one transport and one registry of runs; or of tools
/// built one by one ([`ToolClient::builder`]), gathered with [`FromIterator`] or [`ToolClients::insert`].
#[derive(Clone, Debug, Default)]
pub struct ToolClients {
    clients: HashMap<String, ToolClient>,
}

impl ToolClients {
    /// A client per configured tool, each with its own breaker, budget and admission queue, all sending
    /// through `transport` (`HttpTransport` in production, `ServiceTransport` over the chaos router in tests; any
    /// tower service whose answer's body becomes a [`Body`]).
    pub fn from_config<T, B>(config: &Config, transport: T) -> Result<Self, InvalidTool>
    where
        T: Service<Request<Bytes>, Response = Response<B>, Error = Error> + Clone + Send + Sync + 'static,
        T::Future: Send + 'static,
        B: Into<Body> + 'static,
    {
        let runs = Arc::new(Runs::of(&config.run));
        Self::from_config_with_runs(config, transport, runs)
    }

    /// [`ToolClients::from_config`] over the registry of runs `runs`, shared with the agent's
    /// [`ChatClients`](crate::ChatClients) (built with
    /// [`ChatClients::from_config_with_runs`](crate::ChatClients::from_config_with_runs)) so a run's deadline and
    /// retry allowance hold across its model and tool calls alike.
    pub fn from_config_with_runs<T, B>(
        config: &Config,
        transport: T,
        runs: Arc<Runs>,
    ) -> Result<Self, InvalidTool>
    where
        T: Service<Request<Bytes>, Response = Response<B>, Error = Error> + Clone + Send + Sync + 'static,
        T::Future: Send + 'static,
        B: Into<Body> + 'static,
    {
        let mut clients = HashMap::new();
        // Validation guarantees fallback chains end; build each tool after the tool it falls back to.
        let mut pending: Vec<&ToolConfig> = config.tools.iter().collect();
        while !pending.is_empty() {
            let before = pending.len();
            let mut index = 0;
            while index < pending.len() {
                let tool = pending[index];
                let fallback = match &tool.fallback {
                    None => None,
                    Some(ToolFallback::Response(body)) => Some(Fallback::Response(body.clone())),
                    Some(ToolFallback::Tool(name)) => match clients.get(name) {
                        Some(client) => Some(Fallback::Tool(ToolClient::clone(client))),
                        None => {
                            index += 1;
                            continue;
                        }
                    },
                };
                let client = build(config, tool, transport.clone(), Arc::clone(&runs), fallback)?;
                clients.insert(tool.name.clone(), client);
                pending.swap_remove(index);
            }
            if pending.len() == before {
                // A fallback names a tool that is missing or in a cycle: validation refuses both, so this is
                // unreachable for a validated config; build the rest without their fallback rather than loop.
                for tool in pending.drain(..) {
                    let client = build(config, tool, transport.clone(), Arc::clone(&runs), None)?;
                    clients.insert(tool.name.clone(), client);
                }
            }
        }
        Ok(ToolClients { clients })
    }

    /// Adds `client` under its tool's name; returns the client it replaces, if one had that name.
    pub fn insert(&mut self, client: ToolClient) -> Option<ToolClient> {
        self.clients.insert(client.name().to_owned(), client)
    }

    /// The client of tool `name`.
    pub fn get(&self, name: &str) -> Option<&ToolClient> {
        self.clients.get(name)
    }

    /// Every client, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &ToolClient> {
        self.clients.values()
    }
}

/// Clients built one by one, keyed by their tools' names (a later one of the same name replaces the earlier).
impl FromIterator<ToolClient> for ToolClients {
    fn from_iter<I: IntoIterator<Item = ToolClient>>(clients: I) -> Self {
        let clients = (clients.into_iter())
            .map(|client| (client.name().to_owned(), client))
            .collect();
        ToolClients { clients }
    }
}

/// The client of `tool` of `config` (its server settings), falling back to `fallback`.
pub(super) fn build<T, B>(
    config: &Config,
    tool: &ToolConfig,
    transport: T,
    runs: Arc<Runs>,
    fallback: Option<Fallback>,
) -> Result<ToolClient, InvalidTool>
where
    T: Service<Request<Bytes>, Response = Response<B>, Error = Error> + Clone + Send + Sync + 'static,
    T::Future: Send + 'static,
    B: Into<Body> + 'static,
{
    let server = &config.server;
    let policy = RetryPolicy::new(tool.retry.max_attempts, tool.retry.backoff)
        .map_err(|source| InvalidTool::Retry {
            tool: tool.name.clone(),
            source,
        })?
        .with_max_retry_after(server.max_retry_after);
    let admission =
        upstream::admission(tool.concurrency, tool.queue).map_err(|source| InvalidTool::Admission {
            tool: tool.name.clone(),
            source,
        })?;
    let parts = upstream::Parts {
        policy,
        budget: tool.budget.build(),
        breaker: Arc::new(CircuitBreaker::seeded(tool.breaker, None)),
        throttle: tool
            .throttle
            .map(|config| Arc::new(AdaptiveThrottle::seeded(config, None))),
        admission: Some(admission),
        per_try: tool.per_try_timeout,
    };
    let target = http::Method::from_bytes(tool.upstream.method.as_str().as_bytes())
        .ok()
        .zip(http::Uri::try_from(tool.upstream.url.as_str()).ok());
    Ok(ToolClient::from_inner(Inner {
        tool: tool.clone(),
        name: Arc::from(tool.name.as_str()),
        core: Core::new(server, runs),
        upstream: Upstream::new(parts, transport),
        target,
        fallback,
    }))
}
