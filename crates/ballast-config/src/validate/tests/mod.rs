//! Validation tests: defaults (here), every rule with its message (`rules`; the listeners, admins and upstream
//! headers in `access`), and parsing: versions, unknown keys, types, files (`parsing`).

mod access;
mod core_agrees;
mod deferred;
mod parsing;
mod rules;

use std::time::Duration;

use ballast_core::{Backoff, BreakerConfig, Jitter, Priority, UpstreamIdempotency};

use crate::*;

pub(super) const TOOL: &str =
    "[[tools]]\nname = \"t\"\nupstream = { method = \"POST\", url = \"http://127.0.0.1:9000/t\" }\n";
pub(super) const MODEL: &str =
    "[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://127.0.0.1:9000/v1\" } ]\n";

pub(super) fn load(body: &str) -> Result<Config, ConfigErrors> {
    Config::from_toml_str(&format!("version = 1\n{body}"))
}

/// The errors `body` produces, each as `path: problem` (the line each rule error carries is tested in `load`).
pub(super) fn errors(body: &str) -> Vec<String> {
    match load(body) {
        Ok(_) => panic!("expected errors for:\n{body}"),
        Err(errors) => errors
            .errors()
            .iter()
            .map(|error| match error {
                ConfigError::Invalid { path, problem, .. } => format!("{path}: {problem}"),
                other => other.to_string(),
            })
            .collect(),
    }
}

/// The single error `body` produces.
pub(super) fn error(body: &str) -> String {
    let all = errors(body);
    assert_eq!(all.len(), 1, "expected one error for:\n{body}\ngot: {all:#?}");
    all.into_iter().next().unwrap_or_default()
}

pub(super) fn tool(extra: &str) -> String {
    format!("{TOOL}{extra}\n")
}

pub(super) fn model(extra: &str) -> String {
    format!("{MODEL}{extra}\n")
}

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(super) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn an_empty_file_is_the_embedded_default_and_valid() {
    let config = load("").unwrap();
    assert_eq!(config, Config::embedded_default());
    assert_eq!(
        validate(&RawConfig::default()).unwrap(),
        Config::embedded_default()
    );
    assert!(config.tools.is_empty() && config.models.is_empty() && config.principals.is_empty());
}

#[test]
fn server_store_and_run_defaults() {
    let c = Config::embedded_default();
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.server.default_timeout, secs(30));
    assert_eq!(c.server.max_timeout, secs(300));
    assert_eq!(c.server.reserve, ms(50));
    assert_eq!(c.server.min_attempt, ms(50));
    assert_eq!(c.server.body_limit, 8 * 1024 * 1024);
    assert_eq!(c.server.grace, secs(10));
    assert_eq!(c.server.admin_listen, None);
    assert_eq!(c.server.drain_delay, secs(1));
    assert_eq!(c.server.drain_delay, DEFAULT_DRAIN_DELAY);
    assert_eq!(c.server.max_retry_after, secs(60));
    assert_eq!(
        c.store.location,
        StoreLocation::Url {
            url: "sqlite://ballast.db".into(),
            kind: StoreKind::Sqlite
        }
    );
    assert_eq!(c.store.retention, secs(24 * 3600));
    assert_eq!(c.run.retry_allowance, 3);
    assert_eq!(c.run.ttl, secs(600));
    assert_eq!(
        (
            c.server.header_timeout,
            c.server.body_timeout,
            c.server.idle_timeout,
            c.server.send_timeout
        ),
        (secs(10), secs(10), secs(75), secs(60))
    );
    assert_eq!(c.server.max_connections, 4096);
    assert_eq!((c.run.max_runs, c.run.max_runs_per_principal), (50_000, 10_000));
}

#[test]
fn connection_and_run_limits_are_checked() {
    for key in ["header_timeout", "body_timeout", "idle_timeout", "send_timeout"] {
        assert_eq!(
            error(&format!("[server]\n{key} = \"0s\"")),
            format!("server.{key}: \"0s\" must be more than zero")
        );
    }
    assert!(
        error("[server]\nmax_connections = 0").starts_with("server.max_connections: 0 must be at least 1")
    );
    assert!(error("[run]\nmax_runs = 0").starts_with("run.max_runs: 0 must be at least 1"));
    assert_eq!(
        error("[run]\nmax_runs = 100\nmax_runs_per_principal = 200"),
        "run.max_runs_per_principal: 200 must be at most run.max_runs (100)"
    );
    // Left out, the per-principal cap is at most the total.
    let c = load("[run]\nmax_runs = 100").unwrap();
    assert_eq!((c.run.max_runs, c.run.max_runs_per_principal), (100, 100));
    let c = load("[server]\nheader_timeout = \"2s\"\nmax_connections = 10").unwrap();
    assert_eq!((c.server.header_timeout, c.server.max_connections), (secs(2), 10));
}

#[test]
fn tool_defaults() {
    let c = load(TOOL).unwrap();
    let t = &c.tools[0];
    assert_eq!(t.name, "t");
    assert_eq!(
        t.upstream,
        Upstream::new(HttpMethod::Post, "http://127.0.0.1:9000/t")
    );
    assert!(!t.side_effects);
    assert_eq!(t.upstream_idempotency, UpstreamIdempotency::None);
    assert_eq!(t.priority, Priority::Critical);
    assert_eq!(t.per_try_timeout, secs(10));
    assert_eq!(t.retry.max_attempts, 3);
    assert_eq!(
        t.retry.backoff,
        Backoff::new(ms(100), secs(2), Jitter::Full).unwrap()
    );
    assert_eq!(t.budget, BudgetConfig::ratio(0.2, 10, secs(10)).unwrap());
    assert_eq!(t.budget, BudgetConfig::default());
    assert_eq!(t.concurrency, 64);
    assert_eq!(t.queue, 256);
    assert_eq!(t.fallback, None);
    let b = t.breaker;
    assert_eq!(b.consecutive_failures(), 7);
    assert_eq!(b.failure_rate(), Some(0.5));
    assert_eq!(
        (b.window(), b.min_calls(), b.slow_call(), b.open_for()),
        (secs(10), 100, None, secs(5))
    );
    assert_eq!(
        (b.open_jitter(), b.half_open_probes(), b.success_threshold()),
        (0.2, 3, 3)
    );
    assert_eq!(b, BreakerConfig::default(), "ballast-core's defaults");
    assert_eq!(t.throttle, Some(ballast_core::ThrottleConfig::default()));
    // The method defaults to POST; side-effecting tools with no deduplication still get 3 attempts (only
    // never-sent errors are retried for them, a rule of the retry decision, not of the config).
    let c =
        load("[[tools]]\nname = \"p\"\nside_effects = true\nupstream = { url = \"http://h/p\" }\n").unwrap();
    assert_eq!(c.tools[0].upstream.method, HttpMethod::Post);
    assert_eq!(c.tools[0].retry.max_attempts, 3);
    assert_eq!(c.tools[0].upstream_idempotency, UpstreamIdempotency::None);
}

#[test]
fn model_defaults() {
    let c = load(MODEL).unwrap();
    let m = &c.models[0];
    assert_eq!(m.per_try_timeout, secs(20));
    assert_eq!(m.primary_share, 0.6);
    assert_eq!(m.retry, RetryConfig::default());
    assert_eq!(m.budget, BudgetConfig::default());
    assert_eq!(m.breaker, BreakerConfig::default());
    assert_eq!(m.throttle, Some(ballast_core::ThrottleConfig::default()));
    assert_eq!(
        (m.priority, m.concurrency, m.queue),
        (Priority::Critical, 64, 1024)
    );
    assert_eq!(m.context.on_overflow, OnOverflow::Error);
    assert_eq!(c.run.retry_allowance_per_call, 0.5);
    let d = &m.deployments[0];
    assert_eq!(
        (d.model.as_str(), d.api_key_env.as_deref()),
        ("m", None),
        "model defaults to the route's name"
    );
    assert_eq!(
        d.per_try_timeout,
        secs(20),
        "inherits the route's per-try timeout"
    );
}

#[test]
fn a_throttle_can_be_turned_off_or_tuned_and_bad_values_are_named() {
    let c = load(&format!("{MODEL}throttle = {{ enabled = false }}\n")).unwrap();
    assert_eq!(c.models[0].throttle, None);
    let c = load(&format!(
        "{MODEL}throttle = {{ accept_multiplier = 1.5, window = \"5s\", min_requests = 3 }}\n"
    ))
    .unwrap();
    let t = c.models[0].throttle.unwrap();
    assert_eq!(
        (t.accept_multiplier(), t.window(), t.min_requests()),
        (1.5, secs(5), 3)
    );
    let errors = load(&format!(
        "{MODEL}throttle = {{ accept_multiplier = 0.5, window = \"0s\" }}\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        errors.contains("models[0].throttle.accept_multiplier: 0.5 must be between 1 and 1000"),
        "{errors}"
    );
    assert!(errors.contains("models[0].throttle.window"), "{errors}");
}

#[test]
fn deployments_inherit_or_override_the_per_try_timeout() {
    let c = load(
        "[[models]]\nname = \"m\"\nper_try_timeout = \"8s\"\ndeployments = [\n  { base_url = \"https://a/v1\" },\n  \
         { base_url = \"http://b/v1\", model = \"mock\", per_try_timeout = \"2s\" } ]\n",
    )
    .unwrap();
    let d = &c.models[0].deployments;
    assert_eq!((d[0].per_try_timeout, d[1].per_try_timeout), (secs(8), secs(2)));
    assert_eq!(d[1].model, "mock");
}

#[test]
fn deployments_speak_openais_apis_unless_they_name_theirs() {
    let c = load(
        "[[models]]\nname = \"m\"\ndeployments = [\n  { base_url = \"https://a/v1\" },\n  \
         { base_url = \"http://b/v1\", api = [\"chat\", \"embeddings\"] },\n  \
         { base_url = \"https://api.anthropic.com/v1\", api = [\"messages\"] } ]\n",
    )
    .unwrap();
    let d = &c.models[0].deployments;
    assert_eq!(d[0].apis, ApiSet::OPENAI);
    assert!((Api::ALL.iter()).all(|api| d[0].apis.contains(*api) == (*api != Api::Messages)));
    assert_eq!(d[2].apis.iter().collect::<Vec<_>>(), [Api::Messages]);
    assert!(!d[1].apis.contains(Api::Responses));
    assert_eq!(d[1].apis.iter().collect::<Vec<_>>(), [Api::Chat, Api::Embeddings]);
}

#[test]
fn deployment_limits_name_a_rate_and_default_to_sharing_on_store_loss() {
    let c = load(
        "[[models]]\nname = \"m\"\ndeployments = [\n  { base_url = \"https://a/v1\", limits = { requests_per_minute = 500 } },\n  \
         { base_url = \"https://b/v1\", limits = { tokens_per_minute = 90000, burst = \"0s\", on_store_loss = \"refuse\" } } ]\n",
    )
    .unwrap();
    let d = &c.models[0].deployments;
    assert_eq!(
        d[0].limits,
        Some(Limits {
            requests_per_minute: Some(500),
            tokens_per_minute: None,
            burst: secs(1),
            on_store_loss: OnStoreLoss::Share,
        })
    );
    let second = d[1].limits.unwrap();
    assert_eq!(
        (second.tokens_per_minute, second.burst),
        (Some(90_000), Duration::ZERO)
    );
    assert_eq!(second.on_store_loss, OnStoreLoss::Refuse);
    let wrong = load(
        "[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"https://a/v1\", limits = { burst = \"2s\" } },\n  \
         { base_url = \"https://b/v1\", limits = { requests_per_minute = 0, on_store_loss = \"hope\" } } ]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        wrong.contains(
            "models[0].deployments[0].limits: needs one of requests_per_minute or tokens_per_minute"
        ),
        "{wrong}"
    );
    assert!(
        wrong.contains("models[0].deployments[1].limits.requests_per_minute: 0 must be at least 1"),
        "{wrong}"
    );
    assert!(
        wrong.contains("models[0].deployments[1].limits.on_store_loss"),
        "{wrong}"
    );
}

#[test]
fn budget_kinds_and_their_defaults() {
    let c = load(&tool("budget = { kind = \"token_bucket\" }")).unwrap();
    assert_eq!(c.tools[0].budget, BudgetConfig::token_bucket(10, 1.0).unwrap());
    assert_eq!(c.tools[0].budget, BudgetConfig::default_token_bucket());
    let c = load(&tool("budget = { kind = \"ratio\", ratio = 0.1 }")).unwrap();
    assert_eq!(c.tools[0].budget, BudgetConfig::ratio(0.1, 10, secs(10)).unwrap());
    let c = load(&tool(
        "budget = { kind = \"token_bucket\", capacity = 3, refill_per_sec = 0 }",
    ))
    .unwrap();
    assert_eq!(c.tools[0].budget, BudgetConfig::token_bucket(3, 0.0).unwrap());
    // The extremes ballast-core accepts load.
    let c = load(&tool(
        "budget = { kind = \"ratio\", ratio = 0, min_per_sec = 0, window = \"1h\" }",
    ))
    .unwrap();
    assert_eq!(
        c.tools[0].budget,
        BudgetConfig::ratio(0.0, 0, secs(3600)).unwrap()
    );
    let c = load(&tool(
        "budget = { kind = \"token_bucket\", capacity = 4294967295, refill_per_sec = 1e9 }",
    ))
    .unwrap();
    assert_eq!(
        c.tools[0].budget,
        BudgetConfig::token_bucket(u32::MAX, 1e9).unwrap()
    );
    let e = error(&tool("budget = { ratio = 0.1 }"));
    assert!(e.starts_with("tools[0].budget: missing field `kind`"), "{e}");
}

#[test]
fn breaker_triggers_turn_off_with_zero() {
    let c = load(&tool("breaker = { consecutive_failures = 0, failure_rate = 0 }")).unwrap();
    let b = c.tools[0].breaker;
    assert_eq!((b.consecutive_failures(), b.failure_rate()), (0, None));
    assert!(!b.can_open());
    assert_eq!(b.min_calls_per_second(), None);
    let c = load(&tool("breaker = { consecutive_failures = 0 }")).unwrap();
    assert!(c.tools[0].breaker.can_open(), "the failure rate still trips it");
}

#[test]
fn success_threshold_follows_half_open_probes() {
    let c = load(&tool("breaker = { half_open_probes = 5 }")).unwrap();
    let b = c.tools[0].breaker;
    assert_eq!((b.half_open_probes(), b.success_threshold()), (5, 5));
    let c = load(&tool(
        "breaker = { half_open_probes = 5, success_threshold = 2, slow_call = \"3s\" }",
    ))
    .unwrap();
    assert_eq!(c.tools[0].breaker.success_threshold(), 2);
    assert_eq!(c.tools[0].breaker.slow_call(), Some(secs(3)));
    // More successes than probes: the probes go through in waves (ballast-core allows it, and so does the file).
    let c = load(&tool("breaker = { half_open_probes = 1, success_threshold = 3 }")).unwrap();
    let b = c.tools[0].breaker;
    assert_eq!((b.half_open_probes(), b.success_threshold()), (1, 3));
}

#[test]
fn values_are_read_as_written() {
    let c = load(
        "[server]\nlisten = \"[::1]:9090\"\ndefault_timeout = \"1m30s\"\nbody_limit = \"512KiB\"\n\
         reserve = \"0s\"\ngrace = \"0s\"\nmax_retry_after = \"0s\"\n[store]\nurl = \"redis://127.0.0.1:6379\"\n\
         [run]\nretry_allowance = 0\n",
    )
    .unwrap();
    assert_eq!(c.server.listen.to_string(), "[::1]:9090");
    assert_eq!(
        (c.server.default_timeout, c.server.body_limit),
        (secs(90), 512 * 1024)
    );
    assert_eq!(
        (c.server.reserve, c.server.grace, c.server.max_retry_after),
        (Duration::ZERO, Duration::ZERO, Duration::ZERO)
    );
    assert_eq!(
        c.store.location,
        StoreLocation::Url {
            url: "redis://127.0.0.1:6379".into(),
            kind: StoreKind::Redis
        }
    );
    assert_eq!(c.run.retry_allowance, 0);
    let c = load(&tool(
        "priority = \"critical_plus\"\nside_effects = true\nupstream_idempotency = \"keyed_replays_errors\"\n\
         retry = { max_attempts = 1, base = \"50ms\", cap = \"50ms\", jitter = \"decorrelated\" }\nqueue = 0",
    ))
    .unwrap();
    let t = &c.tools[0];
    assert_eq!(
        (t.priority, t.upstream_idempotency),
        (Priority::CriticalPlus, UpstreamIdempotency::KeyedReplaysErrors)
    );
    assert_eq!(
        t.retry,
        RetryConfig {
            max_attempts: 1,
            backoff: Backoff::decorrelated(ms(50), ms(50)).unwrap()
        }
    );
    assert_eq!(t.queue, 0);
}

#[test]
fn every_store_url_form_is_accepted() {
    let cases = [
        ("sqlite://ballast.db", StoreKind::Sqlite),
        ("sqlite::memory:", StoreKind::Sqlite),
        ("redis://127.0.0.1:6379", StoreKind::Redis),
        ("postgres://ballast@db/ballast", StoreKind::Postgres),
        ("postgresql://db/ballast", StoreKind::Postgres),
    ];
    for (url, kind) in cases {
        let c = load(&format!("[store]\nurl = {url:?}\n")).unwrap();
        assert_eq!(
            c.store.location,
            StoreLocation::Url {
                url: url.into(),
                kind
            },
            "{url}"
        );
    }
    let c = load("[store]\nurl_env = \"BALLAST_STORE_URL\"\n").unwrap();
    assert_eq!(
        c.store.location,
        StoreLocation::Env {
            env: "BALLAST_STORE_URL".into()
        }
    );
}
