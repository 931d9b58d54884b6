//! A typed [`Config`] back to a [`RawConfig`] with every value written out, defaults included: what
//! `ballast plan` can print as the effective configuration, and what the round-trip tests compare.

use crate::raw::{
    HumanValue, RawBreaker, RawBudget, RawConfig, RawContext, RawDeferred, RawDeployment, RawHeaderEnv,
    RawHeaderValue, RawHeaders, RawLimits, RawMcpServer, RawMcpTool, RawModel, RawPrincipal, RawRetry,
    RawRun, RawServer, RawStore, RawTelemetry, RawThrottle, RawTool, RawToolDefer, RawUpstream,
    SCHEMA_VERSION,
};
use ballast_core::{BreakerConfig, ThrottleConfig};

use crate::typed::{
    BudgetConfig, Config, DeferredConfig, HeaderValueSource, McpServerConfig, ModelRoute, PrincipalKey,
    RetryConfig, StoreLocation, ToolConfig, ToolFallback, Upstream,
};
use crate::{format_duration, format_size};

fn duration(d: std::time::Duration) -> Option<HumanValue> {
    Some(HumanValue::Text(format_duration(d).to_string()))
}

impl From<&Config> for RawConfig {
    fn from(config: &Config) -> Self {
        let s = &config.server;
        let (url, url_env) = match &config.store.location {
            StoreLocation::Url { url, .. } => (Some(url.clone()), None),
            StoreLocation::Env { env } => (None, Some(env.clone())),
        };
        RawConfig {
            version: SCHEMA_VERSION,
            server: RawServer {
                listen: Some(s.listen.to_string()),
                admin_listen: s.admin_listen.map(|addr| addr.to_string()),
                default_timeout: duration(s.default_timeout),
                max_timeout: duration(s.max_timeout),
                reserve: duration(s.reserve),
                min_attempt: duration(s.min_attempt),
                body_limit: Some(HumanValue::Text(format_size(s.body_limit).to_string())),
                grace: duration(s.grace),
                drain_delay: duration(s.drain_delay),
                max_retry_after: duration(s.max_retry_after),
                repeat_window: duration(s.repeat_window),
                header_timeout: duration(s.header_timeout),
                body_timeout: duration(s.body_timeout),
                idle_timeout: duration(s.idle_timeout),
                send_timeout: duration(s.send_timeout),
                max_connections: Some(i64::from(s.max_connections)),
            },
            principals: (config.principals.iter())
                .map(|p| {
                    let (key_env, key_hash_env) = match &p.key {
                        PrincipalKey::Plain { env } => (Some(env.clone()), None),
                        PrincipalKey::Sha256 { env } => (None, Some(env.clone())),
                    };
                    RawPrincipal {
                        name: Some(p.name.clone()),
                        key_env,
                        key_hash_env,
                        admin: Some(p.admin),
                    }
                })
                .collect(),
            store: RawStore {
                url,
                url_env,
                retention: duration(config.store.retention),
            },
            run: RawRun {
                retry_allowance: Some(i64::from(config.run.retry_allowance)),
                retry_allowance_per_call: Some(config.run.retry_allowance_per_call),
                ttl: duration(config.run.ttl),
                max_runs: Some(i64::from(config.run.max_runs)),
                max_runs_per_principal: Some(i64::from(config.run.max_runs_per_principal)),
            },
            deferred: raw_deferred(&config.deferred),
            models: config.models.iter().map(raw_model).collect(),
            tools: config.tools.iter().map(raw_tool).collect(),
            mcp_servers: config.mcp_servers.iter().map(raw_mcp_server).collect(),
            telemetry: (config.telemetry.as_ref())
                .map(|t| RawTelemetry {
                    endpoint: Some(t.endpoint.clone()),
                    protocol: Some(t.protocol.as_str().to_owned()),
                    sampling: Some(t.sampling),
                    service_name: Some(t.service_name.clone()),
                })
                .unwrap_or_default(),
        }
    }
}

fn raw_model(m: &ModelRoute) -> RawModel {
    RawModel {
        name: Some(m.name.clone()),
        deployments: (m.deployments.iter())
            .map(|d| RawDeployment {
                base_url: Some(d.base_url.clone()),
                model: Some(d.model.clone()),
                api_key_env: d.api_key_env.clone(),
                per_try_timeout: duration(d.per_try_timeout),
                api: Some(d.apis.iter().map(|api| api.as_str().to_owned()).collect()),
                limits: d.limits.map(|limits| RawLimits {
                    requests_per_minute: limits.requests_per_minute.map(i64::from),
                    tokens_per_minute: limits.tokens_per_minute.map(i64::from),
                    burst: duration(limits.burst),
                    on_store_loss: Some(limits.on_store_loss.as_str().to_owned()),
                }),
            })
            .collect(),
        per_try_timeout: duration(m.per_try_timeout),
        primary_share: Some(m.primary_share),
        stream_idle_timeout: duration(m.stream_idle_timeout),
        retry: Some(raw_retry(&m.retry)),
        budget: Some(raw_budget(&m.budget)),
        breaker: Some(raw_breaker(&m.breaker)),
        throttle: Some(raw_throttle(m.throttle.as_ref())),
        priority: Some(m.priority.as_str().to_owned()),
        concurrency: Some(i64::from(m.concurrency)),
        queue: Some(i64::from(m.queue)),
        context: Some(RawContext {
            on_overflow: Some(m.context.on_overflow.as_str().to_owned()),
        }),
    }
}

fn raw_tool(t: &ToolConfig) -> RawTool {
    let (fallback_tool, fallback_response) = match &t.fallback {
        None => (None, None),
        Some(ToolFallback::Tool(name)) => (Some(name.clone()), None),
        Some(ToolFallback::Response(json)) => (None, json_to_toml(json)),
    };
    RawTool {
        name: Some(t.name.clone()),
        description: t.description.clone(),
        input_schema: t.input_schema.as_ref().and_then(json_to_toml),
        upstream: Some(raw_upstream(&t.upstream)),
        side_effects: Some(t.side_effects),
        // Written where it applies, and where it does not but is set (a config built in code): validation
        // refuses deduplication on a tool without side effects, and must see it to say so.
        upstream_idempotency: (t.side_effects || t.upstream_idempotency.deduplicates())
            .then(|| t.upstream_idempotency.as_str().to_owned()),
        priority: Some(t.priority.as_str().to_owned()),
        per_try_timeout: duration(t.per_try_timeout),
        retry: Some(raw_retry(&t.retry)),
        budget: Some(raw_budget(&t.budget)),
        breaker: Some(raw_breaker(&t.breaker)),
        throttle: Some(raw_throttle(t.throttle.as_ref())),
        concurrency: Some(i64::from(t.concurrency)),
        queue: Some(i64::from(t.queue)),
        fallback_tool,
        fallback_response,
        // Written only when accepted: the table's presence is what says so. A tool that does not accept deferral
        // takes [deferred]'s settings, which validation fills in again.
        defer: t.defer.accepted.then(|| RawToolDefer {
            ttl: duration(t.defer.ttl),
            max_attempts: Some(i64::from(t.defer.max_attempts)),
            concurrency: Some(i64::from(t.defer.concurrency)),
        }),
    }
}

fn raw_deferred(d: &DeferredConfig) -> RawDeferred {
    RawDeferred {
        concurrency: Some(i64::from(d.concurrency)),
        ttl: duration(d.ttl),
        max_attempts: Some(i64::from(d.max_attempts)),
        base: duration(d.base),
        cap: duration(d.cap),
        callback_url: d.callback.as_ref().map(|c| c.url.clone()),
        callback_secret_env: d.callback.as_ref().map(|c| c.secret_env.clone()),
    }
}

fn raw_mcp_server(s: &McpServerConfig) -> RawMcpServer {
    let t = &s.tool;
    let headers = raw_upstream(&Upstream {
        headers: s.headers.clone(),
        ..t.upstream.clone()
    })
    .headers;
    RawMcpServer {
        name: Some(s.name.clone()),
        url: Some(s.url.clone()),
        headers,
        prefix: Some(s.prefix.clone()),
        trust_annotations: Some(s.trust_annotations),
        side_effects: Some(t.side_effects),
        upstream_idempotency: (t.side_effects || t.upstream_idempotency.deduplicates())
            .then(|| t.upstream_idempotency.as_str().to_owned()),
        priority: Some(t.priority.as_str().to_owned()),
        per_try_timeout: duration(t.per_try_timeout),
        retry: Some(raw_retry(&t.retry)),
        budget: Some(raw_budget(&t.budget)),
        breaker: Some(raw_breaker(&t.breaker)),
        throttle: Some(raw_throttle(t.throttle.as_ref())),
        concurrency: Some(i64::from(t.concurrency)),
        queue: Some(i64::from(t.queue)),
        tools: (s.overrides.iter())
            .map(|o| {
                let raw = RawMcpTool {
                    side_effects: o.side_effects,
                    priority: o.priority.map(|p| p.as_str().to_owned()),
                    per_try_timeout: o.per_try_timeout.and_then(duration),
                    description: o.description.clone(),
                    hidden: o.hidden.then_some(true),
                };
                (o.name.clone(), raw)
            })
            .collect(),
    }
}

fn raw_upstream(u: &Upstream) -> RawUpstream {
    let headers = (u.headers.iter())
        .map(|header| {
            let value = match &header.value {
                HeaderValueSource::Literal(text) => RawHeaderValue::Literal(text.clone()),
                HeaderValueSource::Env { env, prefix } => RawHeaderValue::Env(RawHeaderEnv {
                    env: Some(env.clone()),
                    prefix: Some(prefix.clone()),
                }),
            };
            (header.name.clone(), value)
        })
        .collect();
    RawUpstream {
        method: Some(u.method.as_str().to_owned()),
        url: Some(u.url.clone()),
        headers: RawHeaders(headers),
    }
}

fn raw_retry(r: &RetryConfig) -> RawRetry {
    RawRetry {
        max_attempts: Some(i64::from(r.max_attempts)),
        base: duration(r.backoff.base()),
        cap: duration(r.backoff.cap()),
        jitter: Some(r.backoff.jitter().as_str().to_owned()),
    }
}

fn raw_budget(b: &BudgetConfig) -> RawBudget {
    match *b {
        BudgetConfig::Ratio {
            ratio,
            min_per_sec,
            window,
        } => RawBudget::Ratio {
            ratio: Some(ratio),
            min_per_sec: Some(i64::from(min_per_sec)),
            window: duration(window),
        },
        BudgetConfig::TokenBucket {
            capacity,
            refill_per_sec,
        } => RawBudget::TokenBucket {
            capacity: Some(i64::from(capacity)),
            refill_per_sec: Some(refill_per_sec),
        },
    }
}

fn raw_throttle(t: Option<&ThrottleConfig>) -> RawThrottle {
    match t {
        None => RawThrottle {
            enabled: Some(false),
            ..RawThrottle::default()
        },
        Some(t) => RawThrottle {
            enabled: Some(true),
            accept_multiplier: Some(t.accept_multiplier()),
            window: duration(t.window()),
            min_requests: Some(i64::from(t.min_requests())),
        },
    }
}

fn raw_breaker(b: &BreakerConfig) -> RawBreaker {
    RawBreaker {
        // 0 is the file's "off", for both triggers.
        consecutive_failures: Some(i64::from(b.consecutive_failures())),
        consecutive_spread: duration(b.consecutive_spread()),
        failure_rate: Some(b.failure_rate().unwrap_or(0.0)),
        window: duration(b.window()),
        min_calls: Some(i64::from(b.min_calls())),
        slow_call: b.slow_call().and_then(duration),
        open_for: duration(b.open_for()),
        open_jitter: Some(b.open_jitter()),
        half_open_probes: Some(i64::from(b.half_open_probes())),
        success_threshold: Some(i64::from(b.success_threshold())),
    }
}

/// JSON to TOML for `fallback_response`. TOML has no null: a null (only possible in a config built in code)
/// is left out of its table or array.
fn json_to_toml(json: &serde_json::Value) -> Option<toml::Value> {
    use serde_json::Value as Json;
    Some(match json {
        Json::Null => return None,
        Json::Bool(b) => toml::Value::Boolean(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => toml::Value::String(s.clone()),
        Json::Array(items) => toml::Value::Array(items.iter().filter_map(json_to_toml).collect()),
        Json::Object(map) => toml::Value::Table(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), json_to_toml(v)?)))
                .collect(),
        ),
    })
}
