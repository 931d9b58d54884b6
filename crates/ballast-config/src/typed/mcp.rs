//! Typed `[[mcp_servers]]`: an upstream MCP server whose tools the gateway serves, and each served tool's
//! configuration as a [`ToolConfig`] (the same pipeline as every other tool).

use std::time::Duration;

use ballast_core::{Priority, UpstreamIdempotency};

use super::{HttpMethod, ToolConfig, Upstream, UpstreamHeader};

/// An upstream MCP server.
#[derive(Clone, Debug, PartialEq)]
pub struct McpServerConfig {
    /// The server's name (unique among `mcp_servers`; 1-64 of `A-Z a-z 0-9 _ -`): in `/status`, metrics and
    /// errors.
    pub name: String,
    /// Its Streamable HTTP endpoint (`http` or `https`).
    pub url: String,
    /// Headers sent on every request (its credentials, from the environment).
    pub headers: Vec<UpstreamHeader>,
    /// Put before each of its tools' names when served (default empty).
    pub prefix: String,
    /// Whether its tools' `readOnlyHint` is believed (default false). `idempotentHint` never is.
    pub trust_annotations: bool,
    /// The settings of every tool of the server (`side_effects` their default, true unless set; the breaker,
    /// throttle and budget shared by them; `concurrency` and `queue` each tool's own). Its `name` is the
    /// server's, its upstream the server's URL and headers.
    pub tool: ToolConfig,
    /// Per-tool overrides, by the server's own tool name, sorted by name.
    pub overrides: Vec<McpToolOverride>,
}

/// One upstream MCP tool's overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpToolOverride {
    /// The tool's name at the server.
    pub name: String,
    /// Whether it changes something (else the server's `side_effects` or trusted annotation).
    pub side_effects: Option<bool>,
    /// Its admission class (else the server's).
    pub priority: Option<Priority>,
    /// Its longest attempt (else the server's).
    pub per_try_timeout: Option<Duration>,
    /// What it does, for the model (else the server's description).
    pub description: Option<String>,
    /// Not served.
    pub hidden: bool,
}

impl McpServerConfig {
    /// The server `name` at `url`, every other setting at its default.
    ///
    /// ```
    /// use ballast_config::McpServerConfig;
    ///
    /// let server = McpServerConfig::new("shop", "http://127.0.0.1:9100/mcp");
    /// assert!(server.tool.side_effects && !server.trust_annotations && server.prefix.is_empty());
    /// ```
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        let name = name.into();
        let url = url.into();
        let mut tool = ToolConfig::new(name.clone(), Upstream::new(HttpMethod::Post, url.clone()));
        tool.side_effects = true;
        McpServerConfig {
            name,
            url,
            headers: Vec::new(),
            prefix: String::new(),
            trust_annotations: false,
            tool,
            overrides: Vec::new(),
        }
    }

    /// The override of the server's tool `name`, if any.
    pub fn override_of(&self, name: &str) -> Option<&McpToolOverride> {
        self.overrides.iter().find(|o| o.name == name)
    }

    /// The name a tool of the server is served as: the prefix, then its name.
    pub fn served_name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The configuration the server's tool `name` is called with: the server's settings, then the tool's
    /// override. `read_only_hint` is the tool's `readOnlyHint` as the server announced it: believed only when the
    /// server is trusted and no override says otherwise.
    ///
    /// ```
    /// use ballast_config::McpServerConfig;
    ///
    /// let mut server = McpServerConfig::new("shop", "http://127.0.0.1:9100/mcp");
    /// server.prefix = "shop_".into();
    /// assert!(server.tool_config("lookup", Some(true)).side_effects, "an untrusted hint is ignored");
    /// server.trust_annotations = true;
    /// let tool = server.tool_config("lookup", Some(true));
    /// assert_eq!((tool.name.as_str(), tool.side_effects), ("shop_lookup", false));
    /// ```
    pub fn tool_config(&self, name: &str, read_only_hint: Option<bool>) -> ToolConfig {
        let mut tool = self.tool.clone();
        tool.name = self.served_name(name);
        tool.upstream.headers.clone_from(&self.headers);
        tool.description = None;
        tool.input_schema = None;
        if self.trust_annotations && read_only_hint == Some(true) {
            tool.side_effects = false;
        }
        if let Some(o) = self.override_of(name) {
            if let Some(side_effects) = o.side_effects {
                tool.side_effects = side_effects;
            }
            if let Some(priority) = o.priority {
                tool.priority = priority;
            }
            if let Some(per_try) = o.per_try_timeout {
                tool.per_try_timeout = per_try;
            }
            tool.description.clone_from(&o.description);
        }
        if !tool.side_effects {
            tool.upstream_idempotency = UpstreamIdempotency::None;
        }
        tool
    }
}
