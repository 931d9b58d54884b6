//! Upstream MCP servers: their tools called through the same pipeline as every tool (DESIGN.md, "MCP").
//!
//! An [`McpServerClient`] is one `[[mcp_servers]]` entry: its session ([`transport::Session`]), its tools as the
//! server lists them (`tools/list`, kept for [`LIST_FRESH`] and served stale when a listing fails), and a
//! [`ToolClient`] per tool, made the first time the tool is called. The tools share the server's retry budget,
//! breaker and throttle (one upstream); each has its own admission. A tool's client is an ordinary
//! [`ToolClient`] whose transport is [`transport::McpTransport`]: the deadline, the per-try timeout, retries
//! only when safe, the operation's key and the outcome report are the pipeline's, unchanged.
//!
//! ```text
//! ToolClient (deadline -> admission -> retry -> throttle, breaker -> attempt) -> McpTransport -> transport
//! ```

mod listing;
mod transport;
mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ballast_config::{Config, Env, McpServerConfig, ToolConfig};
use ballast_core::{AdaptiveThrottle, CircuitBreaker, Instant, RetryBudget};
use bytes::Bytes;
use http::{Request, Response};
use serde_json::Value;
use tower::util::BoxCloneSyncService;

use crate::client::Parts;
use crate::tool::ToolClient;
use crate::tool::registry::{self, InvalidTool};
use crate::transport::{Answer as _, Transport};
use crate::{Body, Error, Runs, clock};

pub use crate::tool::Progress;
pub use transport::META_IDEMPOTENCY_KEY;

/// How long a server's listing is used before it is asked again.
pub const LIST_FRESH: Duration = Duration::from_secs(30);
/// How long a failed listing is not retried (the last good one, if any, is served meanwhile): a crowd listing a
/// dead server asks it once.
pub const LIST_RETRY: Duration = Duration::from_secs(2);
/// The longest a listing waits for a server.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// The transport every server's requests go through, type-erased once.
type Shared = BoxCloneSyncService<Request<Bytes>, Response<Body>, Error>;

/// One tool of an upstream MCP server, as served.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedTool {
    /// The name it is served as (the server's prefix, then its own).
    pub name: String,
    /// Its name at the server.
    pub upstream_name: String,
    /// The tool as the server listed it (`description`, `inputSchema`, `annotations`, `title`,
    /// `outputSchema`...), its name replaced by the served one and its description by the config's override.
    pub definition: Value,
    /// The configuration it is called with (side effects as the config and the trusted annotations decide).
    pub config: ToolConfig,
}

/// What is known of a server's tools at one moment ([`McpServerClient::snapshot`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct McpServerSnapshot {
    /// The served names of the tools it listed last.
    pub tools: Vec<String>,
    /// How long ago that listing was read (`None`: never).
    pub listed_ago: Option<Duration>,
    /// Why the last listing failed, when it did (the last good one is served meanwhile).
    pub failed: Option<String>,
    /// The clients of the tools called so far, by name.
    pub clients: Vec<ToolClient>,
}

/// What is known of a server's tools.
#[derive(Debug, Default)]
struct Listing {
    tools: Vec<ListedTool>,
    /// When the last good listing was read.
    read_at: Option<Instant>,
    /// When the last listing failed, and why.
    failed: Option<(Instant, String)>,
    clients: HashMap<String, ToolClient>,
}

/// The client of one upstream MCP server. Cheap to clone.
#[derive(Clone)]
pub struct McpServerClient {
    inner: Arc<Inner>,
}

struct Inner {
    server: McpServerConfig,
    config: Config,
    session: Arc<transport::Session>,
    transport: Shared,
    /// The server's shared parts (budget, breaker, throttle); each tool's admission is its own.
    parts: Parts,
    runs: Arc<Runs>,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    listing: tokio::sync::Mutex<Listing>,
}

impl std::fmt::Debug for McpServerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerClient")
            .field("name", &self.inner.server.name)
            .field("url", &self.inner.server.url)
            .finish_non_exhaustive()
    }
}

impl McpServerClient {
    /// The client of `server` (of `config`), sending through `transport`, its headers read from `env` once.
    pub(crate) fn new<T: Transport>(
        config: &Config,
        server: &McpServerConfig,
        transport: T,
        runs: Arc<Runs>,
        env: &dyn Env,
    ) -> Result<Self, InvalidTool> {
        let parts = registry::parts(config, &server.tool)?;
        let headers = registry::upstream_headers(&server.tool, env)?;
        let uri = http::Uri::try_from(server.url.as_str()).map_err(|_| InvalidTool::InvalidHeader {
            tool: server.name.clone(),
            header: "url".to_owned(),
        })?;
        let session = transport::Session::new(&server.name, uri, headers.clone());
        let transport =
            BoxCloneSyncService::new(tower::ServiceExt::map_response(transport, |a| a.into_answer()));
        Ok(McpServerClient {
            inner: Arc::new(Inner {
                server: server.clone(),
                config: config.clone(),
                session: Arc::new(session),
                transport,
                parts,
                runs,
                headers,
                listing: tokio::sync::Mutex::new(Listing::default()),
            }),
        })
    }

    /// The server's configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.inner.server
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.inner.server.name
    }

    /// The server's circuit breaker, shared by its tools.
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.inner.parts.breaker
    }

    /// The server's adaptive throttle, shared by its tools (`None` when off).
    pub fn throttle(&self) -> Option<&Arc<AdaptiveThrottle>> {
        self.inner.parts.throttle.as_ref()
    }

    /// The server's retry budget, shared by its tools.
    pub fn budget(&self) -> &Arc<dyn RetryBudget> {
        &self.inner.parts.budget
    }

    /// The server's tools: the listing read in the last [`LIST_FRESH`], else read now (within [`LIST_TIMEOUT`],
    /// through the breaker: an open breaker answers with the last listing). When the server cannot be listed
    /// the last good listing is returned, or the error when there is none.
    pub async fn tools(&self) -> Result<Vec<ListedTool>, Error> {
        let mut listing = self.inner.listing.lock().await;
        let now = clock::now();
        let fresh = (listing.read_at).is_some_and(|at| now.saturating_duration_since(at) < LIST_FRESH);
        let failed_lately = (listing.failed.as_ref())
            .filter(|(at, _)| now.saturating_duration_since(*at) < LIST_RETRY)
            .map(|(_, why)| why.clone());
        if fresh {
            return Ok(listing.tools.clone());
        }
        if let Some(why) = failed_lately {
            return listing::stale_or(&listing, why);
        }
        match self.list().await {
            Ok(tools) => {
                listing.tools = tools;
                listing.read_at = Some(clock::now());
                listing.failed = None;
                // A tool whose configuration changed (an annotation) gets a new client.
                let Listing { tools, clients, .. } = &mut *listing;
                clients.retain(|name, client| {
                    tools
                        .iter()
                        .any(|t| &t.name == name && &t.config == client.config())
                });
                Ok(listing.tools.clone())
            }
            Err(error) => {
                let why = error.to_string();
                tracing::warn!(server = %self.name(), error = %why, "listing an MCP server's tools failed");
                listing.failed = Some((clock::now(), why.clone()));
                listing::stale_or(&listing, why)
            }
        }
    }

    /// What is known of the server's tools now, without asking it: for `/status`.
    pub async fn snapshot(&self) -> McpServerSnapshot {
        let listing = self.inner.listing.lock().await;
        let mut clients: Vec<ToolClient> = listing.clients.values().cloned().collect();
        clients.sort_by(|a, b| a.name().cmp(b.name()));
        McpServerSnapshot {
            tools: listing.tools.iter().map(|t| t.name.clone()).collect(),
            listed_ago: (listing.read_at).map(|at| clock::now().saturating_duration_since(at)),
            failed: listing.failed.as_ref().map(|(_, why)| why.clone()),
            clients,
        }
    }

    /// The client of the tool served as `name`, from the listing read last (`None`: not listed, or hidden).
    pub async fn tool(&self, name: &str) -> Option<ToolClient> {
        let mut listing = self.inner.listing.lock().await;
        let listed = listing.tools.iter().find(|t| t.name == name)?.clone();
        if let Some(client) = listing.clients.get(name) {
            return Some(client.clone());
        }
        let client = self.client_of(&listed).ok()?;
        listing.clients.insert(name.to_owned(), client.clone());
        Some(client)
    }

    /// A client for `listed`, over the server's shared parts.
    fn client_of(&self, listed: &ListedTool) -> Result<ToolClient, InvalidTool> {
        let inner = &self.inner;
        let tool = &listed.config;
        let parts = (inner.parts)
            .member(tool.concurrency, tool.queue, tool.per_try_timeout)
            .map_err(|source| InvalidTool::Admission {
                tool: tool.name.clone(),
                source,
            })?;
        let transport = transport::McpTransport {
            inner: inner.transport.clone(),
            session: Arc::clone(&inner.session),
            tool: Arc::from(listed.upstream_name.as_str()),
        };
        let headers = inner.headers.clone();
        let runs = Arc::clone(&inner.runs);
        Ok(registry::build_with(
            &inner.config,
            tool,
            parts,
            headers,
            transport,
            runs,
            None,
            true,
        ))
    }
}

/// The clients of every `[[mcp_servers]]` entry of a configuration, in file order.
#[derive(Clone, Debug, Default)]
pub struct McpServers {
    servers: Vec<McpServerClient>,
}

impl McpServers {
    /// A client per configured server, all sending through `transport`.
    pub(crate) fn assemble<T: Transport>(
        config: &Config,
        env: &dyn Env,
        transport: T,
        runs: Arc<Runs>,
    ) -> Result<Self, InvalidTool> {
        let servers = (config.mcp_servers.iter())
            .map(|server| McpServerClient::new(config, server, transport.clone(), Arc::clone(&runs), env))
            .collect::<Result<_, _>>()?;
        Ok(McpServers { servers })
    }

    /// Every server, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &McpServerClient> {
        self.servers.iter()
    }

    /// The server named `name`.
    pub fn get(&self, name: &str) -> Option<&McpServerClient> {
        self.servers.iter().find(|s| s.name() == name)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}
