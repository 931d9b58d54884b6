//! What a Responses request (or a request about a stored response) is refused with, in OpenAI's envelope
//! `{"error": {"message", "type", "param", "code"}}` and OpenAI's own wording, so that a client classifies the
//! answer as it would the real one — above all `previous_response_not_found`, which tells a gateway that the
//! state lives at another deployment.

use serde_json::Value;

use crate::model::errors::envelope;

/// A Responses request the mock refuses, or a stored response it does not have.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponsesError {
    /// The conversation (instructions, the stored items and the input) is longer than the configured context.
    #[error("this conversation has {chars} characters, over the model's context of {limit}")]
    ContextLengthExceeded {
        /// Characters in the conversation.
        chars: usize,
        /// The limit.
        limit: usize,
    },
    /// The request is not one the mock understands; the message names the field (`input[2].call_id`).
    #[error("{message}")]
    InvalidRequest {
        /// What is wrong, in OpenAI's wording.
        message: String,
        /// The field, when there is one.
        param: Option<String>,
    },
    /// `previous_response_id` names a response this server does not hold (never stored, `store: false`,
    /// deleted, evicted — or created by another server).
    #[error("previous response {0:?} not found")]
    PreviousResponseNotFound(String),
    /// `GET`, `DELETE` or `cancel` of a response this server does not hold (404).
    #[error("response {0:?} not found")]
    NotFound(String),
    /// `cancel` of a response that cannot be cancelled (not created with `background: true`, or finished).
    #[error("{0}")]
    NotCancellable(String),
}

impl ResponsesError {
    /// The HTTP status: 404 for [`ResponsesError::NotFound`], 400 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            ResponsesError::NotFound(_) => 404,
            _ => 400,
        }
    }

    /// The OpenAI-format body.
    pub fn body(&self) -> Value {
        let invalid = "invalid_request_error";
        match self {
            ResponsesError::ContextLengthExceeded { .. } => envelope(
                "Your input exceeds the context window of this model. Please adjust your input and try again.",
                invalid,
                Some("input"),
                Some("context_length_exceeded"),
            ),
            ResponsesError::InvalidRequest { message, param } => {
                envelope(message, invalid, param.as_deref(), None)
            }
            ResponsesError::PreviousResponseNotFound(id) => envelope(
                &format!("Previous response with id '{id}' not found."),
                invalid,
                Some("previous_response_id"),
                Some("previous_response_not_found"),
            ),
            ResponsesError::NotFound(id) => envelope(
                &format!("Response with id '{id}' not found."),
                invalid,
                None,
                None,
            ),
            ResponsesError::NotCancellable(message) => envelope(message, invalid, None, None),
        }
    }

    /// An invalid request about `param`.
    pub(super) fn invalid(message: String, param: &str) -> ResponsesError {
        ResponsesError::InvalidRequest {
            message,
            param: Some(param.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_unknown_previous_response_is_openais_400() {
        let error = ResponsesError::PreviousResponseNotFound("resp_x".into());
        assert_eq!(error.status(), 400);
        assert_eq!(
            error.body(),
            json!({"error": {
                "message": "Previous response with id 'resp_x' not found.",
                "type": "invalid_request_error",
                "param": "previous_response_id",
                "code": "previous_response_not_found",
            }})
        );
    }

    #[test]
    fn an_unknown_response_is_404_and_the_rest_400() {
        assert_eq!(ResponsesError::NotFound("resp_x".into()).status(), 404);
        let too_long = ResponsesError::ContextLengthExceeded { chars: 9, limit: 8 };
        assert_eq!(too_long.status(), 400);
        assert_eq!(too_long.body()["error"]["code"], "context_length_exceeded");
        assert_eq!(too_long.body()["error"]["param"], "input");
        let invalid = ResponsesError::invalid(
            "Missing required parameter: 'input[0].call_id'.".into(),
            "input[0].call_id",
        );
        assert_eq!(invalid.body()["error"]["param"], "input[0].call_id");
    }
}
