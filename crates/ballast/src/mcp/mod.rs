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

mod transport;
mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ballast_config::{Config, Env, McpServerConfig, ToolConfig};
use ballast_core::{AdaptiveThrottle, CircuitBreaker, Instant, RetryBudget};
use bytes::Bytes;
use http::{Request, Response};
use serde_json::{Value, json};
use tower::util::BoxCloneSyncService;

use crate::client::Parts;
use crate::tool::ToolClient;
use crate::tool::registry::{self, InvalidTool};
use crate::transport::{Answer as _, Transport};
use crate::{Body, Error, Runs, clock};

pub use transport::META_IDEMPOTENCY_KEY;

/// How long a server's listing is used before it is asked again.
pub const LIST_FRESH: Duration = Duration::from_secs(30);
/// How long a failed listing is not retried (the last good one, if any, is served meanwhile): a crowd listing a
/// dead server asks it once.
pub const LIST_RETRY: Duration = Duration::from_secs(2);
/// The longest a listing waits for a server.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// Where an upstream MCP tool's progress notifications go while its call runs ([`ToolCall::on_progress`]): each
/// notification's params (`progress`, `total`, `message`), its `progressToken` left out.
///
/// [`ToolCall::on_progress`]: crate::tool::ToolCall::on_progress
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(Value) + Send + Sync>);

impl Progress {
    /// Progress handed to `report`, in the order the server sent it, while the call's attempt reads its answer.
    pub fn new(report: impl Fn(Value) + Send + Sync + 'static) -> Self {
        Progress(Arc::new(report))
    }

    pub(crate) fn report(&self, params: Value) {
        (self.0)(params);
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

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
            return stale_or(&listing, why);
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
                stale_or(&listing, why)
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

    /// `tools/list`, every page, within [`LIST_TIMEOUT`] and the breaker's say.
    async fn list(&self) -> Result<Vec<ListedTool>, Error> {
        let inner = &self.inner;
        if let Some(open) = inner.parts.breaker.open_remaining(clock::now()) {
            return Err(Error::CircuitOpen { retry_in: Some(open) });
        }
        let listed = tokio::time::timeout(LIST_TIMEOUT, self.list_pages()).await;
        let listed = listed.unwrap_or(Err(Error::Timeout {
            after: LIST_TIMEOUT,
            by_deadline: false,
        }));
        Ok(listed?
            .into_iter()
            .filter_map(|definition| self.served(definition))
            .collect())
    }

    async fn list_pages(&self) -> Result<Vec<Value>, Error> {
        let session = &self.inner.session;
        let agreed = match session.agreed(&self.inner.transport).await? {
            Ok(agreed) => agreed,
            Err(answer) => return Err(refused(session, &answer)),
        };
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        // A server that pages for ever is cut off: 100 pages is more tools than any model can be given.
        for _ in 0..100 {
            let id = wire::next_id();
            let mut params = json!({"_meta": wire::request_meta(&agreed.version, serde_json::Map::new())});
            if let Some(cursor) = cursor.take() {
                params["cursor"] = cursor;
            }
            let request = session.post(
                wire::request(id, "tools/list", params),
                Some(&agreed),
                "tools/list",
            );
            let answer = transport::send(&self.inner.transport, request).await?;
            if !answer.status().is_success() {
                return Err(refused(session, &answer));
            }
            let bytes = answer.body().as_bytes().cloned().unwrap_or_default();
            let ct = answer.headers().get(http::header::CONTENT_TYPE);
            let result = match wire::reply(ct, &bytes, id) {
                Ok(wire::Reply::Result(result)) => result,
                Ok(wire::Reply::Error(error)) => {
                    return Err(Error::transport(
                        true,
                        format!("MCP server {} refused tools/list: {error}", session.name),
                    ));
                }
                Err(wire::Garbled(why)) => {
                    return Err(Error::transport(
                        true,
                        format!(
                            "MCP server {} answered tools/list with garbage: {why}",
                            session.name
                        ),
                    ));
                }
            };
            if let Some(page) = result.get("tools").and_then(Value::as_array) {
                tools.extend(page.iter().cloned());
            }
            match result.get("nextCursor") {
                Some(next) if !next.is_null() => cursor = Some(next.clone()),
                _ => return Ok(tools),
            }
        }
        Ok(tools)
    }

    /// A listed tool as served, or `None` (hidden, nameless, a name no served name may be).
    fn served(&self, mut definition: Value) -> Option<ListedTool> {
        let server = &self.inner.server;
        let upstream_name = definition.get("name")?.as_str()?.to_owned();
        let overrides = server.override_of(&upstream_name);
        if overrides.is_some_and(|o| o.hidden) {
            return None;
        }
        let read_only = (definition.pointer("/annotations/readOnlyHint")).and_then(Value::as_bool);
        let config = server.tool_config(&upstream_name, read_only);
        let object = definition.as_object_mut()?;
        object.insert("name".to_owned(), Value::from(config.name.as_str()));
        if let Some(description) = &config.description {
            object.insert("description".to_owned(), Value::from(description.as_str()));
        }
        if !object.get("inputSchema").is_some_and(Value::is_object) {
            object.insert("inputSchema".to_owned(), json!({"type": "object"}));
        }
        Some(ListedTool {
            name: config.name.clone(),
            upstream_name,
            definition,
            config,
        })
    }
}

/// The last good listing, or why there is none.
fn stale_or(listing: &Listing, why: String) -> Result<Vec<ListedTool>, Error> {
    if listing.read_at.is_some() {
        Ok(listing.tools.clone())
    } else {
        Err(Error::transport(true, why))
    }
}

/// An HTTP answer that is no MCP answer, as an error.
fn refused(session: &transport::Session, answer: &Response<Body>) -> Error {
    Error::transport(
        true,
        format!("MCP server {} answered HTTP {}", session.name, answer.status()),
    )
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
