//! Request statistics: what every endpoint answered, and how many requests it held at once.
//!
//! A benchmark compares client strategies by what the upstream saw (a retry storm shows as requests and
//! `shed_capacity` answers), so every request that reaches a faulty endpoint ends in exactly one bucket: its HTTP
//! status, or what happened instead of one (`hang`, `reset`, `commit_then_lose`, `stream_cut`, `stream_error`: a
//! `200` stream that failed after content; over MCP `garbage`, `is_error` and `protocol_error`), or why the front
//! door refused it (`outage`, `shed_capacity`), or `client_gone` when the client left before any of these. A tool
//! called over MCP counts under the tool's name, pooled with its HTTP calls.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::lock::lock;

/// How one request ended, as a stats bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Answered with this status (injected or not).
    Status(u16),
    /// Refused during an outage window (503).
    Outage,
    /// Refused by the capacity limit (503).
    ShedCapacity,
    /// Never answered.
    Hang,
    /// Connection reset without an answer.
    Reset,
    /// Executed, then the answer was lost.
    CommitThenLose,
    /// A stream cut before `[DONE]`.
    StreamCut,
    /// A stream that failed with an error event after content (`stream.error`).
    StreamError,
    /// Over MCP: a `200` whose body is not JSON-RPC (`garbage`).
    Garbage,
    /// Over MCP: a result with `isError: true` drawn as a fault (`is_error`).
    IsError,
    /// Over MCP: a call the protocol layer answered itself without calling the tool (a version, header or
    /// `_meta` mistake).
    ProtocolError,
    /// The client went away before the request ended in another bucket.
    ClientGone,
}

impl Outcome {
    fn bucket(self) -> String {
        match self {
            Outcome::Status(status) => status.to_string(),
            Outcome::Outage => "outage".into(),
            Outcome::ShedCapacity => "shed_capacity".into(),
            Outcome::Hang => "hang".into(),
            Outcome::Reset => "reset".into(),
            Outcome::CommitThenLose => "commit_then_lose".into(),
            Outcome::StreamCut => "stream_cut".into(),
            Outcome::StreamError => "stream_error".into(),
            Outcome::Garbage => "garbage".into(),
            Outcome::IsError => "is_error".into(),
            Outcome::ProtocolError => "protocol_error".into(),
            Outcome::ClientGone => "client_gone".into(),
        }
    }
}

/// Counters of one endpoint, as `GET /stats` shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct EndpointStats {
    /// Requests that arrived.
    pub(crate) requests: u64,
    /// Requests being handled now (a hanging or streaming request counts until it ends).
    pub(crate) in_flight: u64,
    /// The most requests handled at once.
    pub(crate) max_in_flight: u64,
    /// Answers replayed from an idempotency key (also counted under their status).
    pub(crate) replays: u64,
    /// Requests per outcome bucket.
    pub(crate) statuses: BTreeMap<String, u64>,
}

/// The statistics of the whole server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Stats {
    /// Requests being handled now, all endpoints.
    pub(crate) in_flight: u64,
    /// The most requests handled at once, all endpoints.
    pub(crate) max_in_flight: u64,
    /// Per endpoint (`model`, or the tool name).
    pub(crate) endpoints: BTreeMap<String, EndpointStats>,
}

impl Stats {
    fn enter(&mut self, endpoint: &str) {
        self.in_flight += 1;
        self.max_in_flight = self.max_in_flight.max(self.in_flight);
        let e = self.endpoints.entry(endpoint.to_owned()).or_default();
        e.requests += 1;
        e.in_flight += 1;
        e.max_in_flight = e.max_in_flight.max(e.in_flight);
    }

    fn leave(&mut self, endpoint: &str) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(e) = self.endpoints.get_mut(endpoint) {
            e.in_flight = e.in_flight.saturating_sub(1);
        }
    }

    fn count(&mut self, endpoint: &str, outcome: Outcome, replayed: bool) {
        let e = self.endpoints.entry(endpoint.to_owned()).or_default();
        *e.statuses.entry(outcome.bucket()).or_default() += 1;
        if replayed {
            e.replays += 1;
        }
    }
}

/// One request in flight: counted in on creation, out on drop; its outcome is counted once.
///
/// Dropping it without an outcome (the client went away, hyper dropped the handler) counts `client_gone`. A
/// streamed answer carries it inside the body, so the request stays in flight until the stream ends.
#[derive(Debug)]
pub(crate) struct Visit {
    stats: Arc<Mutex<Stats>>,
    endpoint: String,
    counted: bool,
}

impl Visit {
    /// Counts a request to `endpoint` in.
    pub(crate) fn enter(stats: Arc<Mutex<Stats>>, endpoint: &str) -> Visit {
        lock(&stats).enter(endpoint);
        Visit {
            stats,
            endpoint: endpoint.to_owned(),
            counted: false,
        }
    }

    /// Counts the request's outcome; only the first call counts.
    pub(crate) fn count(&mut self, outcome: Outcome, replayed: bool) {
        if !self.counted {
            self.counted = true;
            lock(&self.stats).count(&self.endpoint, outcome, replayed);
        }
    }
}

impl Drop for Visit {
    fn drop(&mut self) {
        let mut stats = lock(&self.stats);
        if !self.counted {
            stats.count(&self.endpoint, Outcome::ClientGone, false);
        }
        stats.leave(&self.endpoint);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Arc<Mutex<Stats>> {
        Arc::new(Mutex::new(Stats::default()))
    }

    #[test]
    fn a_visit_counts_in_flight_and_its_outcome_once() {
        let stats = shared();
        let mut first = Visit::enter(stats.clone(), "model");
        let second = Visit::enter(stats.clone(), "model");
        assert_eq!(lock(&stats).in_flight, 2);
        first.count(Outcome::Status(503), false);
        first.count(Outcome::Status(200), false);
        drop(first);
        drop(second);
        let stats = lock(&stats).clone();
        assert_eq!(stats.in_flight, 0);
        assert_eq!(stats.max_in_flight, 2);
        let model = &stats.endpoints["model"];
        assert_eq!(model.requests, 2);
        assert_eq!(model.statuses["503"], 1);
        assert_eq!(model.statuses["client_gone"], 1);
        assert!(!model.statuses.contains_key("200"));
    }

    #[test]
    fn buckets_name_what_happened_instead_of_a_status() {
        let names: Vec<String> = [
            Outcome::Outage,
            Outcome::ShedCapacity,
            Outcome::Hang,
            Outcome::Reset,
            Outcome::CommitThenLose,
            Outcome::StreamCut,
            Outcome::StreamError,
            Outcome::Garbage,
            Outcome::IsError,
            Outcome::ProtocolError,
        ]
        .into_iter()
        .map(Outcome::bucket)
        .collect();
        assert_eq!(
            names,
            [
                "outage",
                "shed_capacity",
                "hang",
                "reset",
                "commit_then_lose",
                "stream_cut",
                "stream_error",
                "garbage",
                "is_error",
                "protocol_error"
            ]
        );
    }

    #[test]
    fn replays_are_counted_beside_their_status() {
        let stats = shared();
        Visit::enter(stats.clone(), "create_refund").count(Outcome::Status(200), true);
        let stats = lock(&stats).clone();
        assert_eq!(stats.endpoints["create_refund"].replays, 1);
        assert_eq!(stats.endpoints["create_refund"].statuses["200"], 1);
    }
}
