//! Every configured tool's client, built from one `Config` and one transport.

use std::collections::HashMap;
use std::sync::Arc;

use ballast_config::{Config, ToolConfig, ToolFallback};
use ballast_core::{AdmissionConfig, CircuitBreaker, InvalidAdmission, InvalidRetryPolicy, RetryPolicy};
use bytes::Bytes;
use http::{Request, Response};
use tower::{Service, ServiceBuilder};

use super::ToolClient;
use super::client::{Fallback, Inner, Stack};
use crate::{AdmissionLayer, AttemptLayer, BreakerLayer, DeadlineLayer, Error, RetryLayer, Runs};

/// A tool whose settings the async layers refuse (validation normally catches these first).
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
}

/// The clients of every tool of a configuration, sharing one transport and one registry of runs.
#[derive(Clone, Debug)]
pub struct ToolClients {
    clients: HashMap<String, ToolClient>,
}

impl ToolClients {
    /// A client per configured tool, each with its own breaker, budget and admission queue, all sending
    /// through `transport` (`HttpTransport` in production, `ServiceTransport` over the chaos router in tests).
    pub fn from_config<T>(config: &Config, transport: T) -> Result<Self, InvalidTool>
    where
        T: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error> + Clone + Send + Sync + 'static,
        T::Future: Send + 'static,
    {
        let runs = Arc::new(Runs::new(config.run.retry_allowance, config.run.ttl));
        Self::from_config_with_runs(config, transport, runs)
    }

    /// [`ToolClients::from_config`] over the registry of runs `runs`, shared with the agent's
    /// [`ChatClients`](crate::ChatClients) (built with
    /// [`ChatClients::from_config_with_runs`](crate::ChatClients::from_config_with_runs)) so a run's deadline and
    /// retry allowance hold across its model and tool calls alike.
    pub fn from_config_with_runs<T>(
        config: &Config,
        transport: T,
        runs: Arc<Runs>,
    ) -> Result<Self, InvalidTool>
    where
        T: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error> + Clone + Send + Sync + 'static,
        T::Future: Send + 'static,
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

    /// The client of tool `name`.
    pub fn get(&self, name: &str) -> Option<&ToolClient> {
        self.clients.get(name)
    }

    /// Every client, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &ToolClient> {
        self.clients.values()
    }
}

fn build<T>(
    config: &Config,
    tool: &ToolConfig,
    transport: T,
    runs: Arc<Runs>,
    fallback: Option<Fallback>,
) -> Result<ToolClient, InvalidTool>
where
    T: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error> + Clone + Send + Sync + 'static,
    T::Future: Send + 'static,
{
    let server = &config.server;
    let policy = RetryPolicy::new(tool.retry.max_attempts, tool.retry.backoff)
        .map_err(|source| InvalidTool::Retry {
            tool: tool.name.clone(),
            source,
        })?
        .with_max_retry_after(server.max_retry_after);
    let admission = AdmissionLayer::new(AdmissionConfig::new(
        tool.concurrency as usize,
        tool.queue as usize,
    ))
    .map_err(|source| InvalidTool::Admission {
        tool: tool.name.clone(),
        source,
    })?;
    let breaker = Arc::new(CircuitBreaker::seeded(tool.breaker, None));
    let budget = tool.budget.build();
    let stack: Stack = Arc::new(
        ServiceBuilder::new()
            // Over the stack below, which needs less of it (no timer, no scope for the admission's call).
            .layer(DeadlineLayer::new(server.default_timeout).over_tool_stack())
            .layer(admission)
            .layer(RetryLayer::new(policy, Arc::clone(&budget)))
            .layer(BreakerLayer::new(Arc::clone(&breaker)))
            // The deadline layer above watches the call's token: the attempt need not (one watch per call).
            .layer(AttemptLayer::new(tool.per_try_timeout).cancel_watched_above())
            .service(transport),
    );
    let target = http::Method::from_bytes(tool.upstream.method.as_str().as_bytes())
        .ok()
        .zip(http::Uri::try_from(tool.upstream.url.as_str()).ok());
    Ok(ToolClient::from_inner(Inner {
        tool: tool.clone(),
        server: server.clone(),
        stack,
        target,
        breaker,
        budget,
        runs,
        fallback,
    }))
}
