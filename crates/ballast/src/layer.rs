//! The stack's layers as tower layers, for any tower, axum or reqwest user to put in front of a service. The
//! clients ([`ToolClient`](crate::tool::ToolClient), [`ModelClient`](crate::model::ModelClient)) run the same code; these are
//! for a stack of your own.
//!
//! ```text
//! DeadlineLayer    a call's context and its one deadline
//! AdmissionLayer   the upstream's concurrency limit and priority queue
//! RetryLayer       attempts as the core's retry decision allows
//! BreakerLayer     each attempt asks the upstream's circuit breaker (and its adaptive throttle)
//! AttemptLayer     each attempt's timeout, headers and report line
//! ```

pub use crate::admission::{AdmissionLayer, AdmissionService};
pub use crate::attempt::{AttemptLayer, AttemptService};
pub use crate::breaker::{BreakerLayer, BreakerService};
pub use crate::deadline::{DeadlineLayer, DeadlineService};
pub use crate::retry::{Retry, RetryLayer, classify_response};
