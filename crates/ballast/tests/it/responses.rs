//! The Responses API through a model route, against chaos upstreams in process (paused time): an agent loop
//! both ways (`previous_response_id` and the stateless full input), the stream reassembled, the deployments that
//! speak it, token accounting, truncation of input items, and embeddings under the same policy.

use crate::support;

use ballast::{CallError, Refusal};
use ballast::{
    config::Api,
    model::{EmbeddingsCall, EmbeddingsRequest, InputItem, ResponseEvent, ResponseObject, ResponsesRequest},
};
use futures::StreamExt as _;
use serde_json::{Value, json};
use support::chat::{Upstreams, client, config, first_response_turn, profile, respond_call};

/// The route's request of turn `after` of an agent loop: the outputs of `response`'s function calls, each with
/// an answer a tool would give, continuing it by id.
fn next_turn(response: &ResponseObject) -> ResponsesRequest {
    let outputs = response
        .function_calls()
        .map(|call| InputItem::function_call_output(call.call_id, tool_answer(call.name)))
        .collect();
    ResponsesRequest::new("agent", outputs).after(response.id.clone())
}

/// What a tool answers in these tests.
fn tool_answer(name: &str) -> String {
    match name {
        "lookup_order" => json!({"order_id": "1234", "amount": 12.5}).to_string(),
        _ => json!({"status": "succeeded"}).to_string(),
    }
}

/// The names of the function calls of `response`.
fn calls(response: &ResponseObject) -> Vec<&str> {
    response.function_calls().map(|call| call.name).collect()
}

#[tokio::test(start_paused = true)]
async fn an_agent_loop_continues_each_response_by_its_id() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);

    let first = route
        .respond(respond_call(&first_response_turn("op-1")))
        .await
        .unwrap();
    assert_eq!(calls(&first.response), ["lookup_order"]);
    assert_eq!(first.deployment, "agent[0] mock");
    let tokens = first.report.tokens.expect("the answer's tokens are counted");
    assert!(
        tokens.answered.prompt_tokens > 0 && tokens.answered.completion_tokens > 0,
        "{tokens:?}"
    );

    let second = route.respond(next_turn(&first.response).into()).await.unwrap();
    assert_eq!(calls(&second.response), ["create_refund"]);
    let arguments: Value =
        serde_json::from_str(second.response.function_calls().next().unwrap().arguments).unwrap();
    assert_eq!(arguments["amount"], 12.5, "the lookup's answer reached the model");

    let third = route.respond(next_turn(&second.response).into()).await.unwrap();
    assert!(calls(&third.response).is_empty());
    assert!(
        third.response.output_text().contains("op-1"),
        "{}",
        third.response.output_text()
    );
    let seen = upstreams.seen();
    let sent: Vec<&Value> = seen.iter().map(|s| &s.body).collect();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[1]["previous_response_id"], first.response.id.as_str());
    assert_eq!(sent[1]["model"], "mock", "each deployment's own model name");
    assert_eq!(
        sent[1]["input"].as_array().unwrap().len(),
        1,
        "only the new items are sent"
    );
}

#[tokio::test(start_paused = true)]
async fn an_agent_loop_sends_the_whole_input_when_nothing_is_stored() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let mut request: ResponsesRequest = serde_json::from_value(first_response_turn("op-2")).unwrap();
    request.store = Some(false);
    let mut texts = Vec::new();
    let mut ids = Vec::new();
    for _turn in 0..3 {
        let answer = route.respond(request.clone().into()).await.unwrap();
        ids.push(answer.response.id.clone());
        let Some(ballast::model::Input::Items(input)) = &mut request.input else {
            panic!("items")
        };
        // The stateless form: the output items go back as input, with the outputs of their calls.
        input.extend(answer.response.output.iter().cloned());
        for call in answer.response.function_calls() {
            input.push(InputItem::function_call_output(
                call.call_id,
                tool_answer(call.name),
            ));
        }
        texts.push(answer.response.output_text());
    }
    assert!(texts[2].contains("op-2"), "{texts:?}");
    let last = &upstreams.seen()[2].body;
    let kinds: Vec<&str> = (last["input"].as_array().unwrap().iter())
        .map(|item| item["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "function_call",
            "function_call_output",
            "function_call",
            "function_call_output"
        ]
    );
    // Nothing is stored: no response of this loop can be continued or retrieved.
    let error = route
        .retrieve_response(ballast::model::ResponseIdCall::for_response(ids[0].clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                refusal: Refusal::UnknownState(_),
                ..
            }
        ),
        "{error}"
    );
}

/// Issue 17: "the stream of a reassembled answer equals the JSON answer".
#[tokio::test(start_paused = true)]
async fn a_streamed_response_reassembles_into_the_json_answer() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let whole = route
        .respond(respond_call(&first_response_turn("op-3")))
        .await
        .unwrap();
    let streamed = route
        .respond_stream(respond_call(&first_response_turn("op-3")))
        .await
        .unwrap();
    assert_eq!(streamed.deployment(), "agent[0] mock");
    let events: Vec<ResponseEvent> = streamed.map(|item| item.expect("no error")).collect().await;
    assert_eq!(events.first().map(ResponseEvent::kind), Some("response.created"));
    assert_eq!(events.last().map(ResponseEvent::kind), Some("response.completed"));
    let numbers: Vec<u64> = events.iter().filter_map(ResponseEvent::sequence_number).collect();
    assert_eq!(
        numbers,
        (0..events.len() as u64).collect::<Vec<_>>(),
        "every event, in order"
    );

    let arguments: String = (events.iter())
        .filter(|e| e.kind() == "response.function_call_arguments.delta")
        .filter_map(|e| e.0.get("delta").and_then(Value::as_str))
        .collect();
    let completed = events.last().unwrap().response().expect("the completed response");
    let call = whole.response.function_calls().next().expect("a call");
    assert_eq!(
        arguments, call.arguments,
        "the deltas make the JSON answer's arguments"
    );
    assert_eq!(
        completed.function_calls().collect::<Vec<_>>(),
        whole.response.function_calls().collect::<Vec<_>>()
    );
    assert_eq!(completed.usage, whole.response.usage);
}

#[tokio::test(start_paused = true)]
async fn a_call_goes_only_to_the_deployments_that_speak_its_api() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(
        &support::chat::config_with_apis(&[&["chat"], &["responses", "embeddings"]]),
        &upstreams,
    );
    assert!(route.speaks(Api::Responses) && route.speaks(Api::Chat));
    let answer = route
        .respond(respond_call(&first_response_turn("op-4")))
        .await
        .unwrap();
    assert_eq!(
        answer.deployment, "agent[1] gpt-4.1",
        "the primary speaks only chat"
    );
    assert_eq!(
        answer.report.target, "agent[1] gpt-4.1",
        "nothing was tried before it"
    );
    assert_eq!(upstreams.count("primary"), 0);

    let chat_only = client(
        &support::chat::config_with_apis(&[&["chat"], &["chat"]]),
        &upstreams,
    );
    let error = chat_only
        .respond(respond_call(&first_response_turn("op-4")))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                refusal: Refusal::ApiNotServed(Api::Responses),
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.code().as_str(), "invalid_request");
    assert!(error.to_string().contains("speaks the Responses API"), "{error}");
    assert_eq!(upstreams.seen().len(), 1, "nothing more was sent");
}

#[tokio::test(start_paused = true)]
async fn embeddings_go_through_the_same_deployments_and_fall_back() {
    let failing = "[endpoints.embeddings]\nerrors = { 503 = 1.0 }";
    let upstreams = Upstreams::new(&[("primary", profile(failing)), ("fallback", profile(""))]);
    let route = client(&config("retry = { max_attempts = 2 }"), &upstreams);
    let request = EmbeddingsRequest::new("agent", json!(["refund policy", "shipping"]));
    let answer = route.embed(EmbeddingsCall::new(request)).await.unwrap();
    assert_eq!(answer.deployment, "agent[1] gpt-4.1");
    let vectors = answer.response.vectors();
    assert_eq!(vectors.len(), 2);
    assert!(vectors.iter().all(Option::is_some));
    assert_eq!(upstreams.count("primary"), 2, "the primary's two attempts");
    assert!(
        answer.report.answering().tokens.is_some(),
        "embedding tokens are counted"
    );
    assert_eq!(upstreams.seen()[2].body["model"], "gpt-4.1");
}

/// Issue 17: truncation for Responses input drops whole older turns and never a call apart from its output.
#[tokio::test(start_paused = true)]
async fn an_input_over_the_context_is_truncated_by_whole_turns() {
    let small = "[model]\ncontext_limit_chars = 400";
    let upstreams = Upstreams::new(&[("primary", profile(small)), ("fallback", profile(small))]);
    let route = client(&config("context = { on_overflow = \"truncate\" }"), &upstreams);
    let padding = "x".repeat(200);
    let item = |v: Value| serde_json::from_value::<InputItem>(v).unwrap();
    let input = vec![
        InputItem::message("developer", "You handle refunds."),
        InputItem::message("user", format!("What is order 1? {padding}")),
        item(json!({"type": "function_call", "call_id": "c_old", "name": "lookup_order", "arguments": "{}"})),
        InputItem::function_call_output("c_old", format!("{{\"note\": \"{padding}\"}}")),
        InputItem::message("assistant", "It is 5."),
        InputItem::message("user", "Refund order 1234, op=op-5"),
    ];
    let answer = route
        .respond(ResponsesRequest::new("agent", input).into())
        .await
        .expect("answered after truncation");
    let dropped = answer.truncated.expect("it was truncated");
    assert_eq!((dropped.dropped_turns, dropped.dropped_messages), (1, 4));
    let sent = upstreams.seen();
    assert_eq!(
        sent.len(),
        2,
        "refused once, then sent again to the same deployment"
    );
    assert!(sent.iter().all(|s| s.host == "primary"));
    let kept: Vec<&str> = (sent[1].body["input"].as_array().unwrap().iter())
        .map(|i| i["role"].as_str().unwrap_or("call"))
        .collect();
    assert_eq!(kept, ["developer", "user"]);
    assert_eq!(calls(&answer.response), ["lookup_order"]);
}
