//! Anthropic's Messages API through a model route, against chaos upstreams speaking it in process (paused time):
//! the key as `x-api-key` with `anthropic-version`, the commit point (`message_start` and `ping` held back), an
//! `overloaded_error` before content that falls back unseen and one after content that ends the stream, a 529
//! storm that never opens the breaker, the spend limit passed over, the tokens, and token counting.

use crate::support;

use ballast::CallError;
use ballast::model::{MessageParam, MessagesCall, MessagesEvent, MessagesRequest, StreamErrorKind};
use ballast_config::Config;
use ballast_core::BreakerState;
use futures::StreamExt as _;
use support::chat::{PRIMARY_KEY, Upstreams, client, profile};

/// Route `claude` over `primary` (key from [`PRIMARY_KEY`]) and `fallback`, both speaking Messages only, with the
/// route's `extra` TOML keys.
fn config(extra: &str) -> Config {
    Config::from_toml_str(&format!(
        r#"
version = 1
[server]
default_timeout = "10s"
[[models]]
name = "agent"
deployments = [
  {{ base_url = "http://primary/v1", model = "claude-primary", api_key_env = "{}", api = ["messages"] }},
  {{ base_url = "http://fallback/v1", model = "claude-fallback", api = ["messages"] }},
]
{extra}
"#,
        PRIMARY_KEY.0
    ))
    .expect("a valid config")
}

/// The first turn of an agent request for operation `op`.
fn first_turn(op: &str) -> MessagesCall {
    let user = MessageParam::user(format!("Refund order 1234, op={op}"));
    MessagesCall::new(MessagesRequest::new("agent", 1024, vec![user]))
}

/// A stream's events read to the end, and the error it ended with, if any.
async fn drain(
    mut stream: ballast::model::MessagesStream,
) -> (Vec<String>, Option<ballast::model::StreamError>) {
    let mut kinds = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => kinds.push(MessagesEvent::kind(&event).to_owned()),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing after the error");
                return (kinds, Some(error));
            }
        }
    }
    (kinds, None)
}

/// [`drain`], the stream kept for its report.
async fn drain_keeping(
    mut stream: ballast::model::MessagesStream,
) -> (
    Vec<String>,
    Option<ballast::model::StreamError>,
    ballast::model::MessagesStream,
) {
    let mut kinds = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => kinds.push(MessagesEvent::kind(&event).to_owned()),
            Err(error) => return (kinds, Some(error), stream),
        }
    }
    (kinds, None, stream)
}

#[tokio::test(start_paused = true)]
async fn a_message_goes_with_anthropics_key_header_and_version_and_its_tokens_count() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let answer = route.message(first_turn("op-m1")).await.expect("an answer");
    assert_eq!(answer.deployment, "agent[0] claude-primary");
    let uses = answer.response.tool_uses();
    assert_eq!(uses[0].name, "lookup_order", "{:?}", answer.response);
    assert_eq!(answer.response.stop_reason.as_deref(), Some("tool_use"));
    let seen = &upstreams.seen()[0];
    assert_eq!(seen.method_and_path(), "POST /v1/messages");
    assert_eq!(seen.headers["x-api-key"], PRIMARY_KEY.1);
    assert!(
        !seen.headers.contains_key("authorization"),
        "Anthropic's key header only"
    );
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    assert_eq!(seen.body["model"], "claude-primary");
    assert!(seen.body.get("stream").is_none());
    let tokens = answer.report.tokens.expect("tokens").answered;
    let usage = &answer.response.usage.as_ref().expect("usage");
    assert_eq!(tokens.prompt_tokens, usage["input_tokens"].as_u64().unwrap());
    assert_eq!(tokens.completion_tokens, usage["output_tokens"].as_u64().unwrap());
    assert!(
        answer
            .headers
            .contains_key("anthropic-ratelimit-requests-remaining")
    );

    // The caller's version and betas go upstream as headers, never in the body.
    let mut call = first_turn("op-m2");
    let mut request = call.request().clone();
    request.version = Some("2024-10-22".into());
    request.beta = Some("token-efficient-tools-2025-02-19".into());
    call = MessagesCall::new(request);
    route.message(call).await.expect("an answer");
    let seen = &upstreams.seen()[1];
    assert_eq!(seen.headers["anthropic-version"], "2024-10-22");
    assert_eq!(seen.headers["anthropic-beta"], "token-efficient-tools-2025-02-19");
    assert!(seen.body.get("version").is_none() && seen.body.get("beta").is_none());
}

/// An `overloaded_error` event after `message_start` (Anthropic under load) comes before the commit point: the
/// call moves on, and the caller sees one `message_start` — the fallback's — and a clean end with the tokens of
/// both events.
#[tokio::test(start_paused = true)]
async fn an_overloaded_error_before_content_falls_back_unseen() {
    let overloaded = r#"
[endpoints.model]
stream = { error_delivery = "events" }
[[scripts]]
endpoint = "model"
op = "op-o1"
steps = ["529", "529", "529"]
"#;
    let upstreams = Upstreams::new(&[("primary", profile(overloaded)), ("fallback", profile(""))]);
    let route = client(
        &config("retry = { max_attempts = 2, base = \"10ms\", cap = \"20ms\" }"),
        &upstreams,
    );
    let stream = route
        .message_stream(first_turn("op-o1"))
        .await
        .expect("committed");
    assert_eq!(stream.deployment(), "agent[1] claude-fallback");
    let report = stream.report();
    assert_eq!(report.attempts.len(), 2, "retried on the primary first: {report}");
    let (kinds, error, stream) = drain_keeping(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(kinds.first().map(String::as_str), Some("message_start"));
    assert_eq!(
        kinds.iter().filter(|k| *k == "message_start").count(),
        1,
        "{kinds:?}"
    );
    assert!(!kinds.contains(&"error".to_owned()), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("message_stop"));
    assert!(kinds.contains(&"content_block_delta".to_owned()), "{kinds:?}");
    // The input tokens of `message_start` and the output of `message_delta`, as the fallback's JSON answer says.
    let tokens = stream
        .report()
        .answering()
        .tokens
        .expect("the answer's tokens")
        .answered;
    let answer = route.message(first_turn("op-o1")).await.expect("answered");
    let usage = answer.response.usage.expect("usage");
    assert_eq!(
        (tokens.prompt_tokens, tokens.completion_tokens),
        (
            usage["input_tokens"].as_u64().unwrap(),
            usage["output_tokens"].as_u64().unwrap()
        ),
    );
    assert!(
        tokens.prompt_tokens > 0 && tokens.completion_tokens > 0,
        "{tokens:?}"
    );
    // Overload is not a failure: the primary's breaker counted none of it.
    let breaker = route.breaker(0).unwrap().snapshot(ballast::clock::now());
    assert_eq!(breaker.window_failures, 0, "{breaker:?}");
    assert_eq!(
        upstreams.seen()[2].headers.get("x-api-key"),
        None,
        "the fallback has no key"
    );
}

/// After the commit point nothing is retried: an `overloaded_error` after content ends the stream with the
/// upstream's error, never `message_stop` — and, overload, it is not a failure for the breaker.
#[tokio::test(start_paused = true)]
async fn an_overloaded_error_after_content_ends_the_stream_with_it() {
    let late = r#"
[endpoints.model]
stream = { error_after_chunks = 1 }
[[scripts]]
endpoint = "model"
op = "op-l1"
steps = ["stream_error"]
"#;
    let upstreams = Upstreams::new(&[("primary", profile(late)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let stream = route
        .message_stream(first_turn("op-l1"))
        .await
        .expect("committed");
    assert_eq!(stream.deployment(), "agent[0] claude-primary");
    let (kinds, error) = drain(stream).await;
    let error = error.expect("the stream fails");
    let StreamErrorKind::Upstream(upstream) = &error.kind else {
        panic!("the upstream's error: {error:?}")
    };
    assert_eq!(upstream["type"], "overloaded_error");
    assert!(kinds.contains(&"content_block_delta".to_owned()), "{kinds:?}");
    assert!(!kinds.contains(&"message_stop".to_owned()), "{kinds:?}");
    assert_eq!(
        upstreams.count("fallback"),
        0,
        "nothing is retried after the commit point"
    );
    let breaker = route.breaker(0).unwrap().snapshot(ballast::clock::now());
    assert_eq!(
        breaker.window_failures, 0,
        "overload is not a failure: {breaker:?}"
    );
}

/// A storm of 529s — every attempt of every call — never opens the breaker: a crowd is not a dead upstream.
#[tokio::test(start_paused = true)]
async fn a_storm_of_529s_does_not_open_the_breaker() {
    let storm = "[endpoints.model]\nerrors = { 529 = 1.0 }";
    let upstreams = Upstreams::new(&[("primary", profile(storm)), ("fallback", profile(""))]);
    let config = config(
        "retry = { max_attempts = 2, base = \"10ms\", cap = \"20ms\" }\n\
         breaker = { failure_rate = 0.5, min_calls = 5, consecutive_failures = 3 }",
    );
    let route = client(&config, &upstreams);
    for i in 0..30 {
        let answer = route.message(first_turn(&format!("op-s{i}"))).await;
        assert!(answer.is_ok(), "the fallback answers: {:?}", answer.err());
    }
    let breaker = route.breaker(0).unwrap().snapshot(ballast::clock::now());
    assert_eq!(breaker.state, BreakerState::Closed, "{breaker:?}");
    assert_eq!(breaker.window_failures, 0, "{breaker:?}");
}

/// Anthropic's spend limit (a 429 that no wait fixes): never retried, the deployment passed over like a spent
/// quota, the call answered by the next one.
#[tokio::test(start_paused = true)]
async fn a_spend_limit_is_not_retried_and_the_deployment_is_passed_over() {
    let limit = "[[scripts]]\nendpoint = \"model\"\nop = \"op-q1\"\nsteps = [\"spend_limit\"]";
    let upstreams = Upstreams::new(&[("primary", profile(limit)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let answer = route
        .message(first_turn("op-q1"))
        .await
        .expect("the fallback answers");
    assert_eq!(answer.deployment, "agent[1] claude-fallback");
    assert_eq!(answer.report.attempts.len(), 1, "not retried: {}", answer.report);
    let told = answer.report.to_string();
    assert!(
        told.contains("429 insufficient_quota; waiting will not help"),
        "{told}"
    );
    route.message(first_turn("op-q2")).await.expect("an answer");
    assert_eq!(upstreams.count("primary"), 1, "passed over, not asked again");

    // Alone on its route, the spend limit is the answer, after one attempt.
    let alone = Config::from_toml_str(
        "version = 1\n[[models]]\nname = \"agent\"\n\
         deployments = [ { base_url = \"http://primary/v1\", model = \"claude\", api = [\"messages\"] } ]",
    )
    .unwrap();
    let upstreams = Upstreams::new(&[("primary", profile(limit))]);
    let route = client(&alone, &upstreams);
    let Err(CallError::Upstream { status, body, .. }) = route.message(first_turn("op-q1")).await else {
        panic!("the spend limit is the answer")
    };
    assert_eq!(status, 429);
    assert_eq!(
        body["error"]["details"]["error_code"],
        "enforced_spend_limit_reached"
    );
    assert_eq!(upstreams.count("primary"), 1);
}

#[tokio::test(start_paused = true)]
async fn tokens_are_counted_by_the_first_messages_deployment_and_nothing_is_spent() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let mut call = first_turn("op-c1");
    let mut request = call.request().clone();
    request.extra.remove("max_tokens");
    call = MessagesCall::new(request);
    let counted = route.count_tokens(call).await.expect("a count");
    assert!(counted.response.input_tokens > 0, "{:?}", counted.response);
    assert!(counted.report.tokens.is_none(), "counting spends nothing");
    let seen = &upstreams.seen()[0];
    assert_eq!(seen.method_and_path(), "POST /v1/messages/count_tokens");
    assert_eq!(seen.headers["anthropic-version"], "2023-06-01");
    let answer = route.message(first_turn("op-c1")).await.expect("an answer");
    assert_eq!(
        Some(counted.response.input_tokens),
        answer
            .response
            .usage
            .as_ref()
            .and_then(|u| u["input_tokens"].as_u64()),
        "the count is what the message spends"
    );
}

/// A deployment speaks OpenAI's APIs unless it names Messages: a Messages call to a route of none is refused
/// before anything is sent, and a chat call to a Messages-only route too.
#[tokio::test(start_paused = true)]
async fn only_deployments_that_name_messages_are_sent_it() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let openai = client(&support::chat::config(""), &upstreams);
    let refused = openai.message(first_turn("op-r1")).await.expect_err("refused");
    assert!(matches!(refused, CallError::Refused { .. }), "{refused}");
    let route = client(&config(""), &upstreams);
    let chat = support::chat::call(&support::chat::first_turn("op-r1"));
    let refused = route.complete(chat).await.expect_err("refused");
    assert!(matches!(refused, CallError::Refused { .. }), "{refused}");
    assert!(upstreams.seen().is_empty());
}

/// A conversation too long for the model's context (Anthropic's "prompt is too long: N tokens > M maximum"), on a
/// route that truncates: older turns go whole, the tool use stays with its result, and the call is answered.
#[tokio::test(start_paused = true)]
async fn a_prompt_too_long_is_truncated_by_whole_turns_and_resent() {
    let small = "[model]\ncontext_limit_chars = 400";
    let upstreams = Upstreams::new(&[("primary", profile(small)), ("fallback", profile(""))]);
    let route = client(&config("context = { on_overflow = \"truncate\" }"), &upstreams);
    let old = "An earlier question about another order, long enough to matter. ".repeat(3);
    let messages = vec![
        MessageParam::user(old.clone()),
        MessageParam::of("assistant", serde_json::Value::String(old)),
        MessageParam::user("Refund order 1234, op=op-t1"),
    ];
    let answer = route
        .message(MessagesCall::new(MessagesRequest::new("agent", 1024, messages)))
        .await
        .expect("answered after the cut");
    let truncated = answer.truncated.expect("truncated");
    assert_eq!((truncated.dropped_messages, truncated.dropped_turns), (2, 1));
    let seen = upstreams.seen();
    assert_eq!(seen.len(), 2, "the long one, then the cut one");
    assert_eq!(seen[1].body["messages"].as_array().map(Vec::len), Some(1));
    assert_eq!(answer.response.tool_uses()[0].name, "lookup_order");
}

/// One deployment speaking both OpenAI's chat and Anthropic's Messages (a LiteLLM proxy, say) sends its one key
/// as each API wants it: `Authorization: Bearer` to `/chat/completions`, `x-api-key` to `/messages`.
#[tokio::test(start_paused = true)]
async fn a_deployment_of_both_apis_sends_its_key_as_each_wants_it() {
    let upstreams = Upstreams::new(&[("primary", profile("")), ("fallback", profile(""))]);
    let route = client(
        &support::chat::config_with_apis(&[&["chat", "messages"], &["chat"]]),
        &upstreams,
    );
    route
        .complete(support::chat::call(&support::chat::first_turn("op-k1")))
        .await
        .expect("chat");
    route.message(first_turn("op-k2")).await.expect("a message");
    let seen = upstreams.seen();
    assert_eq!(seen[0].method_and_path(), "POST /v1/chat/completions");
    assert_eq!(
        seen[0].headers["authorization"],
        format!("Bearer {}", PRIMARY_KEY.1)
    );
    assert!(!seen[0].headers.contains_key("x-api-key") && !seen[0].headers.contains_key("anthropic-version"));
    assert_eq!(seen[1].method_and_path(), "POST /v1/messages");
    assert_eq!(seen[1].headers["x-api-key"], PRIMARY_KEY.1);
    assert!(!seen[1].headers.contains_key("authorization"));
}

/// Anthropic's spent credit is a 400 whose words alone say so ("credit balance is too low"): not the caller's
/// mistake to answer, but a deployment to pass over — the call moves on and is answered.
#[tokio::test(start_paused = true)]
async fn a_spent_credit_said_in_words_moves_on_to_the_next_deployment() {
    let spent = "[[scripts]]\nendpoint = \"model\"\nop = \"op-q3\"\nsteps = [\"insufficient_quota\"]";
    let upstreams = Upstreams::new(&[("primary", profile(spent)), ("fallback", profile(""))]);
    let route = client(&config(""), &upstreams);
    let answer = route
        .message(first_turn("op-q3"))
        .await
        .expect("the fallback answers");
    assert_eq!(answer.deployment, "agent[1] claude-fallback");
    assert_eq!(answer.report.attempts.len(), 1, "{}", answer.report);
    assert!(answer.report.to_string().contains("400"), "{}", answer.report);
}
