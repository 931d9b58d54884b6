//! [`CallError`]: the one shape of a tool or model call that did not succeed.

use std::time::Duration;

use ballast_core::{ErrorCode, Refused, StopReason};
use serde_json::Value;

use crate::{Error, OutcomeReport};

/// A tool or model call that did not succeed, with the report of everything tried
/// ([`ToolError`](crate::tool::ToolError) and [`ChatError`](crate::model::ChatError) are this type).
///
/// What a caller can do next follows from [`code`](CallError::code) and [`outcome_unknown`](CallError::outcome_unknown):
/// with `outcome_unknown`, check the operation before doing it again; otherwise nothing happened upstream that
/// the error does not show.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The upstream's own answer, which was not retried (further): a 4xx, or a 5xx after retries. The message
    /// carries the upstream's own message and why Ballast stopped there.
    #[error("{target}: the upstream answered {status}{}", detail(body, report))]
    Upstream {
        /// The tool or model route.
        target: String,
        /// The upstream's status.
        status: u16,
        /// The upstream's body (`null` when empty; a JSON string when it is not JSON).
        body: Value,
        /// The body's bytes as the upstream sent them (`body` is them, parsed): what a proxy passes on, every
        /// number and the key order as they were.
        bytes: bytes::Bytes,
        /// The wait the answer asked for (`retry-after-ms`, else `Retry-After`), when it sent one
        /// ([`retry_after`](CallError::retry_after) is what to pass on).
        asked_wait: Option<Duration>,
        /// The answer's headers as the upstream sent them — its `content-type`, a provider's rate limits and
        /// request id: what a proxy passes on (boxed: they are seldom read, and an error travels by value).
        headers: Box<http::HeaderMap>,
        /// What happened (boxed: an error travels by value through every `?`).
        report: Box<OutcomeReport>,
    },
    /// No upstream answer to return.
    #[error("{target}: {error}")]
    Failed {
        /// The tool or model route.
        target: String,
        /// Why.
        error: Error,
        /// What happened (boxed: an error travels by value through every `?`).
        report: Box<OutcomeReport>,
    },
    /// Nothing was sent: the call cannot be served as asked ([`Refusal`] says why).
    #[error("{target}: {refusal}")]
    Refused {
        /// The tool or model route.
        target: String,
        /// Why.
        refusal: Refusal,
        /// What happened: nothing (boxed: an error travels by value through every `?`).
        report: Box<OutcomeReport>,
    },
    /// The upstream answered 2xx with a body that is not what its API answers (a model's answer that is not a
    /// chat completion).
    #[error("{target}: the upstream's answer is {reason}")]
    Malformed {
        /// The tool or model route.
        target: String,
        /// What it is not, and what did not parse.
        reason: String,
        /// What happened (boxed: an error travels by value through every `?`).
        report: Box<OutcomeReport>,
    },
}

impl CallError {
    /// What happened, attempt by attempt: the call's own report, with each fallback's nested in it.
    pub fn report(&self) -> &OutcomeReport {
        match self {
            CallError::Upstream { report, .. }
            | CallError::Failed { report, .. }
            | CallError::Refused { report, .. }
            | CallError::Malformed { report, .. } => report,
        }
    }

    /// The stable error code (DESIGN.md, "Error answers"): `outcome_unknown` once a sent attempt may have acted,
    /// whatever stopped the call afterwards (an open breaker, a spent budget, the deadline); else the error's, or
    /// for an upstream's answer the code of the call that gave it (the last fallback tried, when the call went to
    /// one). So any other code of a side-effecting call means the operation did not happen.
    pub fn code(&self) -> ErrorCode {
        if self.outcome_unknown() {
            return ErrorCode::OutcomeUnknown;
        }
        match self {
            CallError::Failed { error, .. } => error.code(),
            CallError::Upstream { report, .. } => report.answering().code.unwrap_or(ErrorCode::UpstreamError),
            CallError::Malformed { .. } => ErrorCode::UpstreamError,
            CallError::Refused { refusal, .. } => refusal.code(),
        }
    }

    /// Whether a side effect may or may not have happened (here or in a fallback): check before doing it again.
    pub fn outcome_unknown(&self) -> bool {
        self.report().outcome_unknown
    }

    /// How long the caller should wait before asking again, for an upstream's refusal for load (429, 503): the
    /// wait that stopped the retries (longer than the deadline could hold, or than `max_retry_after`), else the
    /// wait the last answer asked for. `None` for any other answer or error (a gateway's own refusals say their
    /// wait in theirs).
    pub fn retry_after(&self) -> Option<Duration> {
        let CallError::Upstream {
            status: 429 | 503,
            asked_wait,
            report,
            ..
        } = self
        else {
            return None;
        };
        let stopped_by = match report.stop_reason() {
            Some(StopReason::Deadline(exceeded)) => match exceeded.refused {
                Refused::Wait(wait) => Some(wait),
                _ => None,
            },
            Some(StopReason::RetryAfterTooLong { asked, .. }) => Some(*asked),
            _ => None,
        };
        stopped_by.or(*asked_wait)
    }

    /// Why the call stopped: the stop reason of the call that gave the final answer (the last fallback or
    /// deployment tried), e.g. attempts exhausted, the deadline, an open breaker. `None` when nothing stopped it
    /// (a failure before any decision: a malformed request, say).
    pub fn stop_reason(&self) -> Option<&StopReason> {
        self.report().stop_reason()
    }
}

/// Why a call was refused before anything was sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No deployment of the route speaks the call's API (each deployment's `api` says which it speaks).
    #[error(
        "no deployment of this route speaks the {} API; a deployment's `api` in the config says which APIs it \
         speaks",
        .0.title()
    )]
    ApiNotServed(ballast_config::Api),
    /// The state the call names was not made through this route by this caller, or its record is gone.
    #[error(
        "{0} was not made through this route by this caller, or its record has expired; a request that continues \
         a response goes only to the deployment that made it, and Ballast knows none for this one"
    )]
    UnknownState(String),
    /// A call that names both a previous response and a conversation: the API takes one or the other.
    #[error(
        "the request names both previous_response_id {previous_response_id:?} and conversation {conversation:?}; \
         send one or the other"
    )]
    BothStates {
        /// The previous response named.
        previous_response_id: String,
        /// The conversation named.
        conversation: String,
    },
    /// An id that cannot name a response or conversation.
    #[error("{0:?} is not a response or conversation id (1 to 242 of A-Z, a-z, 0-9, _ and -)")]
    InvalidId(String),
    /// The records of where state lives could not be read: where the call must go is unknown.
    #[error(transparent)]
    StateRecords(#[from] StateRecordError),
}

/// A record of where state lives (which deployment keeps a response) could not be written or read.
#[derive(Debug, thiserror::Error)]
#[error("the record of which deployment keeps {id} could not be {action}: {source}")]
pub struct StateRecordError {
    /// The state.
    pub id: String,
    /// `written` or `read`.
    pub action: &'static str,
    /// Why.
    #[source]
    pub source: crate::BoxError,
}

impl Refusal {
    /// The stable error code: `store_unavailable` when the records could not be read, `invalid_request`
    /// otherwise.
    pub fn code(&self) -> ErrorCode {
        match self {
            Refusal::StateRecords(_) => ErrorCode::StoreUnavailable,
            _ => ErrorCode::InvalidRequest,
        }
    }
}

/// What the upstream said (`error.message`, or Ollama's `error` string) and why the answering call stopped.
fn detail(body: &Value, report: &OutcomeReport) -> String {
    let error = body.get("error");
    let message = error
        .and_then(|e| e.get("message"))
        .or(error)
        .and_then(Value::as_str);
    let mut detail = message.map(|m| format!(": {m}")).unwrap_or_default();
    if let Some(stop) = &report.answering().stop {
        detail.push_str(&format!(" ({stop})"));
    }
    detail
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_upstream_answer_says_what_the_upstream_said_and_why_ballast_stopped() {
        let fallback = OutcomeReport {
            target: "fallback".into(),
            stop: Some(StopReason::AttemptsExhausted { attempts: 3 }),
            code: Some(ErrorCode::UpstreamError),
            ..OutcomeReport::default()
        };
        let report = OutcomeReport {
            target: "primary".into(),
            code: Some(ErrorCode::CircuitOpen),
            fallback: Some("fallback".into()),
            fallback_report: Some(Box::new(fallback)),
            ..OutcomeReport::default()
        };
        let error = CallError::Upstream {
            target: "agent".into(),
            status: 503,
            body: json!({"error": {"message": "overloaded, try later"}}),
            bytes: bytes::Bytes::new(),
            asked_wait: None,
            headers: Box::default(),
            report: Box::new(report),
        };
        let text = error.to_string();
        assert!(
            text.starts_with("agent: the upstream answered 503: overloaded, try later ("),
            "{text}"
        );
        assert_eq!(
            error.code(),
            ErrorCode::UpstreamError,
            "the answering call's code"
        );
        assert!(!error.outcome_unknown());
        // The stop reason one method away: the answering call's, not the primary's (which has none here).
        assert_eq!(
            error.stop_reason(),
            Some(&StopReason::AttemptsExhausted { attempts: 3 })
        );
        assert_eq!(error.report().answering().target, "fallback");
    }

    #[test]
    fn a_refusal_for_load_passes_on_the_wait_that_stopped_it_else_the_one_it_asked() {
        let answer = |status: u16, stop: StopReason| CallError::Upstream {
            target: "model".into(),
            status,
            body: Value::Null,
            bytes: bytes::Bytes::new(),
            asked_wait: Some(Duration::from_secs(2)),
            headers: Box::default(),
            report: Box::new(OutcomeReport {
                stop: Some(stop),
                ..OutcomeReport::default()
            }),
        };
        let spent = StopReason::AttemptsExhausted { attempts: 3 };
        let too_long = StopReason::RetryAfterTooLong {
            asked: Duration::from_secs(90),
            max: Duration::from_secs(60),
        };
        assert_eq!(answer(429, spent).retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(answer(503, spent).retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(answer(429, too_long).retry_after(), Some(Duration::from_secs(90)));
        assert_eq!(answer(500, spent).retry_after(), None, "not a refusal for load");
    }
}
