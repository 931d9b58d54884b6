//! The stable error codes of DESIGN.md's "Error answers".
//!
//! Every way a call can fail maps to one of these codes. They are part of Ballast's interface: clients match on
//! them (OpenAI-style `error.code`, problem+json `type = urn:ballast:<code>`), so a code is never renamed.

use std::fmt;

/// A stable error code a caller can match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The deadline passed or cannot hold another attempt (504).
    DeadlineExceeded,
    /// Shed by admission (503).
    Overloaded,
    /// The breaker is open and there is no fallback (503).
    CircuitOpen,
    /// A side effect may or may not have happened (502).
    OutcomeUnknown,
    /// Retries were refused by the retry budget (the last upstream status).
    RetryBudgetExhausted,
    /// Retries were refused by the run's allowance (the last upstream status).
    RunAllowanceExhausted,
    /// Retries are exhausted or the upstream's answer cannot be retried (the upstream's status).
    UpstreamError,
    /// The request cannot be served as asked, and nothing was sent (400): a model call of an API no deployment
    /// of its route speaks, a response id that names no state the caller made through the route.
    InvalidRequest,
    /// The store Ballast keeps its records in cannot be reached, and nothing was sent (503).
    StoreUnavailable,
}

impl ErrorCode {
    /// Every code, for documentation and exhaustive tests.
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::DeadlineExceeded,
        ErrorCode::Overloaded,
        ErrorCode::CircuitOpen,
        ErrorCode::OutcomeUnknown,
        ErrorCode::RetryBudgetExhausted,
        ErrorCode::RunAllowanceExhausted,
        ErrorCode::UpstreamError,
        ErrorCode::InvalidRequest,
        ErrorCode::StoreUnavailable,
    ];

    /// The code as it appears on the wire: `deadline_exceeded`, `overloaded`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::DeadlineExceeded => "deadline_exceeded",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::CircuitOpen => "circuit_open",
            ErrorCode::OutcomeUnknown => "outcome_unknown",
            ErrorCode::RetryBudgetExhausted => "retry_budget_exhausted",
            ErrorCode::RunAllowanceExhausted => "run_allowance_exhausted",
            ErrorCode::UpstreamError => "upstream_error",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::StoreUnavailable => "store_unavailable",
        }
    }

    /// The HTTP status this code always answers with, or `None` when the upstream's own status is passed on.
    pub fn fixed_status(self) -> Option<u16> {
        match self {
            ErrorCode::DeadlineExceeded => Some(504),
            ErrorCode::Overloaded | ErrorCode::CircuitOpen => Some(503),
            ErrorCode::OutcomeUnknown => Some(502),
            ErrorCode::InvalidRequest => Some(400),
            ErrorCode::StoreUnavailable => Some(503),
            ErrorCode::RetryBudgetExhausted | ErrorCode::RunAllowanceExhausted | ErrorCode::UpstreamError => {
                None
            }
        }
    }

    /// The problem+json type URI: `urn:ballast:<code>`.
    pub fn problem_type(self) -> String {
        format!("urn:ballast:{}", self.as_str())
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses_match_the_design_table() {
        let table: Vec<_> = ErrorCode::ALL
            .iter()
            .map(|c| (c.as_str(), c.fixed_status()))
            .collect();
        assert_eq!(
            table,
            [
                ("deadline_exceeded", Some(504)),
                ("overloaded", Some(503)),
                ("circuit_open", Some(503)),
                ("outcome_unknown", Some(502)),
                ("retry_budget_exhausted", None),
                ("run_allowance_exhausted", None),
                ("upstream_error", None),
                ("invalid_request", Some(400)),
                ("store_unavailable", Some(503)),
            ]
        );
        assert_eq!(ErrorCode::CircuitOpen.problem_type(), "urn:ballast:circuit_open");
    }
}
