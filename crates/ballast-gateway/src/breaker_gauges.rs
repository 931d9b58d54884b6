//! How long each breaker has cut its upstream off, and for how long it was meant to: the two gauges the alert
//! "a breaker open longer than twice its `open_for`" compares (deploy/prometheus/ballast-alerts.yml).
//!
//! Why at scrape time: a breaker runs no timer and `ballast_breaker_state` is set after each call, so an upstream
//! nobody calls any more (every call fails fast, or goes to a fallback) would show the state of its last call
//! forever. Read from each breaker's snapshot as `/metrics` is rendered, the gauges say what is true now.
//!
//! - `ballast_breaker_open_seconds{target}` (`ballast_mcp_server_breaker_open_seconds{server}`): seconds since the
//!   breaker last left closed, 0 while closed. A probe that fails reopens it without restarting the count: an
//!   upstream that never recovers keeps climbing, however many open periods that takes.
//! - `ballast_breaker_open_for_seconds{target}` (`ballast_mcp_server_breaker_open_for_seconds{server}`): its
//!   configured `open_for`, before jitter.
//!
//! `target` is a tool's name or a model deployment's (`route[index] model`), as in `ballast_breaker_state`; an
//! upstream MCP server's breaker, shared by its tools, is labelled by `server` as
//! `ballast_mcp_server_breaker_state` is.

use ballast::clock;
use ballast_core::{CircuitBreaker, Instant};

use crate::Gateway;

/// Sets both gauges of every breaker of `gateway`: its tools', its model deployments' and its MCP servers'.
pub(crate) fn set(gateway: &Gateway) {
    let now = clock::now();
    for tool in gateway.inner.tools.iter() {
        let (open, open_for) = seconds(tool.breaker(), now);
        target(tool.name(), open, open_for);
    }
    for route in gateway.inner.models.iter() {
        for index in 0..route.config().deployments.len() {
            if let (Some(name), Some(breaker)) = (route.deployment(index), route.breaker(index)) {
                let (open, open_for) = seconds(breaker, now);
                target(name, open, open_for);
            }
        }
    }
    for server in gateway.inner.mcp.iter() {
        let (open, open_for) = seconds(server.breaker(), now);
        let name = server.name().to_owned();
        metrics::gauge!("ballast_mcp_server_breaker_open_seconds", "server" => name.clone()).set(open);
        metrics::gauge!("ballast_mcp_server_breaker_open_for_seconds", "server" => name).set(open_for);
    }
}

/// The seconds `breaker` has been out of closed at `now` (0 while closed) and its configured open time.
fn seconds(breaker: &CircuitBreaker, now: Instant) -> (f64, f64) {
    let snapshot = breaker.snapshot(now);
    let open = snapshot
        .left_closed
        .map_or(0.0, |since| now.saturating_duration_since(since).as_secs_f64());
    (open, breaker.config().open_for().as_secs_f64())
}

fn target(name: &str, open: f64, open_for: f64) {
    metrics::gauge!("ballast_breaker_open_seconds", "target" => name.to_owned()).set(open);
    metrics::gauge!("ballast_breaker_open_for_seconds", "target" => name.to_owned()).set(open_for);
}
