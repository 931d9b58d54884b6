//! Settings that will not behave as they seem to: each check, worded with what to change.

use std::time::Duration;

use ballast_core::UpstreamIdempotency;

use ballast_core::BreakerConfig;

use super::{Plan, Warning, fmt, naive_worst_case};
use crate::{Config, Deployment, ModelRoute, RetryConfig, ToolConfig, ToolFallback};

/// A model route's concurrency from which `plan` calls it no limit at all.
const AS_GOOD_AS_UNLIMITED: u32 = 1000;

/// The conversation the run-allowance check sizes for: model, tool, tool, model.
const CONVERSATION_CALLS: u32 = 4;

/// The share of attempts failing in the run-allowance check: a bad day, not an outage.
const FAILING: f64 = 0.2;

/// The retries `calls` calls need together with probability at least `quantile`, when each attempt fails with
/// probability `failing` and a call makes at most `attempts` attempts (so at most `attempts - 1` retries): the
/// quantile of a sum of truncated geometric distributions, by convolution.
pub(crate) fn retries_needed(calls: u32, attempts: u32, failing: f64, quantile: f64) -> u64 {
    let most = attempts.saturating_sub(1) as usize;
    // One call's retries: k with probability failing^k (1 - failing), and `most` for the rest.
    let one: Vec<f64> = (0..=most)
        .map(|k| {
            if k < most {
                failing.powi(k as i32) * (1.0 - failing)
            } else {
                failing.powi(k as i32)
            }
        })
        .collect();
    let mut total = vec![1.0];
    for _ in 0..calls {
        let mut next = vec![0.0; total.len() + most];
        for (i, p) in total.iter().enumerate() {
            for (k, q) in one.iter().enumerate() {
                next[i + k] += p * q;
            }
        }
        total = next;
    }
    let mut sum = 0.0;
    for (retries, p) in total.iter().enumerate() {
        sum += p;
        if sum >= quantile {
            return retries as u64;
        }
    }
    (total.len() - 1) as u64
}

impl Plan {
    /// A model route's checks: the primary within its share, the fallbacks' time, per-try and breaker.
    pub(super) fn warn_model(&mut self, path: &str, model: &ModelRoute, primary_per_try: Duration) {
        // With fallbacks the first deployment may use only `primary_share` of the deadline.
        let has_fallbacks = model.deployments.len() > 1;
        let primary_time = if has_fallbacks {
            self.deadline.default_timeout.mul_f64(model.primary_share)
        } else {
            self.deadline.default_timeout
        };
        self.warn_attempts_beyond(path, primary_per_try, &model.retry, primary_time, has_fallbacks);
        if let Some(fallback) = model.deployments.get(1) {
            self.warn_fallback_deployment_time(path, model, primary_time, fallback);
        }
        self.warn_common(
            path,
            model.deployments.iter().map(|d| d.per_try_timeout),
            model.breaker.can_open(),
        );
        self.warn_open_for(path, &model.breaker, has_fallbacks);
        if model.concurrency >= AS_GOOD_AS_UNLIMITED {
            self.warn(
                path,
                format!(
                    "concurrency {} is as good as no limit: a crowd of agents reaches the provider all at once, \
                     which answers it with 429 and 503, instead of queueing here by priority and deadline; set it \
                     to what the provider account serves at once (default 64)",
                    model.concurrency
                ),
            );
        }
    }

    /// An open breaker with nothing to fall back to fails every call for `open_for`: longer than the default
    /// deadline, a false trip fails whole agent requests that had time to succeed.
    fn warn_open_for(&mut self, path: &str, breaker: &BreakerConfig, has_fallback: bool) {
        let deadline = self.deadline.default_timeout;
        if has_fallback || !breaker.can_open() || breaker.open_for() <= deadline {
            return;
        }
        self.warn(
            &format!("{path}.breaker"),
            format!(
                "open_for {} is longer than the {} default deadline, and nothing falls back: once open, every call \
                 for {} fails with circuit_open, whole agent requests that had time to succeed; shorten open_for \
                 (default 5s) or configure a fallback",
                fmt(breaker.open_for()),
                fmt(deadline),
                fmt(breaker.open_for())
            ),
        );
    }

    /// The run allowance against what one conversation of [`CONVERSATION_CALLS`] calls typically needs when
    /// [`FAILING`] of the attempts fail, at the config's largest `max_attempts`: the retries it needs in 99 of 100
    /// conversations. Less, and the allowance, not the upstream, fails such conversations.
    pub(super) fn warn_run_allowance(&mut self, config: &Config) {
        let attempts = (config.models.iter().map(|m| m.retry.max_attempts))
            .chain(config.tools.iter().map(|t| t.retry.max_attempts))
            .max();
        let Some(attempts) = attempts.filter(|a| *a > 1) else {
            return;
        };
        let needed = retries_needed(CONVERSATION_CALLS, attempts, FAILING, 0.99);
        let run = &config.run;
        let allowed = u64::from(run.retry_allowance)
            + (run.retry_allowance_per_call * f64::from(CONVERSATION_CALLS)).floor() as u64;
        if allowed >= needed {
            return;
        }
        self.warn(
            "run",
            format!(
                "the run allowance gives a conversation of {CONVERSATION_CALLS} calls {allowed} retries \
                 (retry_allowance {} + retry_allowance_per_call {} per call), under the {needed} that 99 in 100 such \
                 conversations need when {:.0}% of attempts fail at max_attempts = {attempts}: the allowance, not \
                 the upstream, would fail them; raise retry_allowance or retry_allowance_per_call",
                run.retry_allowance,
                run.retry_allowance_per_call,
                FAILING * 100.0
            ),
        );
    }

    /// The time a hanging primary leaves the fallback deployments — `(1 - primary_share) x default_timeout`,
    /// minus the reserve — against one full try of the first of them (its `per_try_timeout`, and never less than
    /// `min_attempt`). Less, and the fallback that exists for exactly this case is cut short or never starts.
    fn warn_fallback_deployment_time(
        &mut self,
        path: &str,
        model: &ModelRoute,
        primary_time: Duration,
        fallback: &Deployment,
    ) {
        let d = self.deadline;
        let left = d
            .default_timeout
            .saturating_sub(primary_time)
            .saturating_sub(d.reserve);
        let Some(short_of) = self.one_try_short_of(left, fallback.per_try_timeout) else {
            return;
        };
        self.warn(
            path,
            format!(
                "primary_share {} leaves the fallback deployments {} of the {} default deadline (after the {} \
                 reserve), under {short_of} of {}: a hanging primary leaves the fallback no full try; lower \
                 primary_share or the fallback's per_try_timeout",
                model.primary_share,
                fmt(left),
                fmt(d.default_timeout),
                fmt(d.reserve),
                fallback.model
            ),
        );
    }

    /// A tool's checks: within the deadline, the fallback tool's time, side effects, per-try and breaker.
    pub(super) fn warn_tool(&mut self, config: &Config, path: &str, tool: &ToolConfig) {
        self.warn_attempts_beyond(
            path,
            tool.per_try_timeout,
            &tool.retry,
            self.deadline.default_timeout,
            false,
        );
        if let Some(ToolFallback::Tool(name)) = &tool.fallback
            && let Some(fallback) = config.tools.iter().find(|t| &t.name == name)
        {
            self.warn_fallback_tool_time(path, tool, fallback);
        }
        self.warn_side_effect_retries(path, tool);
        self.warn_common(
            path,
            std::iter::once(tool.per_try_timeout),
            tool.breaker.can_open(),
        );
        self.warn_open_for(path, &tool.breaker, tool.fallback.is_some());
    }

    /// The same for a tool: what the primary's worst case leaves of the default deadline, minus the reserve,
    /// against one full try of the fallback tool.
    fn warn_fallback_tool_time(&mut self, path: &str, tool: &ToolConfig, fallback: &ToolConfig) {
        let d = self.deadline;
        let primary_worst = naive_worst_case(tool.per_try_timeout, &tool.retry);
        let left = d
            .default_timeout
            .saturating_sub(primary_worst)
            .saturating_sub(d.reserve);
        let Some(short_of) = self.one_try_short_of(left, fallback.per_try_timeout) else {
            return;
        };
        self.warn(
            path,
            format!(
                "fallback tool {} gets {} when {} hangs (its {} attempts can use {} of the {} default deadline), \
                 under {short_of}; lower per_try_timeout or max_attempts so the fallback keeps time to answer",
                fallback.name,
                fmt(left),
                tool.name,
                tool.retry.max_attempts,
                fmt(primary_worst),
                fmt(d.default_timeout)
            ),
        );
    }

    /// `None` when `left` holds one full try of `per_try`; else what it falls short of, in words.
    fn one_try_short_of(&self, left: Duration, per_try: Duration) -> Option<String> {
        let min_attempt = self.deadline.min_attempt;
        if per_try >= min_attempt {
            (left < per_try).then(|| format!("the per_try_timeout {}", fmt(per_try)))
        } else {
            (left < min_attempt)
                .then(|| format!("the server.min_attempt {} an attempt needs", fmt(min_attempt)))
        }
    }

    fn warn_side_effect_retries(&mut self, path: &str, tool: &ToolConfig) {
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

    fn warn_common(&mut self, path: &str, per_tries: impl Iterator<Item = Duration>, breaker_can_open: bool) {
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
