//! `ballast plan`: the worst case of a configuration, on paper.
//!
//! Why: per-call timeouts and per-layer retries look harmless one line at a time; the damage is in the product
//! (reference/003: "draw the call chain, write each step's timeout and retries, multiply out the worst case").
//! A plan lists, for every model route and tool, what a naive client configured the same way would make a user
//! wait — every try times out, every backoff sleep is at its cap, every fallback runs its own retries — next to
//! Ballast's bound, the one request deadline. It also multiplies retries over `layers` stacked services (3 tries
//! at each of 5 layers is 243 calls to the bottom one) and warns about settings that cannot do what they seem to.
//!
//! Pure computation over a validated [`Config`]; rendering is in `render`.

mod render;

use std::time::Duration;

use serde::Serialize;

use ballast_core::UpstreamIdempotency;

use crate::{BudgetConfig, Config, ModelRoute, RetryConfig, ToolConfig, ToolFallback};

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
    /// The same sequence under Ballast: the request deadline (or less, when the sequence is shorter).
    #[serde(rename = "sequence_ballast_bound_ms", serialize_with = "millis")]
    pub sequence_ballast_bound: Duration,
    /// Settings that will not behave as they seem to; the config is still valid.
    pub warnings: Vec<Warning>,
}

/// The request deadline and its margins, from `[server]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DeadlineBound {
    /// The deadline when the caller sends none (`server.default_timeout`).
    #[serde(rename = "default_timeout_ms", serialize_with = "millis")]
    pub default_timeout: Duration,
    /// The largest deadline a caller may ask for (`server.max_timeout`).
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
    /// Ballast's bound: the naive worst case cut at the request deadline (`server.default_timeout`; a caller may
    /// ask for up to `server.max_timeout`). Whatever the chain, the caller has its answer by then.
    #[serde(rename = "ballast_bound_ms", serialize_with = "millis")]
    pub ballast_bound: Duration,
    /// Calls reaching the bottom upstream per request when each of `layers` layers retries like this one.
    pub naive_amplification: f64,
    /// Calls reaching the upstream per request with Ballast: retries happen at one layer only, so at most
    /// `attempts` per request.
    pub ballast_amplification: u32,
    /// The most the retry budget lets retries add to the upstream's load over a busy window (`0.2` = 20%), or
    /// `None` when the budget is a token bucket (a fixed allowance instead of a share).
    pub sustained_retry_share: Option<f64>,
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
            warnings: Vec::new(),
        };
        for (i, model) in config.models.iter().enumerate() {
            plan.add_model(&format!("models[{i}]"), model);
        }
        for (i, tool) in config.tools.iter().enumerate() {
            plan.add_tool(config, &format!("tools[{i}]"), tool);
        }
        for row in &mut plan.rows {
            row.ballast_bound = row.naive_worst_case.min(plan.deadline.default_timeout);
        }
        plan.sequence_naive_worst_case = saturating_sum(plan.rows.iter().map(|r| r.naive_worst_case));
        plan.sequence_ballast_bound = plan.sequence_naive_worst_case.min(plan.deadline.default_timeout);
        plan
    }

    fn row(
        &self,
        kind: TargetKind,
        name: &str,
        path: &str,
        per_try: Duration,
        retry: &RetryConfig,
    ) -> PlanRow {
        PlanRow {
            kind,
            name: name.to_owned(),
            path: path.to_owned(),
            per_try_timeout: per_try,
            attempts: retry.max_attempts,
            backoff_cap: retry.backoff.cap(),
            fallbacks: Vec::new(),
            naive_worst_case: Duration::ZERO,
            ballast_bound: self.deadline.default_timeout,
            naive_amplification: f64::from(retry.max_attempts)
                .powi(self.layers.try_into().unwrap_or(i32::MAX)),
            ballast_amplification: retry.max_attempts,
            sustained_retry_share: None,
        }
    }

    fn add_model(&mut self, path: &str, model: &ModelRoute) {
        let primary_per_try = model
            .deployments
            .first()
            .map_or(model.per_try_timeout, |d| d.per_try_timeout);
        let mut row = self.row(
            TargetKind::Model,
            &model.name,
            path,
            primary_per_try,
            &model.retry,
        );
        row.fallbacks = model
            .deployments
            .iter()
            .skip(1)
            .map(|d| format!("{} at {}", d.model, d.base_url))
            .collect();
        row.naive_worst_case = saturating_sum(
            model
                .deployments
                .iter()
                .map(|d| naive_worst_case(d.per_try_timeout, &model.retry)),
        );
        row.sustained_retry_share = sustained_share(&model.budget);

        // With fallbacks the first deployment may use only `primary_share` of the deadline.
        let has_fallbacks = model.deployments.len() > 1;
        let primary_time = if has_fallbacks {
            self.deadline.default_timeout.mul_f64(model.primary_share)
        } else {
            self.deadline.default_timeout
        };
        self.warn_attempts_beyond(path, primary_per_try, &model.retry, primary_time, has_fallbacks);
        if has_fallbacks {
            let left = self.deadline.default_timeout.saturating_sub(primary_time);
            let needed = self.deadline.reserve.saturating_add(self.deadline.min_attempt);
            if left < needed {
                self.warn(
                    path,
                    format!(
                        "primary_share {} leaves the fallback deployments {} of the {} default deadline, under the \
                         {} an attempt needs: a hanging primary leaves no time to fall back; lower primary_share",
                        model.primary_share,
                        fmt(left),
                        fmt(self.deadline.default_timeout),
                        fmt(needed)
                    ),
                );
            }
        }
        self.warn_common(
            path,
            model.deployments.iter().map(|d| d.per_try_timeout),
            &model.breaker.can_open(),
        );
        self.rows.push(row);
    }

    fn add_tool(&mut self, config: &Config, path: &str, tool: &ToolConfig) {
        let mut row = self.row(
            TargetKind::Tool,
            &tool.name,
            path,
            tool.per_try_timeout,
            &tool.retry,
        );
        row.naive_worst_case = naive_worst_case(tool.per_try_timeout, &tool.retry);
        row.sustained_retry_share = sustained_share(&tool.budget);
        // Follow the fallback chain (validation guarantees it names existing tools without cycles).
        let mut next = tool.fallback.as_ref();
        while let Some(fallback) = next {
            match fallback {
                ToolFallback::Response(_) => {
                    row.fallbacks.push("static response".to_owned());
                    next = None;
                }
                ToolFallback::Tool(name) => {
                    let Some(fallback_tool) = config.tools.iter().find(|t| &t.name == name) else {
                        break;
                    };
                    row.fallbacks.push(format!("tool {name}"));
                    row.naive_worst_case = row.naive_worst_case.saturating_add(naive_worst_case(
                        fallback_tool.per_try_timeout,
                        &fallback_tool.retry,
                    ));
                    if row.fallbacks.len() > config.tools.len() {
                        break; // unreachable for a validated config; guards against a cycle all the same
                    }
                    next = fallback_tool.fallback.as_ref();
                }
            }
        }

        let primary_worst = naive_worst_case(tool.per_try_timeout, &tool.retry);
        self.warn_attempts_beyond(
            path,
            tool.per_try_timeout,
            &tool.retry,
            self.deadline.default_timeout,
            false,
        );
        if let Some(ToolFallback::Tool(name)) = &tool.fallback
            && primary_worst
                .saturating_add(self.deadline.reserve)
                .saturating_add(self.deadline.min_attempt)
                > self.deadline.default_timeout
        {
            self.warn(
                path,
                format!(
                    "fallback tool {name} gets no time when {} hangs: its {} attempts can use the whole {} default \
                     deadline; lower per_try_timeout or max_attempts so the fallback keeps time to answer",
                    tool.name,
                    tool.retry.max_attempts,
                    fmt(self.deadline.default_timeout)
                ),
            );
        }
        if tool.side_effects
            && tool.upstream_idempotency == UpstreamIdempotency::None
            && tool.retry.max_attempts > 1
        {
            self.warn(
                path,
                format!(
                    "{} has side effects and upstream_idempotency = \"none\", yet max_attempts = {}: only errors where \
                     the request was never sent are retried; a timeout leaves the outcome unknown and is not retried. \
                     If the upstream deduplicates by Idempotency-Key, set upstream_idempotency = \"keyed\"",
                    tool.name, tool.retry.max_attempts
                ),
            );
        }
        self.warn_common(
            path,
            std::iter::once(tool.per_try_timeout),
            &tool.breaker.can_open(),
        );
        self.rows.push(row);
    }

    fn warn_attempts_beyond(
        &mut self,
        path: &str,
        per_try: Duration,
        retry: &RetryConfig,
        time: Duration,
        is_share: bool,
    ) {
        let worst = naive_worst_case(per_try, retry);
        if worst <= time {
            return;
        }
        let of_what = if is_share {
            format!(
                "the primary's share ({}) of the {} default deadline",
                fmt(time),
                fmt(self.deadline.default_timeout)
            )
        } else {
            format!("the {} default deadline", fmt(time))
        };
        self.warn(
            path,
            format!(
                "{} attempts x {} per try plus backoff = {}, beyond {of_what}: the deadline cuts the last attempts \
                 short; lower per_try_timeout or max_attempts",
                retry.max_attempts,
                fmt(per_try),
                fmt(worst)
            ),
        );
    }

    fn warn_common(
        &mut self,
        path: &str,
        per_tries: impl Iterator<Item = Duration>,
        breaker_can_open: &bool,
    ) {
        let min_attempt = self.deadline.min_attempt;
        if let Some(short) = per_tries.filter(|t| *t < min_attempt).min() {
            self.warn(
                path,
                format!(
                    "per_try_timeout {} is under server.min_attempt {}: attempts that short are never started \
                     near the deadline, and rarely finish elsewhere",
                    fmt(short),
                    fmt(min_attempt)
                ),
            );
        }
        if !breaker_can_open {
            self.warn(
                &format!("{path}.breaker"),
                "this breaker can never open: consecutive_failures and failure_rate are both off; a failing \
                 upstream will get every call"
                    .to_owned(),
            );
        }
    }

    fn warn(&mut self, path: &str, message: String) {
        self.warnings.push(Warning {
            path: path.to_owned(),
            message,
        });
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

fn sustained_share(budget: &BudgetConfig) -> Option<f64> {
    match budget {
        BudgetConfig::Ratio { ratio, .. } => Some(*ratio),
        BudgetConfig::TokenBucket { .. } => None,
    }
}

fn fmt(d: Duration) -> String {
    crate::format_duration(d).to_string()
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
