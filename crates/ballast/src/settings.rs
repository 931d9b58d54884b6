//! What the builders share: settings given in code are checked by the one rule set, ballast-config's
//! validation, exactly as a TOML file's are.
//!
//! A builder fills a typed [`Config`] (starting from the typed defaults validation itself gives an omitted key),
//! writes it back to its raw form and validates that: a client built in code is one a config file could have
//! described, and no rule is restated here. The errors' paths are then renamed to the builder's fields
//! (`tools[0].retry.max_attempts` -> `retry.max_attempts`, `server.body_limit` -> `body_limit`).

use ballast_config::{Config, ConfigErrors, RawConfig, validate};

/// `config` as validation returns it, or every rule it breaks with paths relative to `root` (`tools[0]`).
pub(crate) fn validated(config: &Config, root: &str) -> Result<Config, ConfigErrors> {
    validate(&RawConfig::from(config)).map_err(|errors| errors.map_paths(|path| builder_path(path, root)))
}

/// A config path as the builder names the field: relative to `root`, or to `server`.
fn builder_path(path: &str, root: &str) -> String {
    let relative = |prefix: &str| path.strip_prefix(prefix)?.strip_prefix('.');
    relative(root)
        .or_else(|| relative("server"))
        .unwrap_or(path)
        .to_owned()
}

/// One line per error, each naming what was built: `tool "lookup_order": concurrency: 0 must be at least 1`.
pub(crate) fn refused(kind: &str, name: &str, errors: &ConfigErrors) -> String {
    let lines: Vec<String> = (errors.errors().iter())
        .map(|error| format!("{kind} {name:?}: {error}"))
        .collect();
    lines.join("\n")
}

/// The setters every client builder has, written once: those of the upstream's stack (set on the builder's
/// config table `$table`, `tool` or `route`) and those of `[server]` and the runs. For a model route each of its
/// deployments gets a stack of its own with these settings.
macro_rules! builder_setters {
    ($table:ident) => {
        /// The admission class of the calls (default `critical`; a call may lower it).
        pub fn priority(mut self, priority: ballast_core::Priority) -> Self {
            self.$table.priority = priority;
            self
        }

        /// The longest single attempt (default 10 s for a tool, 20 s for a model route's deployments unless one
        /// overrides it; more than zero).
        pub fn per_try_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.$table.per_try_timeout = timeout;
            self
        }

        /// Attempts per call (on each deployment) and the backoff between them (default 3 attempts, full jitter
        /// from 100 ms to 2 s).
        pub fn retry(mut self, retry: ballast_config::RetryConfig) -> Self {
            self.$table.retry = retry;
            self
        }

        /// The retry budget, one per upstream (default: a ratio budget, see docs/config.md).
        pub fn budget(mut self, budget: ballast_config::BudgetConfig) -> Self {
            self.$table.budget = budget;
            self
        }

        /// The circuit breaker's settings, one breaker per upstream (default
        /// [`BreakerConfig::default`](ballast_core::BreakerConfig::default)).
        pub fn breaker(mut self, breaker: ballast_core::BreakerConfig) -> Self {
            self.$table.breaker = breaker;
            self
        }

        /// The adaptive throttle's settings, one per upstream; `None` for none (default
        /// [`ThrottleConfig::default`](ballast_core::ThrottleConfig::default)).
        pub fn throttle(mut self, throttle: Option<ballast_core::ThrottleConfig>) -> Self {
            self.$table.throttle = throttle;
            self
        }

        /// Calls in flight at most, per upstream (default 64; at least 1).
        pub fn concurrency(mut self, concurrency: u32) -> Self {
            self.$table.concurrency = concurrency;
            self
        }

        /// Calls waiting for a slot at most, per upstream (default 256 for a tool, 1024 for a model deployment; 0
        /// sheds as soon as every slot is busy).
        pub fn queue(mut self, queue: u32) -> Self {
            self.$table.queue = queue;
            self
        }

        /// Each call's deadline when the caller gives none (`server.default_timeout`, default 30 s).
        pub fn default_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.server.default_timeout = timeout;
            self
        }

        /// The largest request body sent, in bytes (`server.body_limit`, default 8 MiB; more than zero).
        pub fn body_limit(mut self, limit: u64) -> Self {
            self.server.body_limit = limit;
            self
        }

        /// The longest upstream `Retry-After` waited for, and the longest a model deployment whose quota is spent
        /// is passed over (`server.max_retry_after`, default 60 s).
        pub fn max_retry_after(mut self, max: std::time::Duration) -> Self {
            self.server.max_retry_after = max;
            self
        }

        /// Every `[server]` setting at once (the deadline's reserve and least attempt among them); replaces those
        /// set before.
        pub fn server(mut self, server: ballast_config::ServerConfig) -> Self {
            self.server = server;
            self
        }

        /// The registry of runs the calls join (default: one of its own): give the agent's other clients the same
        /// one, and a run's deadline and retry allowance hold across its model and tool calls alike.
        pub fn runs(mut self, runs: std::sync::Arc<crate::Runs>) -> Self {
            self.runs = Some(runs);
            self
        }
    };
}
pub(crate) use builder_setters;

#[cfg(test)]
mod tests {
    use super::builder_path;

    #[test]
    fn paths_read_as_the_builders_fields() {
        assert_eq!(
            builder_path("tools[0].retry.max_attempts", "tools[0]"),
            "retry.max_attempts"
        );
        assert_eq!(builder_path("server.body_limit", "tools[0]"), "body_limit");
        assert_eq!(builder_path("tools[1].name", "tools[0]"), "tools[1].name");
        assert_eq!(
            builder_path("models[0].deployments[1].base_url", "models[0]"),
            "deployments[1].base_url"
        );
    }
}
