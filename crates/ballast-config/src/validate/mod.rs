//! Phase two: [`validate`] turns the raw file into a typed [`Config`], or lists everything wrong with it.
//!
//! Why two phases (quickwit's and TensorZero's config loaders): serde alone stops at the first bad value and
//! knows nothing of rules across fields (`default_timeout <= max_timeout`, a fallback tool that exists). Here
//! every rule runs, every failure is collected with its path and the value as written, and omitted keys take the
//! defaults of the typed structs. Validation needs no environment: secrets are only names of variables, checked
//! for form here and for presence by [`Config::missing_secrets`], so `ballast plan` works on any machine.

mod breaker;
mod check;
mod deferred;
mod headers;
mod listen;
mod mcp;
mod policy;
mod routes;
mod telemetry;
#[cfg(test)]
mod tests;
mod text;
mod throttle;

use std::collections::HashMap;
use std::time::Duration;

use check::{Checker, DurationRule, index, join, written};
use text::{IDENT_RULE, has_password, is_ident, redact};

use crate::error::{ConfigErrors, Problem};
use crate::format_duration;
use crate::raw::{HumanValue, RawConfig, RawPrincipal, RawRun, RawServer, RawStore, SCHEMA_VERSION};
use crate::typed::{
    Config, Principal, PrincipalKey, RunConfig, ServerConfig, StoreConfig, StoreKind, StoreLocation,
};

/// The request deadline's settings as read from `[server]`: `None` for one already reported.
#[derive(Clone, Copy)]
struct DeadlineSettings {
    default_timeout: Option<Duration>,
    max_timeout: Option<Duration>,
    reserve: Option<Duration>,
    min_attempt: Option<Duration>,
}

/// Checks every rule and fills every default.
///
/// ```
/// use ballast_config::{RawConfig, validate};
///
/// let config = validate(&RawConfig::default()).unwrap();
/// assert!(config.tools.is_empty() && config.models.is_empty());
/// ```
pub fn validate(raw: &RawConfig) -> Result<Config, ConfigErrors> {
    let mut c = Checker::default();
    if raw.version != SCHEMA_VERSION {
        c.report(
            "version",
            Problem::UnsupportedVersion {
                found: raw.version.to_string(),
            },
        );
    }
    let server = c.server(&raw.server);
    let principals = c.principals(&raw.principals);
    c.open_listen(&server, raw);
    let store = c.store(&raw.store);
    let run = c.run(&raw.run, &server, &raw.server);
    let deferred = c.deferred(&raw.deferred);
    let models = c.models(&raw.models);
    let tools = c.tools(&raw.tools, &deferred);
    let mcp_servers = c.mcp_servers(&raw.mcp_servers, &deferred);
    let telemetry = c.telemetry(&raw.telemetry);
    match ConfigErrors::from_vec(c.into_errors()) {
        Some(errors) => Err(errors),
        None => Ok(Config {
            server,
            principals,
            store,
            run,
            deferred,
            models,
            tools,
            mcp_servers,
            telemetry,
        }),
    }
}

impl Checker {
    fn server(&mut self, raw: &RawServer) -> ServerConfig {
        let d = ServerConfig::default();
        let (listen, admin_listen) = self.listen_addresses(raw, &d);
        let deadline = self.server_deadline(raw, &d);
        let body_limit = self.size("server.body_limit", raw.body_limit.as_ref(), d.body_limit);
        let grace = self.duration("server.grace", raw.grace.as_ref(), d.grace, DurationRule::Any);
        let drain_delay = self.drain_delay(raw, &d, grace);
        let max_retry_after = self.duration(
            "server.max_retry_after",
            raw.max_retry_after.as_ref(),
            d.max_retry_after,
            DurationRule::Any,
        );
        let repeat_window = self.duration(
            "server.repeat_window",
            raw.repeat_window.as_ref(),
            d.repeat_window,
            DurationRule::Any,
        );
        let timeout = |c: &mut Self, key: &str, raw: Option<&HumanValue>, default: Duration| {
            c.duration(&format!("server.{key}"), raw, default, DurationRule::Positive)
                .unwrap_or(default)
        };
        let header_timeout = timeout(
            self,
            "header_timeout",
            raw.header_timeout.as_ref(),
            d.header_timeout,
        );
        let body_timeout = timeout(self, "body_timeout", raw.body_timeout.as_ref(), d.body_timeout);
        let idle_timeout = timeout(self, "idle_timeout", raw.idle_timeout.as_ref(), d.idle_timeout);
        let send_timeout = timeout(self, "send_timeout", raw.send_timeout.as_ref(), d.send_timeout);
        let max_connections = self.int(
            "server.max_connections",
            raw.max_connections,
            d.max_connections,
            1,
        );
        ServerConfig {
            header_timeout,
            body_timeout,
            idle_timeout,
            send_timeout,
            max_connections: max_connections.unwrap_or(d.max_connections),
            listen: listen.unwrap_or(d.listen),
            admin_listen,
            default_timeout: deadline.default_timeout.unwrap_or(d.default_timeout),
            max_timeout: deadline.max_timeout.unwrap_or(d.max_timeout),
            reserve: deadline.reserve.unwrap_or(d.reserve),
            min_attempt: deadline.min_attempt.unwrap_or(d.min_attempt),
            body_limit: body_limit.unwrap_or(d.body_limit),
            grace: grace.unwrap_or(d.grace),
            drain_delay: drain_delay.unwrap_or(d.drain_delay),
            max_retry_after: max_retry_after.unwrap_or(d.max_retry_after),
            repeat_window: repeat_window.unwrap_or(d.repeat_window),
        }
    }

    /// The request deadline's four settings, and the rules between them: the default deadline within the cap,
    /// and long enough for one attempt after the reserve.
    fn server_deadline(&mut self, raw: &RawServer, d: &ServerConfig) -> DeadlineSettings {
        use DurationRule::{Any, Positive};
        let read = DeadlineSettings {
            default_timeout: self.duration(
                "server.default_timeout",
                raw.default_timeout.as_ref(),
                d.default_timeout,
                Positive,
            ),
            max_timeout: self.duration(
                "server.max_timeout",
                raw.max_timeout.as_ref(),
                d.max_timeout,
                Positive,
            ),
            reserve: self.duration("server.reserve", raw.reserve.as_ref(), d.reserve, Any),
            min_attempt: self.duration(
                "server.min_attempt",
                raw.min_attempt.as_ref(),
                d.min_attempt,
                Positive,
            ),
        };
        let DeadlineSettings {
            default_timeout,
            max_timeout,
            reserve,
            min_attempt,
        } = read;
        if let (Some(default), Some(max)) = (default_timeout, max_timeout)
            && default > max
        {
            let (value, max) = (
                written(raw.default_timeout.as_ref(), default),
                written(raw.max_timeout.as_ref(), max),
            );
            self.relation(
                "server.default_timeout",
                value,
                "at most",
                "server.max_timeout",
                max,
            );
        }
        if let (Some(default), Some(reserve), Some(min_attempt)) = (default_timeout, reserve, min_attempt)
            && default <= reserve.saturating_add(min_attempt)
        {
            let other = "server.reserve + server.min_attempt";
            let value = written(raw.default_timeout.as_ref(), default);
            let sum = format_duration(reserve.saturating_add(min_attempt)).to_string();
            self.relation("server.default_timeout", value, "more than", other, sum);
        }
        read
    }

    /// Reports `value must be <must_be> <other> (<other_value>)`.
    fn relation(
        &mut self,
        path: &str,
        value: String,
        must_be: &'static str,
        other: &str,
        other_value: String,
    ) {
        let other = other.to_owned();
        self.report(
            path,
            Problem::Relation {
                value,
                must_be,
                other,
                other_value,
            },
        );
    }

    fn principals(&mut self, raw: &[RawPrincipal]) -> Vec<Principal> {
        let mut key_users: HashMap<&str, String> = HashMap::new();
        let mut principals = Vec::with_capacity(raw.len());
        for (i, p) in raw.iter().enumerate() {
            let path = index("principals", i);
            let name = self.name(&join(&path, "name"), p.name.as_ref(), is_ident, IDENT_RULE);
            let key = match (&p.key_env, &p.key_hash_env) {
                (Some(_), Some(_)) => {
                    self.report(
                        join(&path, "key_hash_env"),
                        Problem::Conflict { other: "key_env" },
                    );
                    None
                }
                (None, None) => {
                    self.report(
                        &path,
                        Problem::MissingOneOf {
                            choices: "key_env or key_hash_env",
                        },
                    );
                    None
                }
                (Some(env), None) => Some(("key_env", env, PrincipalKey::Plain { env: env.clone() })),
                (None, Some(env)) => Some(("key_hash_env", env, PrincipalKey::Sha256 { env: env.clone() })),
            };
            let key = key.and_then(|(field, env, key)| {
                let field_path = join(&path, field);
                self.env_name(&field_path, env)?;
                if let Some(first) = key_users.get(env.as_str()) {
                    let problem = Problem::Duplicate {
                        name: env.clone(),
                        first: first.clone(),
                    };
                    self.report(field_path, problem);
                    return None;
                }
                key_users.insert(env, field_path);
                Some(key)
            });
            if let (Some(name), Some(key)) = (name, key) {
                let admin = p.admin.unwrap_or(false);
                principals.push(Principal { name, key, admin });
            }
        }
        self.unique_names("principals", raw.iter().map(|p| p.name.as_deref()));
        principals
    }

    fn store(&mut self, raw: &RawStore) -> StoreConfig {
        let d = StoreConfig::default();
        let location = match (&raw.url, &raw.url_env) {
            (Some(_), Some(_)) => {
                self.report("store.url_env", Problem::Conflict { other: "store.url" });
                None
            }
            (None, None) => Some(d.location.clone()),
            (None, Some(env)) => self
                .env_name("store.url_env", env)
                .map(|env| StoreLocation::Env { env }),
            (Some(url), None) if has_password(url) => {
                let instead = "put the whole URL in an environment variable and name it in store.url_env";
                self.report(
                    "store.url",
                    Problem::CredentialsInUrl {
                        value: redact(url),
                        instead,
                    },
                );
                None
            }
            (Some(url), None) => match StoreKind::of_url(url) {
                Some(kind) => Some(StoreLocation::Url {
                    url: url.clone(),
                    kind,
                }),
                None => {
                    self.report("store.url", Problem::UnsupportedStore { value: redact(url) });
                    None
                }
            },
        };
        let retention = self.duration(
            "store.retention",
            raw.retention.as_ref(),
            d.retention,
            DurationRule::Positive,
        );
        StoreConfig {
            location: location.unwrap_or(d.location),
            retention: retention.unwrap_or(d.retention),
        }
    }

    fn run(&mut self, raw: &RawRun, server: &ServerConfig, raw_server: &RawServer) -> RunConfig {
        let d = RunConfig::default();
        let allowance = self.int("run.retry_allowance", raw.retry_allowance, d.retry_allowance, 0);
        let per_call = self.float(
            "run.retry_allowance_per_call",
            raw.retry_allowance_per_call,
            d.retry_allowance_per_call,
            |x| (0.0..=100.0).contains(&x),
            "between 0 and 100",
        );
        let ttl = self.duration("run.ttl", raw.ttl.as_ref(), d.ttl, DurationRule::Positive);
        // Compared with the server's value as validated (its default if it was invalid and already reported).
        if let Some(ttl) = ttl
            && ttl < server.max_timeout
        {
            let max = written(raw_server.max_timeout.as_ref(), server.max_timeout);
            self.relation(
                "run.ttl",
                written(raw.ttl.as_ref(), ttl),
                "at least",
                "server.max_timeout",
                max,
            );
        }
        let max_runs = self.int("run.max_runs", raw.max_runs, d.max_runs, 1);
        let per_principal = self.int(
            "run.max_runs_per_principal",
            raw.max_runs_per_principal,
            d.max_runs_per_principal.min(max_runs.unwrap_or(d.max_runs)),
            1,
        );
        if let (Some(total), Some(each)) = (max_runs, per_principal)
            && each > total
        {
            self.relation(
                "run.max_runs_per_principal",
                each.to_string(),
                "at most",
                "run.max_runs",
                total.to_string(),
            );
        }
        RunConfig {
            max_runs: max_runs.unwrap_or(d.max_runs),
            max_runs_per_principal: per_principal.unwrap_or(d.max_runs_per_principal),
            retry_allowance: allowance.unwrap_or(d.retry_allowance),
            retry_allowance_per_call: per_call.unwrap_or(d.retry_allowance_per_call),
            ttl: ttl.unwrap_or(d.ttl),
        }
    }
}
