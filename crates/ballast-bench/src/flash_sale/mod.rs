//! The flash-sale bench (`ballast bench flash-sale`): N agents at once, each one conversation — model →
//! `lookup_order` → `create_refund` or `process_payment` → model — under one deadline per conversation, against
//! the chaos upstream served in process on 127.0.0.1, once per strategy on the same seed: the naive code, the
//! `ballast` crate in process, and agents over HTTP with the SDKs' habits through Ballast's gateway or any other —
//! their tools over HTTP or MCP.
//!
//! Why the same seed is fair: the chaos upstream draws each fault from (seed, endpoint, operation, attempt), the
//! conversations and their arrival times come from the seed too, so every strategy meets the same agents at the
//! same times and the same fault on the same try of the same call. Each strategy gets a fresh upstream (its own
//! ledger, stats and clock), so one strategy's load never reaches another's run.
//!
//! # Layout
//! - `scenario` — [`Scenario`], [`Dead`], [`Arrivals`], [`Conversation`]: what a run is made of.
//! - `strategy` — the [`Strategy`] trait, [`Outcome`], [`BreakerChange`], [`ModelApi`], [`ToolApi`], and how a
//!   strategy is named.
//! - `naive` — [`Naive`]: the agent code of reference/000 and /002; and [`NaiveMcp`], the same agents with their
//!   tools on an MCP server, called as MCP tutorials do (`naive_mcp`).
//! - `mcp` — the bench's MCP client (JSON-RPC over its HTTP client), for both strategies over MCP.
//! - `with_ballast` — [`WithBallast`]: the `ballast` crate as a user configures it (and the gateway's config).
//! - `sdk` — what the official OpenAI SDKs do on a call: retries, waits, headers ([`Flavour`]).
//! - `over_http` — agents over HTTP with those habits, on any model API ([`ModelApi`]), their tools over HTTP
//!   or MCP ([`ToolApi`]); `over_mcp` — their tool calls over MCP through the gateway; `turns` — a conversation as
//!   each API carries it.
//! - `gateway` — [`ThroughGateway`]: those agents through `ballast serve`, started by the bench; `instances` —
//!   [`Instances`]: one `ballast serve` (the default) or N on a shared store, and the one killed mid-sale; `spread`
//!   — each request of the agents to an instance picked at random; `status` — every instance's `/status`, merged;
//!   `fleet` — [`FleetReport`] and [`FleetSummary`]: what each instance served, the kill, what was acknowledged but
//!   lost.
//! - `defer` — `--defer`: what the gateway's agents ask when their side effects can wait, the operations the
//!   gateway deferred, and their drain after the load; `deferrals` — [`DeferredRun`] and [`DeferredSummary`]: how
//!   they ended.
//! - `against` — [`Against`]: those agents through any OpenAI-compatible gateway a user runs.
//! - `report` — [`Summary`]: the numbers of one strategy over one or more runs, the table and the JSON; `outage`
//!   — the dead-upstream measures.
//! - `seeds` — [`run_seeds`] and [`ScenarioReport`]: every strategy on every seed, per seed and pooled.
//! - `chart` — the SVG chart of successes and failures over time; `millis` — durations in the JSON; `upstream` —
//!   one run's chaos upstream and what it counted.

mod against;
mod chart;
mod defer;
mod deferrals;
mod fleet;
mod gateway;
mod instances;
mod mcp;
mod millis;
mod naive;
mod naive_mcp;
mod outage;
mod over_http;
mod over_mcp;
mod report;
mod scenario;
mod sdk;
mod seeds;
mod spread;
mod status;
mod strategy;
mod turns;
mod upstream;
mod with_ballast;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ballast::clock;
use serde::Serialize;
use tokio::task::JoinSet;

pub use against::Against;
pub use chart::chart_svg;
pub use deferrals::{DeferredEnd, DeferredRun, DeferredState, DeferredSummary};
pub use fleet::{FleetReport, FleetSummary, InstanceLoad, InstanceShare, Kill, KillSummary};
pub use gateway::{ThroughGateway, gateway_config};
pub use instances::Instances;
pub(crate) use instances::store_kind;
pub use naive::{Naive, NaiveMcp};
pub use over_http::MODEL;
pub use report::{Summary, table};
pub use scenario::{Action, Arrivals, Conversation, Dead, Scenario};
pub use sdk::Flavour;
pub use seeds::{Progress, ScenarioReport, run_seeds, seed_label};
pub use strategy::{Agents, BreakerChange, ModelApi, Outcome, Strategy, ToolApi};
use upstream::{Upstream, upstream_counts};
pub use with_ballast::WithBallast;

/// A failure that took at most this long (before time scaling) failed fast: the caller learned it at once
/// instead of waiting out its deadline.
pub const FAST_FAILURE: Duration = Duration::from_secs(1);
/// How far past its deadline a conversation may end and still count as within it.
pub const DEADLINE_SLACK: Duration = Duration::from_millis(50);

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The upstream's faults.
    pub scenario: Scenario,
    /// Conversations per run.
    pub agents: usize,
    /// When they start; `None`: the scenario's own ([`Scenario::default_arrivals`]).
    pub arrivals: Option<Arrivals>,
    /// The seed of the faults, the arrivals and the jitter.
    pub seed: u64,
    /// The clock's pace: `0.1` runs ten times faster than real time (every duration of the scenario, the
    /// upstream and the strategies times 0.1).
    pub time_scale: f64,
    /// Each conversation's deadline (before time scaling).
    pub deadline: Duration,
    /// Scripted faults added to the scenario's profile (a test's sure commit-then-lose).
    pub scripts: Vec<ballast_chaos::Script>,
    /// Where each run's chaos upstream listens (one run at a time); port 0: a free one per run.
    pub upstream: SocketAddr,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            scenario: Scenario::FlashSale,
            agents: 200,
            arrivals: None,
            seed: 1,
            time_scale: 1.0,
            deadline: Duration::from_secs(30),
            scripts: Vec::new(),
            upstream: SocketAddr::from(([127, 0, 0, 1], 0)),
        }
    }
}

impl Options {
    /// The arrivals of the run.
    pub fn arrivals(&self) -> Arrivals {
        self.arrivals.unwrap_or(self.scenario.default_arrivals())
    }

    /// The conversations' deadline, scaled.
    pub fn scaled_deadline(&self) -> Duration {
        self.deadline.mul_f64(self.time_scale)
    }

    /// What is run, in one line: `flash-sale: 200 agents, burst arrivals, deadline 30s, time scale 1`.
    pub fn describe(&self) -> String {
        format!(
            "{}: {} agents, {} arrivals, deadline {}, time scale {}",
            self.scenario,
            self.agents,
            self.arrivals(),
            ballast_config::format_duration(self.deadline),
            self.time_scale
        )
    }
}

/// One conversation as it went.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    /// The agent.
    pub agent: usize,
    /// When it started, from the run's start.
    #[serde(serialize_with = "millis::millis")]
    pub started: Duration,
    /// How long it took.
    #[serde(serialize_with = "millis::millis")]
    pub took: Duration,
    /// What it came to.
    pub outcome: Outcome,
}

/// One strategy's run on one seed: every conversation, and what the upstream saw.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Run {
    /// The strategy.
    pub strategy: String,
    /// The seed.
    pub seed: u64,
    /// The conversations, by agent.
    pub records: Vec<Record>,
    /// Side effects executed more than once for one operation (the chaos ledger's `duplicates`).
    pub duplicates: u64,
    /// Requests the upstream received (every try of every call).
    pub upstream_requests: u64,
    /// The breakers' changes, in order.
    pub breaker_changes: Vec<BreakerChange>,
    /// Attempts refused by the strategy's adaptive throttles (`None`: it has none).
    pub throttled: Option<u64>,
    /// The conversations' deadline (scaled).
    #[serde(serialize_with = "millis::millis")]
    pub deadline: Duration,
    /// The time scale.
    pub time_scale: f64,
    /// When the upstream was dead, for a dead-upstream scenario (scaled).
    #[serde(skip)]
    pub outage: Option<(Duration, Duration)>,
    /// The gateway's instances, for a gateway of several or on a shared store (`--instances`, `--store`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetReport>,
    /// How the side effects the gateway deferred ended, for agents that asked for deferral (`--defer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deferred: Option<DeferredRun>,
}

/// Runs `strategy` once with `options`: a fresh chaos upstream, the agents at their arrival times, then the
/// upstream's ledger and stats. `done` is called as each conversation ends (a progress bar).
pub async fn run(
    options: &Options,
    strategy: &dyn Strategy,
    done: &(dyn Fn() + Sync),
) -> Result<Run, String> {
    let scale = options.time_scale;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(format!("the time scale must be a positive number, not {scale}"));
    }
    let mut profile = options.scenario.profile(options.seed, scale);
    profile.scripts.extend(options.scripts.iter().cloned());
    let upstream = Upstream::start(options.upstream, profile).await?;
    let base_url = upstream.url("");
    let agents: Arc<dyn Agents> = Arc::from(strategy.agents(&base_url, scale).await?);
    let offsets = options.arrivals().offsets(
        options.agents,
        options.scenario.arrival_span().mul_f64(scale),
        options.seed,
    );
    let start = clock::now();
    agents.run_started(start);
    let deadline = options.scaled_deadline();
    let mut conversations = JoinSet::new();
    for (agent, offset) in offsets.into_iter().enumerate() {
        let agents = Arc::clone(&agents);
        let conversation = Conversation::new(options.seed, agent, deadline);
        conversations.spawn(async move {
            tokio::time::sleep_until(clock::to_tokio(start + offset)).await;
            let began = clock::now();
            let outcome = agents.converse(&conversation).await;
            Record {
                agent,
                started: began.saturating_duration_since(start),
                took: clock::now().saturating_duration_since(began),
                outcome,
            }
        });
    }
    let mut records = Vec::with_capacity(options.agents);
    let mut breaker_changes = Vec::new();
    let look_every = Duration::from_millis(10);
    let mut looks = tokio::time::interval(look_every);
    looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            finished = conversations.join_next() => match finished {
                Some(Ok(record)) => {
                    records.push(record);
                    done();
                }
                Some(Err(error)) => return Err(format!("a conversation panicked: {error}")),
                None => break,
            },
            _ = looks.tick() => {
                let at = clock::now().saturating_duration_since(start);
                breaker_changes.extend(agents.breaker_changes().into_iter().map(|change| BreakerChange { at, ..change }));
            }
        }
    }
    agents.settle().await;
    let at = clock::now().saturating_duration_since(start);
    breaker_changes.extend(
        agents
            .breaker_changes()
            .into_iter()
            .map(|change| BreakerChange { at, ..change }),
    );
    records.sort_by_key(|record| record.agent);
    let throttled = agents.throttled();
    let mut fleet = agents.fleet();
    let mut deferred = agents.deferred();
    // Whatever the agents started (a gateway) stops before the upstream does.
    drop(agents);
    let counts = upstream_counts(&upstream).await?;
    upstream.shutdown().await?;
    if let Some(fleet) = &mut fleet {
        fleet.acknowledged_lost = fleet::acknowledged_lost(&records, &counts.executed);
    }
    if let Some(deferred) = &mut deferred {
        deferred.acknowledged_lost = deferred.completed_not_in(&counts.executed);
    }
    Ok(Run {
        strategy: strategy.name().to_owned(),
        seed: options.seed,
        records,
        duplicates: counts.duplicates,
        upstream_requests: counts.requests,
        breaker_changes,
        throttled,
        deadline,
        time_scale: scale,
        outage: options.scenario.outage(scale),
        fleet,
        deferred,
    })
}
