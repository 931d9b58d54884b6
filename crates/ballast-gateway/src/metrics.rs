//! The gateway's Prometheus recorder: installed once per process by [`run`](crate::run), rendered at `/metrics`.
//! The library emits every metric through the `metrics` facade (DESIGN.md, "Observability"); here they are given
//! their help text and buckets, and the counters a scrape should see from the start are registered at zero, so a
//! dashboard's `rate()` has a series before the first retry or shed, and an alert's `increase()` sees the first
//! one rise from 0 (a series born with its first event has no earlier sample: `increase()` would miss it).

use std::time::Duration;

use ballast_config::Config;
use ballast_core::{Priority, ShedReason};
use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Seconds: from a cache hit to a stuck upstream.
const SECONDS_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];

/// Installs the Prometheus recorder as the process's (once: a second call fails), with the metrics of `config`'s
/// tools described and registered.
pub(crate) fn install(config: &Config) -> Result<PrometheusHandle, String> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &SECONDS_BUCKETS)
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| e.to_string())?;
    describe();
    for tool in &config.tools {
        let target = tool.name.clone();
        counter!("ballast_retry_budget_exhausted_total", "target" => target.clone()).absolute(0);
        counter!("ballast_throttled_total", "target" => target.clone()).absolute(0);
        counter!("ballast_sdk_retries_total", "target" => target.clone()).absolute(0);
        critical_sheds(&target);
        if tool.side_effects {
            // Its deferred queue (named after the tool), should the store keep one: what BallastOutcomeUnknown reads.
            counter!("ballast_deferred_total", "queue" => target, "outcome" => "outcome_unknown").absolute(0);
        }
    }
    for route in &config.models {
        counter!("ballast_sdk_retries_total", "target" => route.name.clone()).absolute(0);
        counter!("ballast_fallbacks_total", "route" => route.name.clone()).absolute(0);
        for index in 0..route.deployments.len() {
            let target = ballast::model::deployment_name(route, index);
            counter!("ballast_retry_budget_exhausted_total", "target" => target.clone()).absolute(0);
            counter!("ballast_throttled_total", "target" => target.clone()).absolute(0);
            critical_sheds(&target);
        }
    }
    for result in ["claimed", "replayed", "conflict", "mismatch", "unknown"] {
        counter!("ballast_idempotency_total", "result" => result).absolute(0);
    }
    counter!("ballast_runs_evicted_total").absolute(0);
    for listener in ["main", "admin"] {
        for event in ["evicted", "refused", "header_timeout", "idle_timeout"] {
            connection_event(listener, event, 0);
        }
    }
    Ok(handle)
}

/// `ballast_shed_total` of `target` at zero for the two classes BallastCriticalShed watches, with every reason.
fn critical_sheds(target: &str) {
    for priority in [Priority::Critical, Priority::CriticalPlus] {
        for reason in ShedReason::NAMES {
            counter!("ballast_shed_total", "target" => target.to_owned(), "priority" => priority.as_str(), "reason" => reason)
                .absolute(0);
        }
    }
}

/// How often [`upkeep`] folds the histograms' samples into their buckets.
const UPKEEP_EVERY: Duration = Duration::from_secs(1);

/// Folds the samples the recorder holds into the histograms' buckets, every [`UPKEEP_EVERY`], until dropped. The
/// recorder keeps every sample it is given until a render or an upkeep (the exporter's own listener runs one every
/// 5 s; the gateway renders through its handle, so it runs them itself): without this, memory grows with every
/// request between scrapes — a gateway nobody scraped held 55 MiB after bench overhead's nine minutes of load.
pub(crate) async fn upkeep(handle: PrometheusHandle) {
    let mut every = tokio::time::interval(UPKEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        handle.run_upkeep();
    }
}

/// `ballast_connections_total{listener, event}`: a connection evicted for room, refused at the cap, or closed by
/// its header or idle timeout (`listener`: `main` is `server.listen`, `admin` is `server.admin_listen`).
pub(crate) fn connection_event(listener: &'static str, event: &'static str, count: u64) {
    counter!("ballast_connections_total", "listener" => listener, "event" => event).increment(count);
}

/// `ballast_connections_open{listener}`: connections open now.
pub(crate) fn connections_open(listener: &'static str, change: f64) {
    metrics::gauge!("ballast_connections_open", "listener" => listener).increment(change);
}

/// Help text for every metric.
fn describe() {
    describe_counter!(
        "ballast_connections_total",
        "Connections evicted for room, refused at the cap, or closed by their header or idle timeout."
    );
    describe_gauge!(
        "ballast_mcp_server_breaker_state",
        "An upstream MCP server's circuit breaker (0 closed, 1 half open, 2 open), shared by its tools."
    );
    describe_gauge!(
        "ballast_mcp_server_tools",
        "The tools an upstream MCP server listed last (0 until it was listed)."
    );
    describe_gauge!("ballast_connections_open", "Connections open now, per listener.");
    describe_counter!(
        "ballast_runs_evicted_total",
        "Runs forgotten for room (run.max_runs, run.max_runs_per_principal)."
    );
    describe_counter!(
        "ballast_requests_total",
        "Calls by route, target and outcome (ok, fallback, or the stable code)."
    );
    describe_counter!("ballast_attempts_total", "Attempts sent to upstreams.");
    describe_counter!(
        "ballast_retries_total",
        "Retries, by target and the outcome that caused them."
    );
    describe_counter!(
        "ballast_retry_budget_exhausted_total",
        "Retries the upstream's retry budget refused."
    );
    describe_gauge!(
        "ballast_breaker_state",
        "Circuit breaker state: 0 closed, 1 half-open, 2 open (set after each call and at scrape time)."
    );
    describe_gauge!(
        "ballast_breaker_open_seconds",
        Unit::Seconds,
        "Seconds the breaker has been open since it last left closed (0 while closed; half-open time not counted; a failed probe adds its next open period), read at scrape time."
    );
    describe_gauge!(
        "ballast_breaker_open_for_seconds",
        Unit::Seconds,
        "The breaker's configured open_for (before jitter): alert when open seconds pass twice this."
    );
    describe_gauge!(
        "ballast_mcp_server_breaker_open_seconds",
        Unit::Seconds,
        "Seconds an upstream MCP server's breaker has been open since it last left closed (0 while closed; half-open time not counted), read at scrape time."
    );
    describe_gauge!(
        "ballast_mcp_server_breaker_open_for_seconds",
        Unit::Seconds,
        "An upstream MCP server's breaker's configured open_for (before jitter)."
    );
    describe_counter!(
        "ballast_throttled_total",
        "Attempts the adaptive throttle refused locally."
    );
    describe_counter!(
        "ballast_shed_total",
        "Calls shed by admission, by priority and reason."
    );
    describe_counter!(
        "ballast_deadline_exceeded_total",
        "Calls that ended at their deadline."
    );
    describe_counter!(
        "ballast_idempotency_total",
        "Keyed requests by what the idempotency layer did."
    );
    describe_counter!(
        "ballast_tokens_total",
        "Model tokens, spent on answers and on failed attempts."
    );
    describe_counter!(
        "ballast_fallbacks_total",
        "Calls answered by a fallback (a later model deployment, a fallback tool, a static response)."
    );
    describe_counter!(
        "ballast_sdk_retries_total",
        "Requests that were a client's own retry: x-stainless-retry-count > 0, or a repeat of a final failure answered from it."
    );
    describe_histogram!(
        "ballast_request_duration_seconds",
        Unit::Seconds,
        "Total time of a call."
    );
    describe_histogram!(
        "ballast_overhead_seconds",
        Unit::Seconds,
        "Time of a call not spent waiting on upstreams: what Ballast itself costs."
    );
}

/// Deferred operations waiting or in progress, per queue and class (`/status` has the same from the store).
pub(crate) fn deferred_depth(queue: &str, class: &'static str, depth: f64) {
    metrics::gauge!("ballast_deferred_depth", "queue" => queue.to_owned(), "priority" => class).set(depth);
}

/// The age of a queue's oldest deferred operation that has not ended, in seconds (0 when none waits).
pub(crate) fn deferred_oldest(queue: &str, seconds: f64) {
    metrics::gauge!("ballast_deferred_oldest_seconds", "queue" => queue.to_owned()).set(seconds);
}

/// Counts a request that is an SDK's own retry.
pub(crate) fn sdk_retry(tool: &str, retry: Option<u32>) {
    if retry.is_some_and(|n| n > 0) {
        counter!("ballast_sdk_retries_total", "target" => tool.to_owned()).increment(1);
    }
}
