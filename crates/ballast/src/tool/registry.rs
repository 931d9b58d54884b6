//! Every tool's client: built from one `Config` and one transport, or gathered from clients built one by one.

use std::collections::HashMap;
use std::sync::Arc;

use ballast_config::{Config, ConfigErrors, Env, HeaderValueSource, SecretProblem, ToolConfig, ToolFallback};
use ballast_core::{InvalidAdmission, InvalidRetryPolicy};
use http::{HeaderName, HeaderValue};

use super::ToolClient;
use super::client::{Fallback, Inner};
use crate::Runs;
use crate::client::upstream::{InvalidSettings, Parts, Settings};
use crate::client::{Core, Upstream};
use crate::transport::Transport;

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
    /// A header of the tool's upstream whose variable is not set, is empty, or holds what a header cannot carry
    /// (`tools.process_payment.upstream.headers.authorization.env: environment variable PAYMENTS_TOKEN is not
    /// set`). The value is never part of the message.
    #[error("tools.{tool}.upstream.headers.{header}.env: environment variable {env} {problem}")]
    MissingSecret {
        /// The tool.
        tool: String,
        /// The header's name.
        header: String,
        /// The variable.
        env: String,
        /// What is wrong with it.
        problem: SecretProblem,
    },
    /// A header of the tool's upstream that is no HTTP header (a name or literal value validation refuses, in a
    /// config built in code and not validated).
    #[error("tools.{tool}.upstream.headers: {header:?} is not a valid HTTP header name or value")]
    InvalidHeader {
        /// The tool.
        tool: String,
        /// The header's name as configured.
        header: String,
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

impl InvalidSettings for InvalidTool {
    fn retry(tool: &str, source: InvalidRetryPolicy) -> Self {
        InvalidTool::Retry {
            tool: tool.to_owned(),
            source,
        }
    }

    fn admission(tool: &str, source: InvalidAdmission) -> Self {
        InvalidTool::Admission {
            tool: tool.to_owned(),
            source,
        }
    }
}

/// The clients of every tool of a configuration, sharing one transport and one registry of runs; or of tools
/// built one by one ([`ToolClient::builder`]), gathered with [`FromIterator`] or [`ToolClients::insert`].
#[derive(Clone, Debug, Default)]
pub struct ToolClients {
    clients: HashMap<String, ToolClient>,
}

impl ToolClients {
    /// A client per configured tool (see [`Clients::from_config`](crate::Clients::from_config)), each with its
    /// own breaker, budget and admission queue, all sending through `transport`, the upstreams' header values read
    /// from `env` once, here (secret ones marked sensitive, never logged).
    pub(crate) fn assemble<T>(
        config: &Config,
        env: &dyn Env,
        transport: T,
        runs: Arc<Runs>,
    ) -> Result<Self, InvalidTool>
    where
        T: Transport,
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
                let client = build(config, tool, transport.clone(), Arc::clone(&runs), fallback, env)?;
                clients.insert(tool.name.clone(), client);
                pending.swap_remove(index);
            }
            if pending.len() == before {
                // A fallback names a tool that is missing or in a cycle: validation refuses both, so this is
                // unreachable for a validated config; build the rest without their fallback rather than loop.
                for tool in pending.drain(..) {
                    let client = build(config, tool, transport.clone(), Arc::clone(&runs), None, env)?;
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

/// The client of `tool` of `config` (its server settings), falling back to `fallback`, its upstream's headers read
/// from `env`.
pub(super) fn build<T>(
    config: &Config,
    tool: &ToolConfig,
    transport: T,
    runs: Arc<Runs>,
    fallback: Option<Fallback>,
    env: &dyn Env,
) -> Result<ToolClient, InvalidTool>
where
    T: Transport,
{
    let parts = parts(config, tool)?;
    let headers = upstream_headers(tool, env)?;
    Ok(build_with(
        config, tool, parts, headers, transport, runs, fallback, false,
    ))
}

/// The parts of `tool`'s upstream (its own breaker, budget, throttle and admission) under `config`'s server.
pub(crate) fn parts(config: &Config, tool: &ToolConfig) -> Result<Parts, InvalidTool> {
    let settings = Settings {
        retry: &tool.retry,
        budget: &tool.budget,
        breaker: tool.breaker,
        throttle: tool.throttle,
        concurrency: tool.concurrency,
        queue: tool.queue,
        per_try: tool.per_try_timeout,
    };
    Parts::of::<InvalidTool>(&tool.name, &settings, &config.server)
}

/// The client of `tool` over `parts`, sending `headers` on every attempt through `transport` (`mcp`: an upstream
/// MCP server's tool, over its `McpTransport`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn build_with<T>(
    config: &Config,
    tool: &ToolConfig,
    parts: Parts,
    headers: Vec<(HeaderName, HeaderValue)>,
    transport: T,
    runs: Arc<Runs>,
    fallback: Option<Fallback>,
    mcp: bool,
) -> ToolClient
where
    T: Transport,
{
    let server = &config.server;
    let target = http::Method::from_bytes(tool.upstream.method.as_str().as_bytes())
        .ok()
        .zip(http::Uri::try_from(tool.upstream.url.as_str()).ok());
    ToolClient::from_inner(Inner {
        tool: tool.clone(),
        name: Arc::from(tool.name.as_str()),
        core: Core::new(server, runs),
        upstream: Upstream::new(parts, transport),
        target,
        headers,
        fallback,
        mcp,
    })
}

/// The headers `tool`'s upstream gets on every attempt, in order, each value resolved (from `env` for those that
/// name a variable: marked sensitive).
pub(crate) fn upstream_headers(
    tool: &ToolConfig,
    env: &dyn Env,
) -> Result<Vec<(HeaderName, HeaderValue)>, InvalidTool> {
    let invalid = |header: &str| InvalidTool::InvalidHeader {
        tool: tool.name.clone(),
        header: header.to_owned(),
    };
    (tool.upstream.headers.iter())
        .map(|header| {
            let name = HeaderName::from_bytes(header.name.as_bytes()).map_err(|_| invalid(&header.name))?;
            let value = header.value(env).map_err(|problem| match &header.value {
                HeaderValueSource::Env { env, .. } => InvalidTool::MissingSecret {
                    tool: tool.name.clone(),
                    header: header.name.clone(),
                    env: env.clone(),
                    problem,
                },
                HeaderValueSource::Literal(_) => invalid(&header.name),
            })?;
            Ok((name, value))
        })
        .collect()
}
