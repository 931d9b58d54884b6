//! The `gateway` strategy: the HTTP agents of [`super::over_http`] through `ballast serve`, started by the bench
//! for each run (a fresh gateway per run, as the in-process strategy gets fresh clients) on 127.0.0.1:0 in front
//! of that run's chaos upstream, its SQLite store in a temporary directory.
//!
//! Its configuration is what a user writes for this upstream: the `ballast` strategy's, word for word (one place:
//! [`super::with_ballast`]; durations scaled alike at another time scale) but for the model deployment's `api`,
//! which names every API the upstream serves (Anthropic's Messages too, for `--api messages`), plus what only a
//! gateway has — a store and a principal whose key the agents send. The breakers' changes and the throttles'
//! refusals are read from the gateway's `/status`, as an operator reads them.
//!
//! With the tools over MCP ([`ToolApi::Mcp`], `--tools mcp`) the whole path is MCP: the agents call the gateway's
//! `/mcp` ([`super::over_mcp`]), and the gateway's tools are the upstream's MCP server's, one `[[mcp_servers]]`
//! entry in place of the `[[tools]]` ([`with_ballast::config_over_mcp`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::over_http::{HttpAgents, ModelApi, Route, strategy_name};
use super::scenario::Conversation;
use super::strategy::{Agents, BreakerChange, Outcome, Strategy, ToolApi};
use super::with_ballast;
use crate::child::ChildProcess;

/// The principal's key the agents send.
const KEY: &str = "bench-agents-key-0123456789";
/// The environment variable the gateway reads it from.
const KEY_ENV: &str = "BALLAST_BENCH_KEY";
/// The APIs the model deployment speaks: every one the chaos upstream serves, so that agents on any `--api`
/// reach it (Messages is never a default: a deployment speaks it only when it says so).
const APIS: &str = r#"["responses", "chat", "embeddings", "messages"]"#;
/// How often `/status` is read during a run: often enough to time a breaker's changes, seldom enough that the
/// gateway's work stays the agents' (each look is a request, and probes the store).
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// The `gateway` strategy (see the module docs).
#[derive(Clone, Debug)]
pub struct ThroughGateway {
    binary: PathBuf,
    api: ModelApi,
    tools: ToolApi,
    name: String,
}

impl ThroughGateway {
    /// Agents through `ballast serve`, started from `binary` (the `ballast` binary), their model calls on `api`,
    /// their tools over HTTP. Named `gateway`, or `gateway (messages)` when every agent calls one API.
    pub fn new(binary: PathBuf, api: ModelApi) -> ThroughGateway {
        ThroughGateway {
            binary,
            api,
            tools: ToolApi::Http,
            name: strategy_name("gateway", api, ToolApi::Http),
        }
    }

    /// The same agents calling their tools over `tools`: with [`ToolApi::Mcp`], at the gateway's `/mcp`, in front
    /// of the upstream's MCP server. Named `gateway (mcp)` (`gateway (messages, mcp)`, ...).
    pub fn tools(self, tools: ToolApi) -> ThroughGateway {
        ThroughGateway {
            tools,
            name: strategy_name("gateway", self.api, tools),
            ..self
        }
    }
}

/// The gateway's configuration in front of the upstream at `base_url`, its tools over `tools`, its store in `dir`
/// (see the module docs).
pub fn gateway_config(base_url: &str, time_scale: f64, dir: &str, tools: ToolApi) -> String {
    let routes = match tools {
        ToolApi::Http => with_ballast::config_speaking(base_url, time_scale, Some(APIS)),
        ToolApi::Mcp => with_ballast::config_over_mcp(base_url, time_scale, Some(APIS)),
    };
    format!(
        "{routes}\n[store]\nurl = \"sqlite://{dir}/ballast.db\"\n\n[[principals]]\nname = \"agents\"\nkey_env = \"{KEY_ENV}\"\n"
    )
}

impl Strategy for ThroughGateway {
    fn name(&self) -> &str {
        &self.name
    }

    fn agents<'a>(
        &'a self,
        base_url: &'a str,
        time_scale: f64,
    ) -> BoxFuture<'a, Result<Box<dyn Agents>, String>> {
        Box::pin(async move {
            let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
            let dir_path = dir.path().display().to_string();
            let config = gateway_config(base_url, time_scale, &dir_path, self.tools);
            let path = dir.path().join("ballast.toml");
            std::fs::write(&path, config).map_err(|e| format!("cannot write the gateway's config: {e}"))?;
            let path = path.display().to_string();
            let gateway = ChildProcess::start(
                &self.binary,
                &["serve", "--config", &path, "--listen", "127.0.0.1:0"],
                &[(KEY_ENV, KEY)],
                dir.path(),
                "serve",
            )
            .await?;
            let base = format!("http://{}", gateway.addr());
            let route = Route::Ballast { base: base.clone() };
            let agents =
                HttpAgents::new(route, Some(KEY.to_owned()), self.api, time_scale)?.with_tools(self.tools)?;
            let status = Arc::new(StatusWatch::new(format!("{base}/status"))?);
            let looking = tokio::spawn(Arc::clone(&status).look_every(LOOK_EVERY));
            Ok(Box::new(GatewayAgents {
                agents,
                status,
                looking,
                _gateway: gateway,
                _dir: dir,
            }) as Box<dyn Agents>)
        })
    }
}

/// One run's agents and the gateway they call (killed when the run is over).
struct GatewayAgents {
    agents: HttpAgents,
    status: Arc<StatusWatch>,
    looking: JoinHandle<()>,
    // Dropped after the agents: the gateway is killed and waited for, then its directory removed.
    _gateway: ChildProcess,
    _dir: tempfile::TempDir,
}

impl Drop for GatewayAgents {
    fn drop(&mut self) {
        self.looking.abort();
    }
}

impl Agents for GatewayAgents {
    fn converse<'a>(&'a self, conversation: &'a Conversation) -> BoxFuture<'a, Outcome> {
        self.agents.converse(conversation)
    }

    fn breaker_changes(&self) -> Vec<BreakerChange> {
        std::mem::take(&mut *lock(&self.status.changes))
    }

    fn throttled(&self) -> Option<u64> {
        Some(*lock(&self.status.refused))
    }

    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self.status.look().await;
        })
    }
}

/// What the gateway's `/status` has said: breakers' changes not yet reported, and attempts its throttles refused.
struct StatusWatch {
    client: reqwest::Client,
    url: String,
    /// Transitions seen so far, per breaker.
    seen: Mutex<HashMap<String, u64>>,
    changes: Mutex<Vec<BreakerChange>>,
    refused: Mutex<u64>,
}

impl StatusWatch {
    fn new(url: String) -> Result<StatusWatch, String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|error| format!("an HTTP client: {error}"))?;
        Ok(StatusWatch {
            client,
            url,
            seen: Mutex::default(),
            changes: Mutex::default(),
            refused: Mutex::default(),
        })
    }

    async fn look_every(self: Arc<StatusWatch>, every: Duration) {
        let mut looks = tokio::time::interval(every);
        looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            looks.tick().await;
            // A look that fails is missed; the next one sees what it would have.
            let _ = self.look().await;
        }
    }

    /// Reads `/status` once.
    async fn look(&self) -> Result<(), reqwest::Error> {
        let status: Value = self
            .client
            .get(&self.url)
            .bearer_auth(KEY)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let mut upstreams: Vec<(String, &Value)> = Vec::new();
        if let Some(models) = status["models"].as_object() {
            for (route, model) in models {
                let deployments = model["deployments"].as_array().into_iter().flatten();
                for (index, deployment) in deployments.enumerate() {
                    upstreams.push((format!("{route}[{index}]"), deployment));
                }
            }
        }
        if let Some(tools) = status["tools"].as_object() {
            upstreams.extend(tools.iter().map(|(name, tool)| (name.clone(), tool)));
        }
        if let Some(servers) = status["mcp_servers"].as_object() {
            upstreams.extend(
                servers
                    .iter()
                    .map(|(name, server)| (format!("mcp:{name}"), server)),
            );
        }
        let refused = upstreams
            .iter()
            .filter_map(|(_, upstream)| upstream["throttle"]["refused_total"].as_u64())
            .sum();
        *lock(&self.refused) = refused;
        let mut seen = lock(&self.seen);
        for (name, upstream) in upstreams {
            let breaker = &upstream["breaker"];
            let transitions = breaker["transitions"].as_u64().unwrap_or_default();
            let before = seen.insert(name.clone(), transitions).unwrap_or_default();
            let last = &breaker["last_transition"];
            if transitions <= before || !last.is_object() {
                continue;
            }
            let mut reason = last["reason"].as_str().unwrap_or_default().to_owned();
            let unseen = transitions - before - 1;
            if unseen > 0 {
                reason.push_str(&format!(" ({unseen} earlier changes between two looks)"));
            }
            let state = |key: &str| last[key].as_str().unwrap_or_default().to_owned();
            lock(&self.changes).push(BreakerChange {
                breaker: name,
                change: format!("{} -> {}", state("from"), state("to")),
                reason,
                at: Duration::ZERO,
            });
        }
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use ballast_config::Api;

    use super::*;

    #[test]
    fn the_gateways_config_is_the_ballast_strategys_with_a_store_and_a_principal() {
        for scale in [1.0, 0.02] {
            let toml = gateway_config("http://127.0.0.1:1", scale, "/tmp/x", ToolApi::Http);
            // The ballast strategy's, but for the model deployment's APIs.
            let without_apis = toml.replace(&format!(", api = {APIS}"), "");
            assert!(without_apis.starts_with(&with_ballast::config("http://127.0.0.1:1", scale)));
            let config =
                ballast_config::Config::from_toml_str(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
            assert_eq!((config.tools.len(), config.models.len()), (3, 1));
            assert_eq!(config.principals.len(), 1);
            let apis = config.models[0].deployments[0].apis;
            assert!(
                apis.contains(Api::Messages) && apis.contains(Api::Chat) && apis.contains(Api::Responses)
            );
        }
    }

    #[test]
    fn over_mcp_the_gateways_config_has_the_upstreams_mcp_server_in_place_of_its_tools() {
        let toml = gateway_config("http://127.0.0.1:1", 0.02, "/tmp/x", ToolApi::Mcp);
        let config = ballast_config::Config::from_toml_str(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
        assert_eq!((config.tools.len(), config.mcp_servers.len()), (0, 1));
        assert_eq!(config.principals.len(), 1);
    }

    #[test]
    fn docs_bench_md_shows_the_config_as_it_is() {
        let docs = include_str!("../../../../docs/bench.md");
        for tools in [ToolApi::Http, ToolApi::Mcp] {
            let config = gateway_config("http://127.0.0.1:9000", 1.0, "DIR", tools);
            // Over MCP the model route is the same: the docs show what differs, from the MCP server on.
            let shown = match tools {
                ToolApi::Http => config.trim_end(),
                ToolApi::Mcp => config[config.find("[[mcp_servers]]").expect("an MCP server")..].trim_end(),
            };
            assert!(
                docs.contains(shown),
                "docs/bench.md, \"The gateway's configuration\", should show:\n{shown}"
            );
        }
    }
}
