//! Every client of a configuration, built the one way: [`Clients::from_config`], with the environment, the
//! registry of runs and the response-state records as optional builder steps, then [`build`](ClientsBuilder::build)
//! over one transport.
//!
//! Why one builder for tools and models: an agent's request is one run across both. Built apart, each side would
//! keep its own registry of runs, and a run would get three retries for its model calls and three more for its
//! tools; built here, both share one [`Runs`] unless told otherwise.

use std::sync::Arc;

use ballast_config::{Config, Env, ProcessEnv};

use crate::model::{InvalidModelRoute, MemoryStateRecords, StateRecords};
use crate::tool::InvalidTool;
use crate::transport::Transport;
use crate::{ModelClients, Runs, ToolClients};

/// The clients of every tool and model route of a configuration, on one transport and one registry of runs: a
/// run's deadline and retry allowance hold across its model and tool calls alike.
///
/// ```
/// use ballast::{Clients, transport::ServiceTransport};
/// use ballast_config::Config;
///
/// let config = Config::from_toml_str(r#"
///     version = 1
///     [[tools]]
///     name = "lookup_order"
///     upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
///     [[models]]
///     name = "agent"
///     deployments = [ { base_url = "http://chaos/v1", model = "mock" } ]
/// "#).unwrap();
/// // In process, against the chaos upstream; in production, `HttpTransport`.
/// let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
/// let clients = Clients::from_config(&config).build(transport).unwrap();
/// assert!(clients.tools.get("lookup_order").is_some());
/// assert!(clients.models.route("agent").is_ok());
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Clients {
    /// A client per configured tool.
    pub tools: ToolClients,
    /// A client per configured model route.
    pub models: ModelClients,
    /// A client per configured upstream MCP server (its tools' clients made as they are listed).
    pub mcp: crate::mcp::McpServers,
    /// The registry of runs both share.
    pub runs: Arc<Runs>,
}

impl Clients {
    /// The clients of `config`, once [`build`](ClientsBuilder::build) is given a transport. By default the
    /// secrets (deployments' API keys, tool upstreams' headers from the environment) are read from the process
    /// environment, once, at `build` — only the variables the config names, and a missing one is an error then,
    /// not at the first call; the runs are a new registry under `[run]`; response state is recorded in memory.
    pub fn from_config(config: &Config) -> ClientsBuilder<'_> {
        ClientsBuilder {
            config,
            env: &ProcessEnv,
            runs: None,
            records: None,
        }
    }
}

/// The settings of [`Clients::from_config`], each optional.
#[must_use = "a builder does nothing until `build`"]
pub struct ClientsBuilder<'a> {
    config: &'a Config,
    env: &'a dyn Env,
    runs: Option<Arc<Runs>>,
    records: Option<Arc<dyn StateRecords>>,
}

impl<'a> ClientsBuilder<'a> {
    /// Reads the secrets from `env` instead of the process environment: tests (a `HashMap`, a closure), or secrets
    /// kept somewhere else.
    pub fn env(mut self, env: &'a dyn Env) -> Self {
        self.env = env;
        self
    }

    /// Puts the calls' runs in `runs` (shared with clients built elsewhere) instead of a new registry.
    pub fn runs(mut self, runs: Arc<Runs>) -> Self {
        self.runs = Some(runs);
        self
    }

    /// Records which deployment keeps which response in `records` (the gateway's:
    /// [`StoreStateRecords`](crate::model::StoreStateRecords) over its store) instead of in memory.
    pub fn state_records(mut self, records: Arc<dyn StateRecords>) -> Self {
        self.records = Some(records);
        self
    }

    /// Builds every client, all sending through `transport` (`HttpTransport` in production, `ServiceTransport`
    /// over the chaos router in tests). A transport of your own that answers with whole bytes is read whole: a
    /// streamed call over it commits at once, without the commit point's checks.
    pub fn build<T: Transport>(self, transport: T) -> Result<Clients, InvalidClients> {
        let ClientsBuilder {
            config,
            env,
            runs,
            records,
        } = self;
        let runs = runs.unwrap_or_else(|| Arc::new(Runs::of(&config.run)));
        let records = records.unwrap_or_else(|| Arc::new(MemoryStateRecords::default()));
        let tools = ToolClients::assemble(config, env, transport.clone(), Arc::clone(&runs))?;
        let mcp = crate::mcp::McpServers::assemble(config, env, transport.clone(), Arc::clone(&runs))
            .map_err(InvalidClients::McpServer)?;
        let models = ModelClients::assemble(config, env, transport, Arc::clone(&runs), records)?;
        Ok(Clients {
            tools,
            models,
            mcp,
            runs,
        })
    }
}

/// Why [`ClientsBuilder::build`] refused a configuration's clients.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidClients {
    /// A tool's client (a header's variable missing from the environment, say).
    #[error(transparent)]
    Tool(#[from] InvalidTool),
    /// A model route's client (a deployment's API key missing from the environment, say).
    #[error(transparent)]
    Model(#[from] InvalidModelRoute),
    /// An upstream MCP server's client (a header's variable missing from the environment, say), named by the
    /// server's name where the message says `tools`.
    #[error("mcp_servers: {0}")]
    McpServer(InvalidTool),
}
