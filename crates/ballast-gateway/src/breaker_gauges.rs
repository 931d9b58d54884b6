//! Each breaker's state, how long it has cut its upstream off, and for how long it was meant to: the gauges the
//! alert "a breaker open longer than twice its `open_for`" compares (deploy/prometheus/ballast-alerts.yml) and
//! the dashboard's "Breaker state" panel shows.
//!
//! Why at scrape time: a breaker runs no timer and the library sets `ballast_breaker_state` after each call, so
//! an upstream nobody calls any more (every call fails fast, or goes to a fallback) would show the state of its
//! last call forever. Read from each breaker's snapshot as `/metrics` is rendered, the gauges say what is true now.
//!
//! - `ballast_breaker_state{target}`: 0 closed, 1 half open, 2 open, as the library sets it.
//! - `ballast_breaker_open_seconds{target}` (`ballast_mcp_server_breaker_open_seconds{server}`): the time spent
//!   open since the breaker last left closed, 0 while closed. Half-open time does not count: a breaker goes
//!   half-open lazily and waits there for a call, so an idle upstream that tripped once stays at one jittered
//!   `open_for` (below twice `open_for`), however long nobody calls it. A probe that fails reopens it and the
//!   count grows again from where it stopped: an upstream that never recovers keeps climbing.
//! - `ballast_breaker_open_for_seconds{target}` (`ballast_mcp_server_breaker_open_for_seconds{server}`): its
//!   configured `open_for`, before jitter.
//!
//! `target` is a tool's name or a model deployment's (`route[index] model`), as in `ballast_breaker_state`; an
//! upstream MCP server's breaker, shared by its tools, is labelled by `server` as
//! `ballast_mcp_server_breaker_state` is.

use ballast::clock;
use ballast_core::{BreakerState, CircuitBreaker, Instant};

use crate::Gateway;

/// Sets the gauges of every breaker of `gateway`: its tools', its model deployments' and its MCP servers' (whose
/// state gauge `admin` sets with their other gauges).
pub(crate) fn set(gateway: &Gateway) {
    let now = clock::now();
    for tool in gateway.inner.tools.iter() {
        target(tool.name(), &read(tool.breaker(), now));
    }
    for route in gateway.inner.models.iter() {
        for index in 0..route.config().deployments.len() {
            if let (Some(name), Some(breaker)) = (route.deployment(index), route.breaker(index)) {
                target(name, &read(breaker, now));
            }
        }
    }
    for server in gateway.inner.mcp.iter() {
        let gauges = read(server.breaker(), now);
        let name = server.name().to_owned();
        metrics::gauge!("ballast_mcp_server_breaker_open_seconds", "server" => name.clone()).set(gauges.open);
        metrics::gauge!("ballast_mcp_server_breaker_open_for_seconds", "server" => name).set(gauges.open_for);
    }
}

/// One breaker's gauges at one instant.
struct Gauges {
    state: f64,
    open: f64,
    open_for: f64,
}

/// The gauges of `breaker` at `now`: its state, its time spent open since it left closed (0 while closed) and its
/// configured open time.
fn read(breaker: &CircuitBreaker, now: Instant) -> Gauges {
    let snapshot = breaker.snapshot(now);
    Gauges {
        state: state_value(snapshot.state),
        open: snapshot.open_time.as_secs_f64(),
        open_for: breaker.config().open_for().as_secs_f64(),
    }
}

/// The value of a state gauge: 0 closed, 1 half open, 2 open.
pub(crate) fn state_value(state: BreakerState) -> f64 {
    match state {
        BreakerState::Closed => 0.0,
        BreakerState::HalfOpen => 1.0,
        BreakerState::Open => 2.0,
    }
}

fn target(name: &str, gauges: &Gauges) {
    metrics::gauge!("ballast_breaker_state", "target" => name.to_owned()).set(gauges.state);
    metrics::gauge!("ballast_breaker_open_seconds", "target" => name.to_owned()).set(gauges.open);
    metrics::gauge!("ballast_breaker_open_for_seconds", "target" => name.to_owned()).set(gauges.open_for);
}
