//! [`ToolClient::builder`]: a tool in code, without TOML, checked at `build()` by the configuration's own rules
//! (`crate::settings`): a client built here is one a `[[tools]]` entry could have described.

use std::sync::Arc;

use ballast_config::{
    Config, HeaderValueSource, HttpMethod, ServerConfig, ToolConfig, ToolFallback, Upstream, UpstreamHeader,
};
use ballast_core::UpstreamIdempotency;
use serde_json::Value;

use super::ToolClient;
use super::client::Fallback;
use super::registry::{InvalidTool, build};
use crate::Runs;
use crate::settings::validated;
use crate::transport::Transport;

/// A [`ToolClient`] in the making: the settings of a `[[tools]]` entry and of `[server]`, each at the default a
/// config file gives an omitted key, checked by the configuration's rules at [`build`](ToolClientBuilder::build).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use ballast::{tool::{ToolCall, ToolClient}, config::{HttpMethod, RetryConfig}, transport::ServiceTransport};
/// use serde_json::json;
///
/// let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
/// let lookup = ToolClient::builder("lookup_order", HttpMethod::Post, "http://chaos/tools/lookup_order")
///     .per_try_timeout(Duration::from_secs(1))
///     .retry(RetryConfig { max_attempts: 2, ..RetryConfig::default() })
///     .build(transport.clone())
///     .unwrap();
/// let answer = lookup.call(ToolCall::new(json!({"order_id": "1234", "op": "op-1"}))).await.unwrap();
/// assert_eq!(answer.body()["order_id"], "1234");
///
/// // A setting the rules refuse fails here, naming the field.
/// let error = ToolClient::builder("lookup_order", HttpMethod::Post, "http://chaos/tools/lookup_order")
///     .concurrency(0)
///     .build(transport)
///     .unwrap_err();
/// assert_eq!(error.to_string(), r#"tool "lookup_order": concurrency: 0 must be at least 1"#);
/// # }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until it is built"]
pub struct ToolClientBuilder {
    tool: ToolConfig,
    fallback: Option<Fallback>,
    server: ServerConfig,
    runs: Option<Arc<Runs>>,
}

impl ToolClient {
    /// A builder of the tool `name` calling `method url`, every other setting at its default (a `[[tools]]`
    /// entry that writes only `name` and `upstream`).
    pub fn builder(name: impl Into<String>, method: HttpMethod, url: impl Into<String>) -> ToolClientBuilder {
        ToolClientBuilder {
            tool: ToolConfig::new(name, Upstream::new(method, url)),
            fallback: None,
            server: ServerConfig::default(),
            runs: None,
        }
    }
}

impl ToolClientBuilder {
    crate::settings::builder_setters!(tool);

    /// A header the upstream gets on every attempt, `value` as given (`x-api-version`, `2024-01`); in order, after
    /// those added before. Checked at `build()` by the rules of `upstream.headers` (docs/config.md): a header name
    /// (sent lower case, once), none Ballast sets itself (`content-type`, `idempotency-key`, `ballast-*`...), a
    /// value of visible ASCII, and no credential's header (`authorization`, `x-api-key`...), whose value belongs
    /// in the environment (`upstream.headers` in a config, read by [`ClientsBuilder::env`]).
    ///
    /// [`ClientsBuilder::env`]: crate::ClientsBuilder::env
    pub fn upstream_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.tool.upstream.headers.push(UpstreamHeader {
            name: name.into(),
            value: HeaderValueSource::Literal(value.into()),
        });
        self
    }

    /// Whether a call changes something (default false); then each logical call carries one idempotency key.
    pub fn side_effects(mut self, side_effects: bool) -> Self {
        self.tool.side_effects = side_effects;
        self
    }

    /// What the upstream does with an `Idempotency-Key` (default `none`; a deduplicating upstream only for a
    /// side-effecting tool).
    pub fn upstream_idempotency(mut self, upstream_idempotency: UpstreamIdempotency) -> Self {
        self.tool.upstream_idempotency = upstream_idempotency;
        self
    }

    /// When the upstream is failing, call `tool` instead (for a side-effecting tool only when no attempt may
    /// have reached the upstream). Replaces a fallback response.
    pub fn fallback_tool(mut self, tool: ToolClient) -> Self {
        self.fallback = Some(Fallback::Tool(tool));
        self
    }

    /// When the upstream is failing, answer `body` (200) without calling anything; refused for a side-effecting
    /// tool. Replaces a fallback tool.
    pub fn fallback_response(mut self, body: Value) -> Self {
        self.fallback = Some(Fallback::Response(body));
        self
    }

    /// The client, sending through `transport`, or every setting the configuration's rules refuse
    /// ([`InvalidTool::Settings`], each with its field).
    pub fn build<T>(self, transport: T) -> Result<ToolClient, InvalidTool>
    where
        T: Transport,
    {
        let ToolClientBuilder {
            mut tool,
            fallback,
            server,
            runs,
        } = self;
        let name = tool.name.clone();
        tool.fallback = fallback.as_ref().map(|fallback| match fallback {
            Fallback::Tool(client) => ToolFallback::Tool(client.name().to_owned()),
            Fallback::Response(body) => ToolFallback::Response(body.clone()),
        });
        // The fallback tools follow, so validation sees the tools named (each was checked when it was built).
        let mut tools = vec![tool];
        let mut next = fallback.as_ref();
        while let Some(Fallback::Tool(client)) = next {
            tools.push(client.config().clone());
            next = client.inner.fallback.as_ref();
        }
        let config = Config {
            server,
            tools,
            ..Config::default()
        };
        let config =
            validated(&config, "tools[0]").map_err(|errors| InvalidTool::Settings { tool: name, errors })?;
        let runs = runs.unwrap_or_else(|| Arc::new(Runs::of(&config.run)));
        // Only literal headers come from a builder: nothing is read from the environment.
        let no_env = |_: &str| None;
        build(&config, &config.tools[0], transport, runs, fallback, &no_env)
    }
}
