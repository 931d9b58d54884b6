//! `[[mcp_servers]]` (each server, its tools' overrides, unique names), and what `[[tools]]` adds for MCP: a
//! description and an object schema of the arguments.

use ballast_core::UpstreamIdempotency;

use super::check::{Checker, DurationRule, index, join};
use super::text::{IDENT_RULE, is_ident};
use crate::error::Problem;
use crate::raw::{RawMcpServer, RawMcpTool};
use crate::typed::{DeferredConfig, HttpMethod, McpServerConfig, McpToolOverride, ToolConfig, Upstream};

const MCP_CREDENTIALS: &str =
    "MCP servers take no credentials in their URL: put them in `headers`, from the environment";

/// Whether `prefix` may start a served tool's name: empty, or up to 32 of `A-Z a-z 0-9 _ -`.
fn is_prefix(prefix: &str) -> bool {
    prefix.is_empty() || (prefix.len() <= 32 && is_ident(prefix))
}

impl Checker {
    pub(crate) fn mcp_servers(
        &mut self,
        raw: &[RawMcpServer],
        deferred: &DeferredConfig,
    ) -> Vec<McpServerConfig> {
        let servers = raw
            .iter()
            .enumerate()
            .map(|(i, s)| self.mcp_server(&index("mcp_servers", i), s, deferred))
            .collect();
        self.unique_names("mcp_servers", raw.iter().map(|s| s.name.as_deref()));
        servers
    }

    fn mcp_server(&mut self, path: &str, raw: &RawMcpServer, deferred: &DeferredConfig) -> McpServerConfig {
        let name = self.name(&join(path, "name"), raw.name.as_ref(), is_ident, IDENT_RULE);
        let url = self.http_url(&join(path, "url"), raw.url.as_ref(), MCP_CREDENTIALS);
        let d = McpServerConfig::new(name.clone().unwrap_or_default(), url.clone().unwrap_or_default());
        let headers = self.upstream_headers(&join(path, "headers"), &raw.headers);
        let prefix = match &raw.prefix {
            Some(prefix) if !is_prefix(prefix) => {
                let rule = "use up to 32 of A-Z, a-z, 0-9, _ and -";
                self.report(
                    join(path, "prefix"),
                    Problem::InvalidName {
                        value: prefix.clone(),
                        rule,
                    },
                );
                String::new()
            }
            prefix => prefix.clone().unwrap_or_default(),
        };
        let t = &d.tool;
        let side_effects = raw.side_effects.unwrap_or(t.side_effects);
        let idempotency_path = join(path, "upstream_idempotency");
        let written = raw.upstream_idempotency.as_ref();
        let upstream_idempotency = self.word(&idempotency_path, written, t.upstream_idempotency);
        if !side_effects && upstream_idempotency.is_some_and(UpstreamIdempotency::deduplicates) {
            let value = written.cloned().unwrap_or_default();
            self.report(idempotency_path, Problem::NeedsSideEffects { value });
        }
        let priority = self.word(&join(path, "priority"), raw.priority.as_ref(), t.priority);
        let per_try = self.duration(
            &join(path, "per_try_timeout"),
            raw.per_try_timeout.as_ref(),
            t.per_try_timeout,
            DurationRule::Positive,
        );
        let concurrency = self.int(&join(path, "concurrency"), raw.concurrency, t.concurrency, 1);
        let queue = self.int(&join(path, "queue"), raw.queue, t.queue, 0);
        let overrides = (raw.tools.iter())
            .map(|(tool, o)| self.mcp_tool(&join(&join(path, "tools"), tool), tool, o))
            .collect();
        let tool = ToolConfig {
            upstream: Upstream {
                headers: headers.clone(),
                ..Upstream::new(HttpMethod::Post, d.url.clone())
            },
            side_effects,
            upstream_idempotency: upstream_idempotency.unwrap_or(t.upstream_idempotency),
            priority: priority.unwrap_or(t.priority),
            per_try_timeout: per_try.unwrap_or(t.per_try_timeout),
            retry: self.retry(&join(path, "retry"), raw.retry.as_ref()),
            budget: self.budget(&join(path, "budget"), raw.budget.as_ref()),
            breaker: self.breaker(&join(path, "breaker"), raw.breaker.as_ref()),
            throttle: self.throttle(&join(path, "throttle"), raw.throttle.as_ref()),
            concurrency: concurrency.unwrap_or(t.concurrency),
            queue: queue.unwrap_or(t.queue),
            // An MCP server writes no `defer`: its tools get [deferred]'s settings, not accepted.
            defer: deferred.tool_default(),
            ..d.tool.clone()
        };
        McpServerConfig {
            headers,
            prefix,
            trust_annotations: raw.trust_annotations.unwrap_or(d.trust_annotations),
            tool,
            overrides,
            ..d
        }
    }

    fn mcp_tool(&mut self, path: &str, name: &str, raw: &RawMcpTool) -> McpToolOverride {
        let priority = (raw.priority.as_ref())
            .and_then(|p| self.word(&join(path, "priority"), Some(p), ballast_core::Priority::Critical));
        let per_try_timeout = (raw.per_try_timeout.as_ref()).and_then(|t| {
            self.duration(
                &join(path, "per_try_timeout"),
                Some(t),
                std::time::Duration::ZERO,
                DurationRule::Positive,
            )
        });
        McpToolOverride {
            name: name.to_owned(),
            side_effects: raw.side_effects,
            priority,
            per_try_timeout,
            description: self.description(&join(path, "description"), raw.description.as_ref()),
            hidden: raw.hidden.unwrap_or(false),
        }
    }

    /// A tool's description: not blank.
    pub(crate) fn description(&mut self, path: &str, raw: Option<&String>) -> Option<String> {
        let text = raw?;
        if text.trim().is_empty() {
            self.report(
                path,
                Problem::Range {
                    value: format!("{text:?}"),
                    must_be: "a sentence saying what the tool does".to_owned(),
                },
            );
            return None;
        }
        Some(text.clone())
    }

    /// A tool's `input_schema`: a table, as JSON, whose `type` (when written) is `"object"` — what MCP asks of a
    /// tool's arguments.
    pub(crate) fn object_schema(&mut self, path: &str, raw: &toml::Value) -> Option<serde_json::Value> {
        let schema = self.json(path, raw)?;
        let reason = match schema.as_object() {
            None => "write it as a table, such as { type = \"object\", properties = { ... } }",
            Some(object) => match object.get("type") {
                None => return Some(with_object_type(schema)),
                Some(serde_json::Value::String(t)) if t == "object" => return Some(schema),
                Some(_) => "its `type` must be \"object\": a tool's arguments are a JSON object",
            },
        };
        self.report(path, Problem::NotObjectSchema { reason });
        None
    }
}

/// `schema` with `"type": "object"` added, as MCP clients expect it written.
fn with_object_type(mut schema: serde_json::Value) -> serde_json::Value {
    if let Some(object) = schema.as_object_mut() {
        object.insert("type".to_owned(), serde_json::Value::from("object"));
    }
    schema
}
