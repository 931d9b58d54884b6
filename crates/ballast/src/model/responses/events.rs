//! The Responses API as a protocol of the model pipeline ([`Responses`]): where its stream commits (DESIGN.md,
//! "Streaming": `commit`) and what each event after that means (`read_event`).
//!
//! Before the commit point: `response.created`, `response.in_progress` and `response.queued` carry nothing for
//! the caller and are held back with the status line (naming the response's id, which the route records); every other event commits — output items, content parts,
//! text and function-call argument deltas, reasoning — and so does a terminal event (`response.completed`,
//! `response.incomplete`: an answer cut by `max_output_tokens` is still an answer). An `error` event or
//! `response.failed` before the commit is the attempt's error answer, with the status its code stands for, so
//! an insufficient quota sent after `response.created` still moves to the next deployment and the caller never
//! sees the failed one. An event that is not a JSON object with a `type` is no Responses event: a failed attempt.
//!
//! After the commit point: every event is handed on; `response.completed` or `response.incomplete` is the last,
//! and only after it does the stream end cleanly. An `error` event or `response.failed` ends it with the
//! upstream's error; a stream that stops before a terminal event is cut.

use serde_json::{Map, Value};

use super::{Input, ResponseEvent, ResponseObject, ResponsesRequest, truncate_input};
use crate::body::{Commit, CommitRule};
use crate::model::api::{Protocol, Read, Streamed, error_answer, event_object, kind, set_stream};
use crate::model::usage::token_usage_of;
use crate::model::{CannotTruncate, Truncation, TruncationGoal};
use ballast_config::Api;

/// The events that only say a response exists: held back until content comes.
const PREAMBLE: [&str; 3] = ["response.created", "response.in_progress", "response.queued"];

/// The events after which a response's stream is over, and went well.
const TERMINAL: [&str; 2] = ["response.completed", "response.incomplete"];

/// The Responses API: `POST /responses`.
pub(crate) struct Responses;

impl Protocol for Responses {
    const API: Api = Api::Responses;
    const PATH: &'static str = "/responses";
    type Request = ResponsesRequest;
    type Answer = ResponseObject;

    fn set_model(request: &mut ResponsesRequest, model: &str) {
        model.clone_into(&mut request.model);
    }

    fn truncate(request: &mut ResponsesRequest, goal: TruncationGoal) -> Result<Truncation, CannotTruncate> {
        match &mut request.input {
            Some(Input::Items(items)) => truncate_input(items, goal),
            // A text, or state the provider keeps (`previous_response_id`): nothing here to drop.
            _ => Err(CannotTruncate::NothingToDrop),
        }
    }
}

impl Streamed for Responses {
    type Event = ResponseEvent;
    const COMMIT: CommitRule = commit;
    const READ: fn(&str) -> Read<ResponseEvent> = read_event;

    fn set_stream(request: &mut ResponsesRequest, stream: bool) {
        set_stream(&mut request.stream, &mut request.extra, stream);
    }
}

/// What event `data` of a Responses stream means before the commit point (module docs).
pub(crate) fn commit(data: &str) -> Commit {
    let Some(event) = event_object(data) else {
        return Commit::Fail(format!(
            "the stream's first event is not a Responses event: {data}"
        ));
    };
    match kind(&event) {
        kind if PREAMBLE.contains(&kind) => match event.get("response").and_then(|r| r.get("id")) {
            Some(Value::String(id)) => Commit::Named(id.clone()),
            _ => Commit::Hold,
        },
        "error" | "response.failed" => error_answer(&error_of(&event)),
        _ => Commit::Now,
    }
}

/// What event `data` of a Responses stream means after the commit point (module docs).
pub(crate) fn read_event(data: &str) -> Read<ResponseEvent> {
    let Some(event) = event_object(data) else {
        if data.trim() == crate::sse::DONE {
            // A chat stream's end, without the Responses API's terminal event: the answer is not whole.
            return Read::Cut;
        }
        return Read::Malformed(format!("not a Responses event: {data}"));
    };
    match kind(&event) {
        "error" | "response.failed" => Read::Upstream(error_of(&event)),
        kind if TERMINAL.contains(&kind) => {
            let usage = (event.get("response"))
                .and_then(|r| r.get("usage"))
                .and_then(token_usage_of);
            Read::Last(ResponseEvent(event), usage)
        }
        _ => Read::Item(ResponseEvent(event), None),
    }
}

/// The error an `error` event or `response.failed` reports, as an error object (`code`, `message`, ...): an
/// `error` object when the event has one (another gateway's, or `response.error`), else the `error` event's own
/// fields without its `type` and `sequence_number`.
fn error_of(event: &Map<String, Value>) -> Value {
    let nested = event
        .get("error")
        .or_else(|| event.get("response")?.get("error"))
        .filter(|e| e.is_object());
    if let Some(error) = nested {
        return error.clone();
    }
    let own: Map<String, Value> = (event.iter())
        .filter(|(key, _)| !matches!(key.as_str(), "type" | "sequence_number" | "response"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Value::Object(own)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(value: Value) -> String {
        value.to_string()
    }

    #[test]
    fn the_preamble_is_held_and_every_other_event_commits() {
        for kind in PREAMBLE {
            let data = event(json!({"type": kind, "sequence_number": 0, "response": {"id": "resp_1"}}));
            assert_eq!(
                commit(&data),
                Commit::Named("resp_1".into()),
                "{kind}: held, naming its response"
            );
            let unnamed = event(json!({"type": kind, "sequence_number": 0}));
            assert_eq!(commit(&unnamed), Commit::Hold, "{kind}");
        }
        for kind in [
            "response.output_item.added",
            "response.output_text.delta",
            "response.function_call_arguments.delta",
            "response.reasoning_summary_text.delta",
            "response.completed",
            "response.incomplete",
            "response.some_new_event",
        ] {
            assert_eq!(commit(&event(json!({"type": kind}))), Commit::Now, "{kind}");
        }
    }

    #[test]
    fn an_error_before_the_commit_point_is_an_error_answer() {
        let quota = event(json!({"type": "error", "code": "insufficient_quota",
                                 "message": "You exceeded your current quota", "param": null,
                                 "sequence_number": 2}));
        let Commit::Error { status, body } = commit(&quota) else {
            panic!("not an error answer")
        };
        assert_eq!(status, 429);
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body,
            json!({"error": {"code": "insufficient_quota", "message": "You exceeded your current quota",
                             "param": null}})
        );
        let failed = event(json!({"type": "response.failed", "sequence_number": 3,
                                  "response": {"id": "resp_1", "status": "failed",
                                               "error": {"code": "server_error", "message": "boom"}}}));
        let Commit::Error { status, body } = commit(&failed) else {
            panic!("not an error answer")
        };
        assert_eq!(status, 502, "an error of no known code: the upstream failed");
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap()["error"]["message"],
            "boom"
        );
    }

    #[test]
    fn what_is_not_a_responses_event_fails_the_attempt() {
        for data in ["[DONE]", "not json", r#"{"choices": []}"#, r#"{"type": 7}"#] {
            assert!(matches!(commit(data), Commit::Fail(_)), "{data}");
        }
    }

    #[test]
    fn after_the_commit_a_terminal_event_is_the_last_and_an_error_ends_the_stream() {
        let done = event(json!({"type": "response.completed",
                                "response": {"id": "r", "usage": {"input_tokens": 2, "output_tokens": 3}}}));
        let Read::Last(last, Some(usage)) = read_event(&done) else {
            panic!("not the last event")
        };
        assert_eq!((last.kind(), usage.total_tokens), ("response.completed", 5));
        assert!(matches!(
            read_event(&event(
                json!({"type": "response.incomplete", "response": {"id": "r"}})
            )),
            Read::Last(_, None)
        ));
        assert!(matches!(
            read_event(&event(
                json!({"type": "response.output_text.delta", "delta": "a"})
            )),
            Read::Item(_, None)
        ));
        let Read::Upstream(error) = read_event(&event(json!({"type": "error", "code": "server_error",
                                                              "message": "x", "sequence_number": 9})))
        else {
            panic!("not an upstream error")
        };
        assert_eq!(error, json!({"code": "server_error", "message": "x"}));
        assert!(matches!(read_event("[DONE]"), Read::Cut));
        assert!(matches!(read_event("nope"), Read::Malformed(_)));
    }
}
