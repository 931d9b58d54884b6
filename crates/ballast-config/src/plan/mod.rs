//! `ballast plan`: the worst case of a configuration, on paper.
//!
//! Why: per-call timeouts and per-layer retries look harmless one line at a time; the damage is in the product
//! (reference/003: "draw the call chain, write each step's timeout and retries, multiply out the worst case").
//! A plan lists, for every model route and tool, what a naive client configured the same way would make a user
//! wait — every try times out, every backoff sleep is at its cap, every fallback runs its own retries — next to
//! Ballast's bound, the one request deadline. It also multiplies retries over `layers` stacked services (3 tries
//! at each of 5 layers is 243 calls to the bottom one) and warns about settings that cannot do what they seem to.
//!
//! Pure computation over a validated [`Config`]: the rows are built in `targets`, the checks are in `warnings`,
//! deferral in `deferred`, the text table is in `render`.

mod budget;
mod deferred;
mod render;
mod targets;
mod warnings;

use std::time::Duration;

use serde::Serialize;

use crate::{Config, RetryConfig};

pub use budget::RetryLoad;
pub use deferred::{DeferredPlan, DeferredTool};
pub use render::render_table;

/// The plan of a configuration: one row per model route and tool, and the warnings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// The deadline every request runs under.
    pub deadline: DeadlineBound,
    /// How many stacked layers the retry amplification assumes.
    pub layers: u32,
    /// One row per model route, then one per tool, in file order.
    pub rows: Vec<PlanRow>,
    /// One agent request that calls every model route and tool once, in sequence: the naive worst case adds
    /// every row's up (reference/003's 3 x 30 s = 90 s); Ballast's bound is still the one deadline.
    #[serde(rename = "sequence_naive_worst_case_ms", serialize_with = "millis")]
    pub sequence_naive_worst_case: Duration,
    /// The same sequence under Ballast with one deadline per run (`ballast-run-id`, or the Rust library's
    /// deadline scope): `server.default_timeout` (or less, when the sequence is shorter).
    #[serde(rename = "sequence_ballast_bound_ms", serialize_with = "millis")]
    pub sequence_ballast_bound: Duration,
    /// The same for a caller that sends its own deadline: at most `server.max_timeout`.
    #[serde(
        rename = "sequence_ballast_bound_caller_deadline_ms",
        serialize_with = "millis"
    )]
    pub sequence_ballast_bound_caller_deadline: Duration,
    /// Settings that will not behave as they seem to; the config is still valid.
    pub warnings: Vec<Warning>,
    /// `[[tools]]` served at `/mcp` without a description or an input schema (a model picks a tool by the one
    /// and writes its arguments by the other).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undescribed: Vec<String>,
    /// How side-effecting calls that cannot run now are deferred; `None` when no tool has side effects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deferred: Option<DeferredPlan>,
    /// Where the gateway's traces go (`[telemetry]`); `None`: no traces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traces: Option<TracesPlan>,
}

/// Where the gateway's traces go and how many are kept (`[telemetry]`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TracesPlan {
    /// Where spans are posted (the endpoint's `/v1/traces`).
    pub url: String,
    /// `http/protobuf` or `http/json`.
    pub protocol: &'static str,
    /// The share of traces that start here which are recorded (a caller's `traceparent` decides for its own).
    pub sampling: f64,
    /// The spans' `service.name`.
    pub service_name: String,
}

/// The request deadline and its margins, from `[server]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DeadlineBound {
    /// The deadline when the caller sends none (`server.default_timeout`).
    #[serde(rename = "default_timeout_ms", serialize_with = "millis")]
    pub default_timeout: Duration,
    /// The largest deadline a caller may ask for (`server.max_timeout`): what a caller that sends a deadline
    /// gets at most. The OpenAI SDKs always send one, so their calls run under this, not `default_timeout`.
    #[serde(rename = "max_timeout_ms", serialize_with = "millis")]
    pub max_timeout: Duration,
    /// Kept back from every attempt to answer (`server.reserve`).
    #[serde(rename = "reserve_ms", serialize_with = "millis")]
    pub reserve: Duration,
    /// The least time an attempt starts with (`server.min_attempt`).
    #[serde(rename = "min_attempt_ms", serialize_with = "millis")]
    pub min_attempt: Duration,
}

/// What a row describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A `[[models]]` route.
    Model,
    /// A `[[tools]]` entry.
    Tool,
    /// An `[[mcp_servers]]` entry's tools (`shop/*`), or one of them with its own override (`shop/lookup`).
    McpServer,
}

/// One model route or tool.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanRow {
    /// Model route or tool.
    pub kind: TargetKind,
    /// Its name.
    pub name: String,
    /// The config path of the entry (`models[0]`, `tools[2]`).
    pub path: String,
    /// The per-try timeout of its first upstream.
    #[serde(rename = "per_try_timeout_ms", serialize_with = "millis")]
    pub per_try_timeout: Duration,
    /// Attempts per call, the first included.
    pub attempts: u32,
    /// The longest single backoff sleep.
    #[serde(rename = "backoff_cap_ms", serialize_with = "millis")]
    pub backoff_cap: Duration,
    /// What is tried after the first upstream, in order: further deployments, a fallback tool chain, or a
    /// static fallback response.
    pub fallbacks: Vec<String>,
    /// The naive worst case: every try of every upstream in the chain times out and every sleep is at its cap,
    /// with no deadline over them.
    #[serde(rename = "naive_worst_case_ms", serialize_with = "millis")]
    pub naive_worst_case: Duration,
    /// Ballast's bound for a caller that sends no deadline: the naive worst case cut at
    /// `server.default_timeout`. Whatever the chain, the caller has its answer by then.
    #[serde(rename = "ballast_bound_ms", serialize_with = "millis")]
    pub ballast_bound: Duration,
    /// Ballast's bound for a caller that sends its own deadline (the OpenAI SDKs always send one: Python
    /// `x-stainless-read-timeout: 600`, Node `x-stainless-timeout`): the naive worst case cut at
    /// `server.max_timeout`, the cap on any caller's deadline.
    #[serde(rename = "ballast_bound_caller_deadline_ms", serialize_with = "millis")]
    pub ballast_bound_caller_deadline: Duration,
    /// Calls reaching the bottom upstream per request when each of `layers` layers retries like this one.
    pub naive_amplification: f64,
    /// Calls reaching the upstream per request with Ballast: retries happen at one layer only, so at most
    /// `attempts` per request.
    pub ballast_amplification: u32,
    /// The most retries the upstream's retry budget lets through: a share of the requests plus a floor per
    /// second (ratio budget), or a capacity plus a refill per second (token bucket).
    pub retry_budget: RetryLoad,
}

/// A setting that will not behave as it seems to. The config is valid; `ballast plan` still exits 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The config path it concerns (`tools[2]`, `models[0].breaker`).
    pub path: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl Plan {
    /// The plan of `config`, assuming `layers` stacked layers for the retry amplification (at least 1).
    pub fn new(config: &Config, layers: u32) -> Plan {
        let layers = layers.max(1);
        let server = &config.server;
        let deadline = DeadlineBound {
            default_timeout: server.default_timeout,
            max_timeout: server.max_timeout,
            reserve: server.reserve,
            min_attempt: server.min_attempt,
        };
        let mut plan = Plan {
            deadline,
            layers,
            rows: Vec::new(),
            sequence_naive_worst_case: Duration::ZERO,
            sequence_ballast_bound: Duration::ZERO,
            sequence_ballast_bound_caller_deadline: Duration::ZERO,
            warnings: Vec::new(),
            undescribed: Vec::new(),
            deferred: DeferredPlan::of(config),
            traces: config.telemetry.as_ref().map(|t| TracesPlan {
                url: t.traces_url(),
                protocol: t.protocol.as_str(),
                sampling: t.sampling,
                service_name: t.service_name.clone(),
            }),
        };
        for (i, model) in config.models.iter().enumerate() {
            plan.add_model(&format!("models[{i}]"), model);
        }
        for (i, tool) in config.tools.iter().enumerate() {
            plan.add_tool(config, &format!("tools[{i}]"), tool);
        }
        for (i, server) in config.mcp_servers.iter().enumerate() {
            plan.add_mcp_server(config, &format!("mcp_servers[{i}]"), server);
        }
        plan.warn_run_allowance(config);
        let (default, max) = (plan.deadline.default_timeout, plan.deadline.max_timeout);
        for row in &mut plan.rows {
            row.ballast_bound = row.naive_worst_case.min(default);
            row.ballast_bound_caller_deadline = row.naive_worst_case.min(max);
        }
        let sequence = saturating_sum(plan.rows.iter().map(|r| r.naive_worst_case));
        plan.sequence_naive_worst_case = sequence;
        plan.sequence_ballast_bound = sequence.min(default);
        plan.sequence_ballast_bound_caller_deadline = sequence.min(max);
        plan
    }
}

/// Every try times out, every sleep is at its cap. In closed form (the backoff windows grow to the cap, then
/// every further sleep is the cap), saturating: no loop over the attempts, no overflow.
pub(crate) fn naive_worst_case(per_try: Duration, retry: &RetryConfig) -> Duration {
    let tries = per_try.saturating_mul(retry.max_attempts);
    let sleeps = retry
        .backoff
        .max_total_delay(retry.max_attempts.saturating_sub(1));
    tries.saturating_add(sleeps)
}

/// The sum of `durations`, stopping at `Duration::MAX` instead of panicking.
fn saturating_sum(durations: impl Iterator<Item = Duration>) -> Duration {
    durations.fold(Duration::ZERO, Duration::saturating_add)
}

fn fmt(d: Duration) -> String {
    crate::format_duration(d).to_string()
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
