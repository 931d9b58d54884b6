//! The `gateway` strategy: the HTTP agents of [`super::over_http`] through `ballast serve`, started by the bench
//! for each run (a fresh gateway per run, as the in-process strategy gets fresh clients) on 127.0.0.1:0 in front
//! of that run's chaos upstream, its SQLite store in a temporary directory — or, with [`Instances`] (`--instances
//! N --store URL`), N processes on one shared Redis or PostgreSQL, each request of the agents to one picked at
//! random ([`super::spread`]), and perhaps one killed mid-sale ([`super::instances`]).
//!
//! Its configuration is what a user writes for this upstream: the `ballast` strategy's, word for word (one place:
//! [`super::with_ballast`]; durations scaled alike at another time scale) but for the model deployment's `api`,
//! which names every API the upstream serves (Anthropic's Messages too, for `--api messages`), plus what only a
//! gateway has — a store and a principal whose key the agents send. The breakers' changes and the throttles'
//! refusals are read from the gateway's `/status`, as an operator reads them ([`super::status`]).
//!
//! With `--defer` ([`ThroughGateway::defer`]) the agents' side effects ask to wait when the gateway cannot serve
//! them now, and what it deferred is drained after the load, before the gateway stops ([`super::defer`]); the
//! configuration is the same (a caller's `Prefer: respond-async` is all the gateway needs).
//!
//! With the tools over MCP ([`ToolApi::Mcp`], `--tools mcp`) the whole path is MCP: the agents call the gateway's
//! `/mcp` ([`super::over_mcp`]), and the gateway's tools are the upstream's MCP server's, one `[[mcp_servers]]`
//! entry in place of the `[[tools]]` ([`with_ballast::config_over_mcp`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast_core::Instant;
use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use super::defer::{self, Deferrals};
use super::deferrals::DeferredRun;
use super::fleet::FleetReport;
use super::instances::{Fleet, Instances, KillPlan};
use super::over_http::{HttpAgents, Route};
use super::scenario::Conversation;
use super::spread::Spread;
use super::status::StatusWatch;
use super::strategy::{Agents, BreakerChange, ModelApi, Outcome, Strategy, ToolApi, differences, named};
use super::with_ballast;

/// The principal's key the agents send.
const KEY: &str = "bench-agents-key-0123456789";
/// The environment variable the gateway reads it from.
const KEY_ENV: &str = "BALLAST_BENCH_KEY";
/// The environment variable a shared store's URL is given in (`[store] url_env`: a URL may carry a password,
/// which the configuration refuses in `url`).
const STORE_ENV: &str = "BALLAST_BENCH_STORE_URL";
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
    instances: Instances,
    defer: bool,
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
            instances: Instances::default(),
            defer: false,
            name: String::new(),
        }
        .named()
    }

    /// The same agents calling their tools over `tools`: with [`ToolApi::Mcp`], at the gateway's `/mcp`, in front
    /// of the upstream's MCP server. Named `gateway (mcp)` (`gateway (messages, mcp)`, ...).
    pub fn tools(self, tools: ToolApi) -> ThroughGateway {
        ThroughGateway { tools, ..self }.named()
    }

    /// The same agents through `instances` of `ballast serve`. Named with their count and store when they are not
    /// the default: `gateway (3 instances, redis)`.
    pub fn instances(self, instances: Instances) -> ThroughGateway {
        ThroughGateway { instances, ..self }.named()
    }

    /// The same agents asking the gateway to defer their side effects when it cannot serve them now (`Prefer:
    /// respond-async`), the operations it deferred drained after the load ([`super::defer`]); tools over HTTP only
    /// (a run with MCP tools refuses to start). Named `gateway (defer)` (`gateway (messages, defer)`, ...).
    pub fn defer(self, defer: bool) -> ThroughGateway {
        ThroughGateway { defer, ..self }.named()
    }

    fn named(self) -> ThroughGateway {
        let mut differs = differences(self.api, self.tools);
        if self.defer {
            differs.push("defer".to_owned());
        }
        differs.extend(self.instances.describe());
        ThroughGateway {
            name: named("gateway", &differs),
            ..self
        }
    }
}

/// The gateway's configuration in front of the upstream at `base_url`, its tools over `tools`, its store in `dir`
/// (see the module docs).
pub fn gateway_config(base_url: &str, time_scale: f64, dir: &str, tools: ToolApi) -> String {
    let store = format!("url = \"sqlite://{dir}/ballast.db\"");
    config_with(base_url, time_scale, tools, &store, "agents")
}

/// The configuration of `count` instances on a shared store: the store's URL from [`STORE_ENV`], a principal of
/// the run's own, `principal`, and each upstream's `concurrency` sized for the fleet (docs/deploy.md): admission
/// is per instance, so N instances at the single gateway's 64 would put N x 64 calls in flight at an upstream
/// whose capacity the one gateway's 64 was sized for — an operator divides it among them.
fn shared_config(base_url: &str, time_scale: f64, tools: ToolApi, principal: &str, count: usize) -> String {
    let store = format!("url_env = \"{STORE_ENV}\"");
    per_instance(
        &config_with(base_url, time_scale, tools, &store, principal),
        count,
    )
}

/// `config` with `concurrency = ceil(64 / count)` in each model route, tool and MCP server table (none of which
/// sets its own in the bench's configuration).
fn per_instance(config: &str, count: usize) -> String {
    let share = ballast_config::DEFAULT_TOOL_CONCURRENCY.div_ceil(count.max(1) as u32);
    let mut out = String::with_capacity(config.len() + 256);
    for line in config.lines() {
        out.push_str(line);
        out.push('\n');
        if matches!(line.trim(), "[[models]]" | "[[tools]]" | "[[mcp_servers]]") {
            out.push_str(&format!("concurrency = {share}\n"));
        }
    }
    out
}

fn config_with(base_url: &str, time_scale: f64, tools: ToolApi, store: &str, principal: &str) -> String {
    let routes = match tools {
        ToolApi::Http => with_ballast::config_speaking(base_url, time_scale, Some(APIS)),
        ToolApi::Mcp => with_ballast::config_over_mcp(base_url, time_scale, Some(APIS)),
    };
    format!("{routes}\n[store]\n{store}\n\n[[principals]]\nname = \"{principal}\"\nkey_env = \"{KEY_ENV}\"\n")
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
            let mut env = vec![(KEY_ENV.to_owned(), KEY.to_owned())];
            let config = match self.instances.store() {
                None => gateway_config(
                    base_url,
                    time_scale,
                    &dir.path().display().to_string(),
                    self.tools,
                ),
                Some(url) => {
                    env.push((STORE_ENV.to_owned(), url.to_owned()));
                    // Idempotency records and runs are scoped by principal, and every run repeats the same run ids
                    // (`fs-SEED-AGENT`) and step keys: a principal of the run's own keeps a run on a shared store
                    // from meeting an earlier run's records (replayed answers, spent allowances, past deadlines).
                    // Random, not seeded: the same seed run twice on one store must not meet itself either.
                    let principal = format!("agents-{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
                    shared_config(
                        base_url,
                        time_scale,
                        self.tools,
                        &principal,
                        self.instances.count(),
                    )
                }
            };
            let path = dir.path().join("ballast.toml");
            std::fs::write(&path, config).map_err(|e| format!("cannot write the gateway's config: {e}"))?;
            let path = path.display().to_string();
            let fleet = Fleet::start(&self.binary, path, env, dir, self.instances.count()).await?;
            let bases: Vec<String> = fleet
                .addrs()
                .iter()
                .map(|addr| format!("http://{addr}"))
                .collect();
            let status_urls = bases.iter().map(|base| format!("{base}/status")).collect();
            let spread = Arc::new(Spread::new(bases));
            let route = Route::Ballast {
                spread: Arc::clone(&spread),
            };
            let mut agents =
                HttpAgents::new(route, Some(KEY.to_owned()), self.api, time_scale)?.with_tools(self.tools)?;
            let deferrals = self.defer.then(|| Arc::new(Deferrals::default()));
            if let Some(deferrals) = &deferrals {
                agents = agents.deferring(Arc::clone(deferrals))?;
            }
            let status = Arc::new(StatusWatch::new(status_urls, KEY)?);
            let looking = tokio::spawn(Arc::clone(&status).look_every(LOOK_EVERY));
            let kill = self
                .instances
                .kill_one_at()
                .map(|at| KillPlan::new(at.mul_f64(time_scale)));
            Ok(Box::new(GatewayAgents {
                agents,
                status,
                looking,
                reported: self.instances != Instances::default(),
                spread,
                kill,
                deferrals,
                drained: Mutex::new(None),
                fleet: Arc::new(fleet),
            }) as Box<dyn Agents>)
        })
    }
}

/// One run's agents and the gateway instances they call (killed when the run is over).
struct GatewayAgents {
    agents: HttpAgents,
    status: Arc<StatusWatch>,
    looking: JoinHandle<()>,
    /// Whether the instances are reported (not the default one).
    reported: bool,
    spread: Arc<Spread>,
    kill: Option<KillPlan>,
    /// With `--defer`: the operations the gateway deferred, and how they ended once drained.
    deferrals: Option<Arc<Deferrals>>,
    drained: Mutex<Option<DeferredRun>>,
    // Dropped after the agents and the kill: the instances are killed and waited for, then their directory removed.
    fleet: Arc<Fleet>,
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

    fn run_started(&self, start: Instant) {
        if let Some(kill) = &self.kill {
            kill.arm(Arc::clone(&self.fleet), start);
        }
    }

    fn breaker_changes(&self) -> Vec<BreakerChange> {
        self.status.take_changes()
    }

    fn throttled(&self) -> Option<u64> {
        Some(self.status.refused())
    }

    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(kill) = &self.kill {
                kill.settle().await;
            }
            if let Some(deferrals) = &self.deferrals {
                let bases: Vec<String> = (0..self.spread.len())
                    .map(|i| self.spread.base(i).to_owned())
                    .collect();
                let client = self.agents.client();
                let run = defer::drain(client, &bases, KEY, deferrals.take()).await;
                *self.drained.lock().unwrap_or_else(PoisonError::into_inner) = Some(run);
            }
            self.status.look().await;
        })
    }

    fn deferred(&self) -> Option<DeferredRun> {
        self.deferrals.as_ref()?;
        let drained = self.drained.lock().unwrap_or_else(PoisonError::into_inner);
        Some(drained.clone().unwrap_or_else(|| DeferredRun::new(Vec::new())))
    }

    fn fleet(&self) -> Option<FleetReport> {
        self.reported.then(|| FleetReport {
            load: self.spread.load(),
            kill: self.kill.as_ref().map(KillPlan::report),
            acknowledged_lost: 0,
        })
    }
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
    fn instances_on_a_shared_store_read_its_url_from_the_environment_under_a_principal_of_their_run() {
        for tools in [ToolApi::Http, ToolApi::Mcp] {
            let shared = shared_config("http://127.0.0.1:1", 0.05, tools, "agents-0123456789abcdef", 3);
            let own = gateway_config("http://127.0.0.1:1", 0.05, "/tmp/x", tools);
            // Each upstream's concurrency divided among the three (64 / 3, rounded up), and it loads.
            let config = ballast_config::Config::from_toml_str(&shared).expect("it loads");
            assert!(config.models.iter().all(|m| m.concurrency == 22), "{shared}");
            assert!(config.tools.iter().all(|t| t.concurrency == 22), "{shared}");
            assert_eq!(
                shared
                    .replace("concurrency = 22\n", "")
                    .replace(
                        "url_env = \"BALLAST_BENCH_STORE_URL\"",
                        "url = \"sqlite:///tmp/x/ballast.db\""
                    )
                    .replace("agents-0123456789abcdef", "agents"),
                own,
                "the same gateway but for its store and principal"
            );
            let config =
                ballast_config::Config::from_toml_str(&shared).unwrap_or_else(|e| panic!("{e}\n{shared}"));
            assert_eq!(config.principals[0].name, "agents-0123456789abcdef");
        }
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
