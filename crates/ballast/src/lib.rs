//! Ballast for Rust agents: every call of one agent request under one deadline, retried only when safe and
//! affordable, isolated by circuit breakers, admitted by priority under a spike.
//!
//! The decisions are `ballast-core`'s (pure, no I/O); this crate is the async shell around them: the one clock,
//! deadline propagation, tower layers any tower/axum/reqwest user can put in front of a service, and the
//! `ToolClient` that puts them together for an agent's tool calls.
//!
//! # Layout
//! - `clock` — the only reader of time (tokio's, so paused time works) and of HTTP-date `Retry-After`.
//! - `context` — [`CallContext`]: what every layer knows about a call (request extensions), and the task-local
//!   deadline scope.
//! - `run` — [`Run`] and [`Runs`]: the calls of one agent request share a deadline and a retry allowance.
//! - `report` — [`Report`] and [`OutcomeReport`]: what happened to a call, attempt by attempt.
//! - `error` — [`Error`]: the one error type of the stack, with its stable code.
//! - `breaker` — [`BreakerLayer`]: each attempt asks the upstream's circuit breaker and tells it the outcome.
//! - `admission` — [`AdmissionLayer`]: per-upstream concurrency limit and priority queue; sheds, evicts,
//!   bounds waiting by the deadline.

mod admission;
mod breaker;
pub mod clock;
mod context;
mod error;
mod report;
mod run;

pub use admission::{AdmissionLayer, AdmissionService};
pub use breaker::{BreakerLayer, BreakerService};
pub use context::{AttemptNumber, CallContext, current_deadline, scope};
pub use error::{BoxError, Error};
pub use report::{AttemptRecord, AttemptResult, OutcomeReport, Report};
pub use run::{Run, Runs};
