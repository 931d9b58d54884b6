//! The Responses API over the router: the agent loop both ways against chat's, the stream against the stored
//! answer, stored responses (`GET`, `DELETE`, `cancel`, `store: false`, background), conversations, and ids that
//! no other server hands out.

use crate::support;

use std::time::Duration;

use axum::Router;
use ballast_chaos::{Profile, router};
use serde_json::{Value, json};
use support::oneshot::{Sse, get, post, send};

const ASK: &str = "Refund order 1234, op=op-77";

/// A server with no faults and no pause between streamed events.
fn server() -> Router {
    let mut profile = Profile::default();
    profile.model.chunk_interval = Duration::ZERO;
    router(profile)
}

fn tool_output(name: &str) -> &'static str {
    match name {
        "lookup_order" => r#"{"order_id": "1234", "amount": 19.99}"#,
        _ => r#"{"refund_id": "re_1", "status": "succeeded"}"#,
    }
}

const TOOLS: [&str; 3] = ["lookup_order", "create_refund", "process_payment"];

/// The calls (call id, name, arguments) and the final text of one conversation.
#[derive(Debug, PartialEq)]
struct Played {
    calls: Vec<(String, String, String)>,
    text: String,
}

async fn play_chat(server: &Router) -> Played {
    let tools: Vec<Value> = TOOLS
        .iter()
        .map(|name| json!({"type": "function", "function": {"name": name, "parameters": {}}}))
        .collect();
    let mut messages = vec![json!({"role": "user", "content": ASK})];
    let mut calls = Vec::new();
    loop {
        let body = json!({"model": "mock", "messages": messages, "tools": tools});
        let answer = post(server, "/v1/chat/completions", &body).await.json();
        let message = answer["choices"][0]["message"].clone();
        let Some(call) = message["tool_calls"].get(0).cloned() else {
            let text = message["content"].as_str().expect("text").to_owned();
            return Played { calls, text };
        };
        let id = call["id"].as_str().expect("id").to_owned();
        let name = call["function"]["name"].as_str().expect("name").to_owned();
        let arguments = call["function"]["arguments"]
            .as_str()
            .expect("arguments")
            .to_owned();
        messages.push(message);
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": tool_output(&name)}));
        calls.push((id, name, arguments));
    }
}

/// The agent loop over `/v1/responses`: `stateful` sends only the new `function_call_output` with
/// `previous_response_id`; otherwise the whole input goes each turn, with the earlier output items.
async fn play_responses(server: &Router, stateful: bool) -> Played {
    let tools: Vec<Value> = TOOLS
        .iter()
        .map(|name| json!({"type": "function", "name": name, "parameters": {}}))
        .collect();
    let mut input = vec![json!({"role": "user", "content": ASK})];
    let mut previous = Value::Null;
    let mut calls = Vec::new();
    loop {
        let body = json!({"model": "mock", "input": input, "tools": tools, "previous_response_id": previous});
        let reply = post(server, "/v1/responses", &body).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let response = reply.json();
        assert_eq!(response["previous_response_id"], previous);
        let output = response["output"].as_array().expect("output").clone();
        let Some(call) = output
            .iter()
            .find(|item| item["type"] == "function_call")
            .cloned()
        else {
            let text = output[0]["content"][0]["text"].as_str().expect("text").to_owned();
            return Played { calls, text };
        };
        let id = call["call_id"].as_str().expect("call_id").to_owned();
        let name = call["name"].as_str().expect("name").to_owned();
        let result = json!({"type": "function_call_output", "call_id": id, "output": tool_output(&name)});
        calls.push((
            id,
            name,
            call["arguments"].as_str().expect("arguments").to_owned(),
        ));
        if stateful {
            previous = response["id"].clone();
            input = vec![result];
        } else {
            input.extend(output);
            input.push(result);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_agent_loop_through_responses_makes_chats_calls_both_ways() {
    let server = server();
    let chat = play_chat(&server).await;
    assert_eq!(
        chat.calls.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["call_lookup_op-77", "call_refund_op-77"]
    );
    assert!(chat.text.contains("went through"), "{}", chat.text);
    assert_eq!(
        play_responses(&server, true).await,
        chat,
        "with previous_response_id"
    );
    assert_eq!(play_responses(&server, false).await, chat, "stateless");
}

#[tokio::test(start_paused = true)]
async fn a_conversation_keeps_the_items_of_its_turns() {
    let server = server();
    let first = post(
        &server,
        "/v1/responses",
        &json!({"input": ASK, "conversation": "conv_1"}),
    )
    .await
    .json();
    assert_eq!(first["conversation"], json!({"id": "conv_1"}));
    let call_id = first["output"][0]["call_id"].clone();
    let output =
        json!({"type": "function_call_output", "call_id": call_id, "output": tool_output("lookup_order")});
    let second = post(
        &server,
        "/v1/responses",
        &json!({"input": [output], "conversation": {"id": "conv_1"}}),
    )
    .await
    .json();
    assert_eq!(second["output"][0]["name"], "create_refund");
    // Another conversation starts afresh.
    let other = post(
        &server,
        "/v1/responses",
        &json!({"input": [], "conversation": "conv_2"}),
    )
    .await
    .json();
    assert_eq!(other["output"][0]["type"], "message", "greeted: no user turn yet");
}

#[tokio::test(start_paused = true)]
async fn a_stream_is_openais_events_and_reassembles_into_the_stored_answer() {
    let server = server();
    let reply = post(&server, "/v1/responses", &json!({"input": ASK, "stream": true})).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "text/event-stream");
    assert!(!reply.failed);
    let events = reply.events();
    let mut arguments = String::new();
    for (index, event) in events.iter().enumerate() {
        let data = event.json();
        assert_eq!(event.name(), data["type"].as_str(), "event: names the type");
        assert_eq!(data["sequence_number"], index);
        if data["type"] == "response.function_call_arguments.delta" {
            arguments.push_str(data["delta"].as_str().expect("a delta"));
        }
    }
    let names: Vec<&str> = events.iter().filter_map(Sse::name).collect();
    assert_eq!(
        names[..3],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added"
        ]
    );
    assert_eq!(
        names[names.len() - 3..],
        [
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let completed = events.last().expect("events").json()["response"].clone();
    assert_eq!(completed["output"][0]["arguments"], arguments);
    let id = completed["id"].as_str().expect("an id");
    assert_eq!(
        get(&server, &format!("/v1/responses/{id}")).await.json(),
        completed
    );
    // The same turn not streamed: the same answer under another id.
    let plain = post(&server, "/v1/responses", &json!({"input": ASK}))
        .await
        .json();
    assert_ne!(plain["id"], completed["id"]);
    for key in ["call_id", "name", "arguments", "status"] {
        assert_eq!(plain["output"][0][key], completed["output"][0][key], "{key}");
    }
    assert_eq!(plain["usage"], completed["usage"]);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_previous_response_is_refused_and_no_two_servers_share_an_id() {
    let (a, b) = (server(), server());
    let from_a = post(&a, "/v1/responses", &json!({"input": ASK})).await.json();
    let from_b = post(&b, "/v1/responses", &json!({"input": ASK})).await.json();
    assert_ne!(from_a["id"], from_b["id"], "the same conversation on two servers");
    let id = from_a["id"].as_str().expect("an id");
    assert!(id.starts_with("resp_"), "{id}");
    let continued = json!({"input": [], "previous_response_id": id});
    assert_eq!(post(&a, "/v1/responses", &continued).await.status, 200);
    let refused = post(&b, "/v1/responses", &continued).await;
    assert_eq!(refused.status, 400);
    assert_eq!(
        refused.json(),
        json!({"error": {
            "message": format!("Previous response with id '{id}' not found."),
            "type": "invalid_request_error",
            "param": "previous_response_id",
            "code": "previous_response_not_found",
        }})
    );
    let stats = get(&b, "/stats").await.json();
    assert_eq!(stats["endpoints"]["model"]["statuses"]["400"], 1, "{stats}");
}

#[tokio::test(start_paused = true)]
async fn stored_responses_are_read_deleted_and_not_cancelled() {
    let server = server();
    let created = post(&server, "/v1/responses", &json!({"input": ASK}))
        .await
        .json();
    let path = format!("/v1/responses/{}", created["id"].as_str().expect("an id"));
    let read = get(&server, &path).await;
    assert_eq!((read.status.as_u16(), read.json()), (200, created.clone()));
    let cancel = post(&server, &format!("{path}/cancel"), &json!({})).await;
    assert_eq!(cancel.status, 400);
    assert_eq!(
        cancel.json()["error"]["message"],
        "Cannot cancel a synchronous response."
    );
    let deleted = send(&server, "DELETE", &path, None, &[]).await;
    assert_eq!(
        deleted.json(),
        json!({"id": created["id"], "object": "response", "deleted": true})
    );
    let gone = get(&server, &path).await;
    assert_eq!(gone.status, 404);
    assert_eq!(
        gone.json()["error"]["message"],
        format!(
            "Response with id '{}' not found.",
            created["id"].as_str().unwrap_or_default()
        )
    );
    assert_eq!(send(&server, "DELETE", &path, None, &[]).await.status, 404);
    assert_eq!(
        post(&server, "/v1/responses/resp_nope/cancel", &json!({}))
            .await
            .status,
        404
    );
}

#[tokio::test(start_paused = true)]
async fn a_response_not_stored_cannot_be_read_or_continued() {
    let server = server();
    let created = post(&server, "/v1/responses", &json!({"input": ASK, "store": false}))
        .await
        .json();
    assert_eq!(created["store"], false);
    assert_eq!(created["status"], "completed");
    let id = created["id"].as_str().expect("an id");
    assert_eq!(get(&server, &format!("/v1/responses/{id}")).await.status, 404);
    let continued = post(&server, "/v1/responses", &json!({"previous_response_id": id})).await;
    assert_eq!(continued.json()["error"]["code"], "previous_response_not_found");
}

#[tokio::test(start_paused = true)]
async fn a_background_response_is_queued_then_answered_or_cancelled() {
    let server = server();
    let queued = post(
        &server,
        "/v1/responses",
        &json!({"input": ASK, "background": true}),
    )
    .await
    .json();
    assert_eq!(
        (queued["status"].as_str(), queued["background"].as_bool()),
        (Some("queued"), Some(true))
    );
    assert_eq!(queued["output"], json!([]));
    let path = format!("/v1/responses/{}", queued["id"].as_str().expect("an id"));
    let done = get(&server, &path).await.json();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["call_id"], "call_lookup_op-77");
    let late = post(&server, &format!("{path}/cancel"), &json!({})).await;
    assert_eq!(late.status, 400);

    let queued = post(
        &server,
        "/v1/responses",
        &json!({"input": ASK, "background": true}),
    )
    .await
    .json();
    let path = format!("/v1/responses/{}", queued["id"].as_str().expect("an id"));
    let cancelled = post(&server, &format!("{path}/cancel"), &json!({})).await;
    assert_eq!(cancelled.status, 200);
    assert_eq!(cancelled.json()["status"], "cancelled");
    assert_eq!(get(&server, &path).await.json()["status"], "cancelled");
    assert_eq!(
        post(&server, &format!("{path}/cancel"), &json!({})).await.json()["status"],
        "cancelled"
    );
    let refused = post(
        &server,
        "/v1/responses",
        &json!({"input": ASK, "background": true, "store": false}),
    )
    .await;
    assert_eq!(refused.status, 400);
}

#[tokio::test(start_paused = true)]
async fn a_profile_swap_keeps_the_stored_responses() {
    let server = server();
    let created = post(&server, "/v1/responses", &json!({"input": ASK}))
        .await
        .json();
    let swapped = send(
        &server,
        "POST",
        "/admin/profile",
        Some(&json!({"preset": "none"})),
        &[],
    )
    .await;
    assert_eq!(swapped.status, 200, "{}", swapped.text);
    let continued = json!({"input": [], "previous_response_id": created["id"]});
    assert_eq!(post(&server, "/v1/responses", &continued).await.status, 200);
}

#[tokio::test(start_paused = true)]
async fn invalid_requests_are_openais_400_naming_the_field() {
    let server = server();
    let refused = post(
        &server,
        "/v1/responses",
        &json!({"input": [{"type": "function_call", "name": "f"}]}),
    )
    .await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["error"]["param"], "input[0].call_id");
    let chat_tools =
        json!({"input": ASK, "tools": [{"type": "function", "function": {"name": "lookup_order"}}]});
    assert_eq!(
        post(&server, "/v1/responses", &chat_tools).await.json()["error"]["param"],
        "tools[0].name"
    );
    let not_json = send(&server, "POST", "/v1/responses", None, &[]).await;
    assert_eq!(not_json.status, 400);
    assert_eq!(not_json.json()["error"]["type"], "invalid_request_error");
    let unknown_fields =
        json!({"input": ASK, "prompt_cache_key": "k", "service_tier": "flex", "include": []});
    assert_eq!(post(&server, "/v1/responses", &unknown_fields).await.status, 200);
}
