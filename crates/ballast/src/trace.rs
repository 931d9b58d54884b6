//! Trace ids for W3C `traceparent` and the request id of logs and spans (DESIGN.md, "Observability"): drawn
//! from the thread's generator (rand's `ThreadRng`: seeded by the system, a few nanoseconds an id).

use ballast_core::TraceContext;
use rand::RngExt as _;

/// A new trace, for a call that was given none and belongs to no run.
pub(crate) fn new_trace() -> TraceContext {
    let mut rng = rand::rng();
    TraceContext::new(rng.random(), rng.random())
}

/// A new span id: each attempt's, sent as the parent of the upstream's spans.
pub(crate) fn span_id() -> u64 {
    rand::rng().random()
}
