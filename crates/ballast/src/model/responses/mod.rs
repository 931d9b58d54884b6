//! The Responses API (`POST /responses`, and `GET`/`DELETE /responses/{id}`, `/cancel`) on a model route: the
//! bodies (`types`), the stream's commit point and events (`events`), truncation of input items (`truncate`),
//! and the records of which deployment keeps a response's state (`state`).
//!
//! Plain data and the protocol: nothing here calls anything. The calls are [`ModelClient`](crate::ModelClient)'s — [`respond`](crate::ModelClient::respond),
//! [`respond_stream`](crate::ModelClient::respond_stream), [`retrieve_response`](crate::ModelClient::retrieve_response),
//! [`delete_response`](crate::ModelClient::delete_response), [`cancel_response`](crate::ModelClient::cancel_response)
//! — under the same deadline, retries, breakers, throttle, admission, fallbacks and token accounting as chat.

mod events;
mod state;
mod truncate;
mod types;

pub(crate) use events::Responses;
#[cfg(feature = "idempotency")]
pub use state::StoreStateRecords;
pub use state::{MemoryStateRecords, StateHome, StateId, StateRecordError, StateRecords};
pub(crate) use truncate::truncate_input;
pub use types::{FunctionCall, Input, InputItem, ResponseEvent, ResponseObject, ResponsesRequest};

/// Whether `id` can name a response or conversation in a URL path and a record: 1 to 242 of `A-Z a-z 0-9 _ -`
/// (OpenAI's ids are `resp_` and `conv_` and 48 hex digits; 242 keeps `conversation:<id>` within a record key's
/// 255). Anything else is refused before it reaches a provider's path.
pub(crate) fn is_state_id(id: &str) -> bool {
    (1..=MAX_STATE_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The longest id of a response or conversation: its record's key, `conversation:<id>`, fits in 255.
const MAX_STATE_ID: usize = 255 - "conversation:".len();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_ids_cannot_leave_their_path() {
        assert!(is_state_id(
            "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b"
        ));
        for id in [
            "",
            "../models",
            "resp_1/cancel",
            "resp 1",
            "resp_1?x=1",
            &"a".repeat(257),
        ] {
            assert!(!is_state_id(id), "{id}");
        }
    }
}
