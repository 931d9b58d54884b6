//! How a call ended, before its report is attached: the internal shape between the stack, the fallback and the
//! public [`ToolAnswer`] / [`ToolError`].

use bytes::Bytes;
use http::Response;
use serde_json::Value;

use super::{ToolAnswer, ToolError};
use crate::{Error, OutcomeReport};

/// What the stack gave for a call that did not succeed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The upstream's own answer, not a success (a 4xx, a 5xx after retries, a 409 still in progress).
    Answer(Response<Bytes>),
    /// No upstream answer to return.
    Error(Error),
}

impl Failure {
    /// The failure as the end of the call of `tool`.
    pub(super) fn ended(self, tool: &str) -> Ended {
        match self {
            Failure::Answer(response) => Ended::Upstream {
                tool: tool.to_owned(),
                status: response.status().as_u16(),
                body: json_body(response.body()),
            },
            Failure::Error(error) => Ended::Failed {
                tool: tool.to_owned(),
                error,
            },
        }
    }
}

/// How the call ended: an answer (the tool's, or a fallback's), or the failure returned to the caller.
#[derive(Debug)]
pub(super) enum Ended {
    Answer { status: u16, body: Value },
    Upstream { tool: String, status: u16, body: Value },
    Failed { tool: String, error: Error },
}

impl Ended {
    /// A successful upstream answer.
    pub(super) fn answered(response: &Response<Bytes>) -> Self {
        Ended::Answer {
            status: response.status().as_u16(),
            body: json_body(response.body()),
        }
    }

    /// How a fallback tool's call ended, and its report.
    pub(super) fn of_fallback(result: Result<ToolAnswer, ToolError>) -> (Ended, OutcomeReport) {
        match result {
            Ok(ToolAnswer { status, body, report }) => (Ended::Answer { status, body }, report),
            Err(ToolError::Upstream {
                tool,
                status,
                body,
                report,
            }) => (Ended::Upstream { tool, status, body }, report),
            Err(ToolError::Failed { tool, error, report }) => (Ended::Failed { tool, error }, report),
        }
    }

    /// The caller's result, with the call's report.
    // The result of `ToolClient::call` itself (an async fn, which the lint does not look at): its shape is the
    // public API's, and it is built once per call.
    #[allow(clippy::result_large_err)]
    pub(super) fn into_result(self, report: OutcomeReport) -> Result<ToolAnswer, ToolError> {
        match self {
            Ended::Answer { status, body } => Ok(ToolAnswer { status, body, report }),
            Ended::Upstream { tool, status, body } => Err(ToolError::Upstream {
                tool,
                status,
                body,
                report,
            }),
            Ended::Failed { tool, error } => Err(ToolError::Failed { tool, error, report }),
        }
    }
}

/// The body as JSON; `null` when empty, a JSON string when it is not JSON.
fn json_body(body: &Bytes) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}
