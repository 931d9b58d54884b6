//! What operators and load balancers ask: `/healthz` (alive), `/readyz` (take traffic: not draining), `/metrics`
//! (Prometheus text) and `/status` (JSON: every model deployment's and tool's breaker, budget, throttle and queue;
//! runs; the store).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use ballast::idempotency::store::IdempotencyStore;
use ballast::layer::AdmissionLayer;
use ballast::{model::ModelClient, tool::ToolClient};
use ballast_core::{AdaptiveThrottle, BreakerState, CircuitBreaker, Instant, Priority, RetryBudget};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::Gateway;

/// How long a probe waits for the store to answer.
const STORE_PROBE: Duration = Duration::from_secs(1);

/// How often the store is probed while the gateway serves.
const STORE_PROBE_EVERY: Duration = Duration::from_secs(1);

/// Probes the store every [`STORE_PROBE_EVERY`] while the gateway serves: its health is checked, not assumed (a
/// SQLite file deleted, replaced or made read-only; a PostgreSQL or Redis gone), and while a probe fails claims
/// are refused — side effects answer `store_unavailable`, nothing runs — until one passes.
///
/// On a store many instances share, each probe also says this instance is alive (the count a lost store's limits
/// are divided by), and is how a lost shared store is found again: runs and limits are shared from the next
/// heartbeat that reaches it.
pub(crate) async fn probe_store(gateway: Gateway) {
    let sharing = gateway.inner.runs.sharing().cloned();
    loop {
        let beat = async {
            if let Some(sharing) = &sharing {
                sharing.heartbeat().await;
            }
        };
        tokio::join!(gateway.inner.checked_store.probe(STORE_PROBE), beat);
        tokio::time::sleep(STORE_PROBE_EVERY).await;
    }
}

/// Liveness: the process answers.
pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: serving and not draining. A store outage does not fail it — tool routes that need the store answer
/// 503 `store_unavailable` themselves, and model routes do not need it — but it says so (`store`), from the last
/// probe.
pub(crate) async fn readyz(State(gateway): State<Gateway>) -> Response {
    if gateway.is_draining() {
        let body = json!({"status": "draining", "detail": "shutting down: send new requests elsewhere"});
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    let health = gateway.inner.checked_store.health();
    if !health.healthy {
        return Json(json!({
            "status": "ready",
            "store": "unavailable",
            "detail": format!(
                "model routes are served; side-effecting tool calls answer store_unavailable until the store is \
                 back: {}",
                health.error.unwrap_or_default()
            ),
        }))
        .into_response();
    }
    Json(json!({"status": "ready", "store": "healthy"})).into_response()
}

/// Prometheus text.
pub(crate) async fn metrics(State(gateway): State<Gateway>) -> Response {
    let Some(handle) = &gateway.inner.metrics else {
        let body = "# no metrics recorder is installed in this process (`ballast serve` installs one)\n";
        return text(StatusCode::OK, body.to_owned());
    };
    mcp_server_metrics(&gateway).await;
    crate::breaker_gauges::set(&gateway);
    text(StatusCode::OK, handle.render())
}

/// Each upstream MCP server's own gauges, set as the page is rendered: its breaker (shared by its tools, whose
/// calls are counted per tool under their served names) and how many tools it listed last.
async fn mcp_server_metrics(gateway: &Gateway) {
    let now = ballast::clock::now();
    for server in gateway.inner.mcp.iter() {
        let name = server.name().to_owned();
        let state = crate::breaker_gauges::state_value(server.breaker().state(now));
        metrics::gauge!("ballast_mcp_server_breaker_state", "server" => name.clone()).set(state);
        let listed = server.snapshot().await.tools.len();
        metrics::gauge!("ballast_mcp_server_tools", "server" => name).set(listed as f64);
    }
}

fn text(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// The state of every part that decides under load.
pub(crate) async fn status(State(gateway): State<Gateway>) -> Json<Value> {
    let now = ballast::clock::now();
    let mut tools: Vec<&ToolClient> = gateway.inner.tools.iter().collect();
    tools.sort_by(|a, b| a.name().cmp(b.name()));
    let tools: serde_json::Map<String, Value> = tools
        .into_iter()
        .map(|tool| (tool.name().to_owned(), tool_status(tool, now)))
        .collect();
    let mut routes: Vec<&ModelClient> = gateway.inner.models.iter().collect();
    routes.sort_by(|a, b| a.name().cmp(b.name()));
    let models: serde_json::Map<String, Value> = routes
        .into_iter()
        .map(|route| (route.name().to_owned(), model_status(route, now)))
        .collect();
    let store = store_health(&gateway);
    let mut mcp_servers = serde_json::Map::new();
    for server in gateway.inner.mcp.iter() {
        mcp_servers.insert(server.name().to_owned(), mcp_server_status(server, now).await);
    }
    Json(json!({
        "draining": gateway.is_draining(),
        "instance": instance(),
        "models": models,
        "tools": tools,
        "mcp_servers": mcp_servers,
        "runs": runs_status(&gateway.inner.runs, now),
        "shared_state": shared_state_status(&gateway.inner.runs),
        "connections": connections_status(&gateway),
        "background_tasks": ballast::background::running(),
        "deferred": crate::deferred::status(gateway.inner.deferred.as_ref()).await,
        "store": store,
        // The last 15 minutes, read from the recorder: none without one.
        "history": gateway.inner.metrics.as_ref().map(|_| gateway.inner.history.to_json()),
        "failures": gateway.inner.metrics.as_ref().map(|_| gateway.inner.history.failures_json()),
    }))
}

/// Which process answered: the host's name (`null` where it cannot be read) and the process id, so that a page
/// behind a balancer can say which instance it shows.
fn instance() -> Value {
    static HOST: std::sync::LazyLock<Option<String>> = std::sync::LazyLock::new(|| {
        ["/proc/sys/kernel/hostname", "/etc/hostname"]
            .iter()
            .filter_map(|path| std::fs::read_to_string(path).ok())
            .map(|name| name.trim().to_owned())
            .find(|name| !name.is_empty())
    });
    json!({"host": HOST.as_deref(), "pid": std::process::id()})
}

/// The connections of `listen` (and, when it is set, of `admin_listen`): open, the cap, and how many were evicted
/// for room, refused, or closed by their header or idle timeout.
fn connections_status(gateway: &Gateway) -> Value {
    let mut status = gateway.inner.connections.to_json();
    if gateway.inner.config.server.admin_listen.is_some() {
        status["admin"] = gateway.inner.admin_connections.to_json();
    }
    status
}

/// The runs: in flight, remembered, evicted for room since the start, and the bounds; where they are kept
/// (`shared` in the store many instances share, `local` in this process: no shared store, or it is lost).
fn runs_status(runs: &ballast::Runs, now: Instant) -> Value {
    let (max, max_per_principal) = runs.bounds();
    let shared = runs.sharing().is_some_and(|sharing| sharing.is_reachable());
    json!({
        "mode": if shared { "shared" } else { "local" },
        "in_flight": runs.live(now),
        "remembered": runs.len(),
        "evicted": runs.evicted_total(),
        "max": max,
        "max_per_principal": max_per_principal,
    })
}

/// The state shared with other instances through the store: whether it is reachable, the instances seen alive,
/// and why not (`null` on a store no other instance can share: SQLite).
fn shared_state_status(runs: &ballast::Runs) -> Value {
    let Some(sharing) = runs.sharing() else {
        return Value::Null;
    };
    let status = sharing.status();
    json!({
        "reachable": status.reachable,
        "instances": status.instances,
        "instance": status.instance,
        "error": status.error,
    })
}

/// An upstream MCP server: its breaker, budget and throttle (shared by its tools), what its last listing said,
/// and the admission of each of its tools called so far.
async fn mcp_server_status(server: &ballast::mcp::McpServerClient, now: Instant) -> Value {
    let snapshot = server.snapshot().await;
    let mut status = upstream_status(server.breaker(), &**server.budget(), server.throttle(), None, now);
    let tools: serde_json::Map<String, Value> = (snapshot.clients.iter())
        .map(|tool| {
            (
                tool.name().to_owned(),
                tool_status(tool, now)["admission"].clone(),
            )
        })
        .collect();
    status["url"] = json!(server.config().url);
    status["listed"] = json!(snapshot.tools);
    status["listed_seconds_ago"] = json!(snapshot.listed_ago.map(|d| d.as_secs_f64()));
    status["listing_error"] = json!(snapshot.failed);
    status["tools"] = Value::Object(tools);
    status
}

fn tool_status(tool: &ToolClient, now: Instant) -> Value {
    upstream_status(
        tool.breaker(),
        &**tool.budget(),
        tool.throttle(),
        tool.admission(),
        now,
    )
}

/// A model route's deployments, in order, each as a tool is.
fn model_status(route: &ModelClient, now: Instant) -> Value {
    let deployments: Vec<Value> = (0..route.config().deployments.len())
        .filter_map(|index| {
            let mut status = upstream_status(
                route.breaker(index)?,
                &**route.budget(index)?,
                route.throttle(index),
                route.admission(index),
                now,
            );
            status["name"] = json!(route.deployment(index));
            if let Some(limits) = route.limits(index) {
                let (requests, tokens) = limits.per_minute();
                status["limits"] = json!({
                    "mode": limits.mode().as_str(),
                    "requests_per_minute": requests,
                    "tokens_per_minute": tokens,
                    "instances": limits.instances(),
                });
            }
            status["api"] = json!(
                route.config().deployments[index]
                    .apis
                    .iter()
                    .map(|a| a.as_str())
                    .collect::<Vec<_>>()
            );
            Some(status)
        })
        .collect();
    json!({"deployments": deployments})
}

/// One upstream's breaker, budget, throttle and admission.
fn upstream_status(
    breaker: &CircuitBreaker,
    budget: &dyn RetryBudget,
    throttle: Option<&std::sync::Arc<AdaptiveThrottle>>,
    admission: Option<&AdmissionLayer>,
    now: Instant,
) -> Value {
    let breaker = breaker.snapshot(now);
    let last = breaker.last_transition.map(|t| {
        json!({
            "from": state_name(t.from),
            "to": state_name(t.to),
            "reason": t.reason.to_string(),
            "seconds_ago": now.saturating_duration_since(t.at).as_secs_f64(),
        })
    });
    let throttle = throttle.map(|throttle| {
        let snapshot = throttle.snapshot(now);
        json!({
            "requests": snapshot.requests,
            "accepts": snapshot.accepts,
            "refusal_probability": snapshot.probability,
            "refused_total": snapshot.refused_total,
        })
    });
    let queue = admission.map(|admission| {
        let by_class = admission.queued_by_class();
        let classes: serde_json::Map<String, Value> = Priority::ALL
            .iter()
            .zip(by_class)
            .map(|(priority, queued)| (priority.as_str().to_owned(), json!(queued)))
            .collect();
        json!({"in_flight": admission.in_flight(), "queued": admission.queued(), "queued_by_class": classes})
    });
    json!({
        "breaker": {
            "state": state_name(breaker.state),
            "open_remaining_ms": breaker.open_remaining.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            "last_transition": last,
            "transitions": breaker.transitions,
            // Half-open: probes let through and not answered yet (none: waiting for a call to probe with).
            "probes_in_flight": breaker.probes_in_flight,
        },
        "retry_budget": {"available": budget.available(now)},
        "throttle": throttle,
        "admission": queue,
    })
}

fn state_name(state: BreakerState) -> &'static str {
    match state {
        BreakerState::Closed => "closed",
        BreakerState::HalfOpen => "half_open",
        BreakerState::Open => "open",
    }
}

/// The store's health, as its probes found it (the last at most a second or two ago).
fn store_health(gateway: &Gateway) -> Value {
    let store = &gateway.inner.checked_store;
    let health = store.health();
    json!({
        "backend": store.backend(),
        "url": gateway.inner.store_url,
        "healthy": health.healthy,
        "error": health.error,
    })
}
