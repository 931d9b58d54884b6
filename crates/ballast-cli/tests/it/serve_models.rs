//! `ballast serve`'s model routes, black box (the real binary, chaos providers in this process, real time with
//! short bounds): answers passed through with what Ballast did, OpenAI-style errors with stable codes and an
//! explicit `x-should-retry`, deadlines from the SDKs' headers, streams committed at their first content event
//! and ended by their API's error event, state kept with its deployment, `/v1/models`, `/status`, `/metrics`.

use crate::support;

use std::time::Duration;

use ballast::clock;

use serde_json::{Value, json};
use support::gateway::{client, events as read_events, get_json, header, post, read};
use support::models::Providers;

fn responses(model: &str, op: &str) -> Value {
    json!({"model": model, "input": [{"role": "user", "content": format!("Refund order 1234, op={op}")}]})
}

fn chat(model: &str, op: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": format!("Refund order 1234, op={op}")}]})
}

fn streamed(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_pass_through_with_what_ballast_did() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();

    let (status, headers, answer) = read(
        post(
            &client,
            &gateway,
            "/v1/responses",
            &responses("agent", "op-1"),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "response");
    assert_eq!(answer["output"][0]["name"], "lookup_order");
    assert_eq!(answer["model"], "mock", "the provider's answer, as it sent it");
    assert_eq!(header(&headers, "ballast-attempts"), "1");
    assert!(header(&headers, "ballast-remaining-ms").parse::<u64>().unwrap() > 9_000);
    assert!(!header(&headers, "x-request-id").is_empty());

    let (status, _, answer) = read(
        post(
            &client,
            &gateway,
            "/v1/chat/completions",
            &chat("agent", "op-1"),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "lookup_order"
    );

    let body = json!({"model": "embed", "input": ["a", "b"]});
    let (status, _, answer) = read(post(&client, &gateway, "/v1/embeddings", &body, &[]).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"].as_array().unwrap().len(), 2);

    let models = get_json(&gateway.url("/v1/models")).await;
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"agent") && ids.contains(&"small-fallback"),
        "{ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_are_openai_style_with_a_stable_code_and_say_whether_to_retry() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();

    // The provider fails every attempt: the gateway's own three, then an answer that invites no more.
    let (status, headers, answer) = read(
        post(
            &client,
            &gateway,
            "/v1/responses",
            &responses("failing", "op-2"),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(status, 500, "{answer}");
    assert_eq!(answer["error"]["code"], "upstream_error");
    assert_eq!(answer["error"]["type"], "server_error");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retries are spent"),
        "{answer}"
    );
    assert_eq!(header(&headers, "x-should-retry"), "false");
    assert_eq!(header(&headers, "ballast-attempts"), "3");
    let stats = get_json(&providers.failing.url("/stats")).await;
    assert_eq!(stats["endpoints"]["model"]["requests"], 3, "{stats}");

    // Another Ballast in front (`ballast-hop`): one attempt here, retries happen at one layer.
    let (status, headers, _) = read(
        post(
            &client,
            &gateway,
            "/v1/chat/completions",
            &chat("failing", "op-3"),
            &[("ballast-hop", "1")],
        )
        .await,
    )
    .await;
    assert_eq!((status, header(&headers, "ballast-attempts")), (500, "1"));

    let cases = [
        (
            json!({"model": "nope", "input": "hi"}),
            "/v1/responses",
            404,
            "model_not_found",
        ),
        (json!({"input": "hi"}), "/v1/responses", 400, "invalid_request"),
        (
            json!({"model": "chat-only", "input": "hi"}),
            "/v1/responses",
            400,
            "invalid_request",
        ),
        (
            json!({"model": "agent", "messages": "not a list"}),
            "/v1/chat/completions",
            400,
            "invalid_request",
        ),
    ];
    for (body, path, want_status, code) in cases {
        let (status, headers, answer) = read(post(&client, &gateway, path, &body, &[]).await).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (want_status, Some(code)),
            "{body}: {answer}"
        );
        assert_eq!(header(&headers, "x-should-retry"), "false");
        assert!(
            answer["error"]["message"].as_str().is_some_and(|m| m.len() > 20),
            "{answer}"
        );
    }
    let (status, headers, _) = read(
        client
            .get(gateway.url("/v1/chat/completions"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, header(&headers, "allow")), (405, "POST"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_401_of_a_model_route_is_openai_style() {
    let providers = Providers::start().await;
    let config = support::models::CONFIG.replace(
        "[server]",
        "[[principals]]\nname = \"agents\"\nkey_env = \"AGENTS_KEY\"\n[server]",
    );
    let gateway = providers.gateway_of(&config, &[("AGENTS_KEY", "sk-agents-0123456789")]);
    let client = client();
    let (status, headers, answer) = read(
        post(
            &client,
            &gateway,
            "/v1/responses",
            &responses("agent", "op-4"),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(answer["error"]["code"], "unauthorized", "{answer}");
    assert_eq!(header(&headers, "www-authenticate"), "Bearer");
    let key = [("authorization", "Bearer sk-agents-0123456789")];
    let (status, _, _) = read(
        post(
            &client,
            &gateway,
            "/v1/responses",
            &responses("agent", "op-4"),
            &key,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200);
}

/// DESIGN.md, "Deadline": an SDK's timeout on a request that is not streamed is the time to the whole answer:
/// the gateway answers `deadline_exceeded` before the SDK's own timeout fires.
#[tokio::test(flavor = "multi_thread")]
async fn an_sdk_timeout_is_the_deadline_of_an_answer() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();
    // The reserve (300 ms here) is what keeps the answer ahead of the SDK's timeout on a loaded machine.
    for (name, value) in [("x-stainless-timeout", "2"), ("x-stainless-read-timeout", "2.0")] {
        let started = clock::now();
        let (status, headers, answer) = read(
            post(
                &client,
                &gateway,
                "/v1/responses",
                &responses("slow", "op-5"),
                &[(name, value)],
            )
            .await,
        )
        .await;
        let took = clock::now().saturating_duration_since(started);
        assert_eq!(status, 504, "{name}: {answer}");
        assert_eq!(answer["error"]["code"], "deadline_exceeded");
        assert_eq!(header(&headers, "x-should-retry"), "false");
        assert!(
            took < Duration::from_secs(2),
            "{name}: answered after {took:?}, past the SDK's own timeout"
        );
        assert!(
            took > Duration::from_secs(1),
            "{name}: the provider was given the time: {took:?}"
        );
    }
    // Streamed, the SDK's timeout bounds the time to the first byte: nothing came, so 504 before it.
    let started = clock::now();
    let (status, _, answer) = read(
        post(
            &client,
            &gateway,
            "/v1/responses",
            &streamed(responses("slow", "op-5s")),
            &[("x-stainless-timeout", "2")],
        )
        .await,
    )
    .await;
    let took = clock::now().saturating_duration_since(started);
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (504, Some("deadline_exceeded")),
        "{answer}"
    );
    assert!(
        took < Duration::from_secs(2),
        "answered after {took:?}, past the SDK's own timeout"
    );
}

/// Callers whose own timeouts (1 s, by `ballast-timeout-ms` or the SDKs' `x-stainless-timeout`) are shorter than a
/// healthy model's answers (2 s) get 504 `deadline_exceeded`, and none of it is held against the model: three
/// rounds of eight such callers open no breaker and throttle nothing, and the next caller, with the route's 10 s,
/// is served — by the provider, not refused with `circuit_open`.
#[tokio::test(flavor = "multi_thread")]
async fn callers_with_short_timeouts_never_open_a_healthy_models_breaker() {
    let provider =
        support::gateway::chaos("[endpoints.model]\nlatency = { p50 = \"2s\", p99 = \"2s\" }").await;
    let config = "version = 1\n[store]\nurl = \"sqlite://{dir}/ballast.db\"\n[server]\ndefault_timeout = \"10s\"\n\
                  [[models]]\nname = \"unhurried\"\ndeployments = [ { base_url = \"{slow}/v1\", model = \"mock\" } ]\n";
    let gateway = support::gateway::Gateway::start_with(config, &[("slow", &provider)], &[]);
    let client = client();
    for round in 0..3 {
        let hurried = (0..8).map(|i| {
            let header = if i % 2 == 0 {
                ("ballast-timeout-ms", "1000")
            } else {
                ("x-stainless-timeout", "1")
            };
            let (client, gateway) = (&client, &gateway);
            async move {
                let body = chat("unhurried", &format!("op-hurry-{round}-{i}"));
                read(post(client, gateway, "/v1/chat/completions", &body, &[header]).await).await
            }
        });
        for (status, _, answer) in futures::future::join_all(hurried).await {
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (504, Some("deadline_exceeded")),
                "round {round}: {answer}"
            );
        }
    }
    let (status, headers, answer) = read(
        post(
            &client,
            &gateway,
            "/v1/chat/completions",
            &chat("unhurried", "op-patient"),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "the next caller with time to spare: {answer}");
    assert_eq!(header(&headers, "ballast-attempts"), "1");
}

/// A provider that answers 429 with `Retry-After: 60` to everything: with 30 s left the call ends at once, code
/// `deadline_exceeded` and a message saying the same (not "retries are spent"); and the answer passes the
/// provider's wait on as `Retry-After` (jittered, at most 60 s), so a caller can back off by itself. With a
/// `Retry-After` over `max_retry_after` (here 10 s, the call has 30 s), the same, code `upstream_error`.
#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_providers_429_passes_its_wait_on_with_one_truth() {
    let provider =
        support::gateway::chaos("[endpoints.model]\nerrors = { 429 = 1.0 }\nretry_after = \"60s\"").await;
    for (max_retry_after, code, says) in [
        ("60s", "deadline_exceeded", "deadline"),
        ("10s", "upstream_error", "max_retry_after"),
    ] {
        let config = format!(
            "version = 1\n[store]\nurl = \"sqlite://{{dir}}/ballast.db\"\n[server]\nmax_retry_after = \"{max_retry_after}\"\n\
             [[models]]\nname = \"limited\"\ndeployments = [ {{ base_url = \"{{limited}}/v1\", model = \"mock\" }} ]\n"
        );
        let gateway = support::gateway::Gateway::start_with(&config, &[("limited", &provider)], &[]);
        let started = clock::now();
        let body = chat("limited", "op-limited");
        let (status, headers, answer) = read(
            post(
                &client(),
                &gateway,
                "/v1/chat/completions",
                &body,
                &[("ballast-timeout-ms", "30000")],
            )
            .await,
        )
        .await;
        let took = clock::now().saturating_duration_since(started);
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (429, Some(code)),
            "{answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(says) && !message.contains("retries are spent"),
            "{message}"
        );
        let retry_after: u64 = header(&headers, "retry-after")
            .parse()
            .expect("Retry-After in seconds");
        assert!((55..=60).contains(&retry_after), "Retry-After: {retry_after}");
        assert_eq!(header(&headers, "x-should-retry"), "false");
        assert!(
            took < Duration::from_secs(5),
            "ended at once, not after a wait: {took:?}"
        );
    }
}

/// A provider that answers 429 with `Retry-After: 1` to everything: the gateway waits it out once per retry, and
/// when its attempts are spent the final 429 passes the provider's wait on (`Retry-After` and `retry-after-ms`,
/// jittered by at most a second), on a model route and on a tool route alike, so a caller can back off by itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_429_after_the_retries_passes_the_providers_wait_on() {
    let provider = support::gateway::chaos(
        "[endpoints.model]\nerrors = { 429 = 1.0 }\nretry_after = \"1s\"\n\
         [endpoints.lookup_order]\nerrors = { 429 = 1.0 }\nretry_after = \"1s\"",
    )
    .await;
    let config = "version = 1\n[store]\nurl = \"sqlite://{dir}/ballast.db\"\n\
                  [[models]]\nname = \"limited\"\nretry = { max_attempts = 2 }\n\
                  deployments = [ { base_url = \"{chaos}/v1\", model = \"mock\" } ]\n\
                  [[tools]]\nname = \"lookup_order\"\nretry = { max_attempts = 2 }\n\
                  upstream = { method = \"POST\", url = \"{chaos}/tools/lookup_order\" }\n";
    let gateway = support::gateway::Gateway::start(config, &provider, &[]);
    let deadline = [("ballast-timeout-ms", "30000")];
    for (route, path, body) in [
        ("model", "/v1/chat/completions", chat("limited", "op-limited")),
        ("tool", "/v1/tools/lookup_order", json!({"order_id": "A1"})),
    ] {
        let (status, headers, body) = read(post(&client(), &gateway, path, &body, &deadline).await).await;
        assert_eq!(status, 429, "{route}: {body}");
        assert_eq!(header(&headers, "ballast-attempts"), "2", "{route}");
        assert_eq!(header(&headers, "x-should-retry"), "false", "{route}");
        let millis: u64 = header(&headers, "retry-after-ms")
            .parse()
            .expect("retry-after-ms");
        assert!(
            (1000..=2000).contains(&millis),
            "{route}: retry-after-ms {millis}"
        );
        let seconds: u64 = header(&headers, "retry-after").parse().expect("Retry-After");
        assert!((1..=2).contains(&seconds), "{route}: Retry-After {seconds}");
    }
}

/// The Python SDK's read timeout bounds a stream's gaps: a provider gone silent ends the stream with the API's
/// error event before the SDK's own timeout would cut it without one.
#[tokio::test(flavor = "multi_thread")]
async fn a_silent_gap_ends_the_stream_with_its_error_event_before_the_sdk_gives_up() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();
    let response = post(
        &client,
        &gateway,
        "/v1/responses",
        &streamed(responses("stall", "op-gap")),
        &[("x-stainless-read-timeout", "2.0")],
    )
    .await;
    assert_eq!(response.status(), 200);
    let started = clock::now();
    let (events, _) = read_events(response).await;
    let took = clock::now().saturating_duration_since(started);
    let (name, last) = events.last().expect("events");
    assert_eq!(name, "error", "{events:?}");
    assert!(
        last["message"].as_str().unwrap().contains("stream_idle_timeout"),
        "{last}"
    );
    assert!(
        took < Duration::from_secs(2),
        "ended after {took:?}: the SDK's read timeout would have fired first"
    );
}

/// A streamed answer longer than the SDK's timeout is not cut while its events keep coming: the SDK's timeout
/// bounds the time to the commit point (the status line) and, the Python SDK's, the gaps.
#[tokio::test(flavor = "multi_thread")]
async fn a_stream_longer_than_the_sdk_timeout_is_not_cut() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();
    let started = clock::now();
    let response = post(
        &client,
        &gateway,
        "/v1/responses",
        &streamed(responses("slow-stream", "op-6")),
        &[("x-stainless-timeout", "2"), ("x-stainless-read-timeout", "2.0")],
    )
    .await;
    assert_eq!(response.status(), 200);
    let (events, whole) = read_events(response).await;
    assert!(whole, "the stream ended cleanly");
    assert!(
        clock::now().saturating_duration_since(started) > Duration::from_secs(3),
        "well over the SDK's timeout"
    );
    assert_eq!(
        events.last().map(|(name, _)| name.as_str()),
        Some("response.completed")
    );
}

/// DESIGN.md, "Streaming": an error the provider sends after `response.created` (insufficient quota) falls back
/// before the status line: the caller sees the fallback's stream only, and the failed deployment is skipped.
#[tokio::test(flavor = "multi_thread")]
async fn a_quota_error_after_response_created_falls_back_unseen() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();
    for (path, body) in [
        ("/v1/responses", streamed(responses("quota", "op-7"))),
        ("/v1/chat/completions", streamed(chat("quota", "op-8"))),
    ] {
        let response = post(&client, &gateway, path, &body, &[]).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            header(response.headers(), "ballast-fallback"),
            "quota[1] fallback-model"
        );
        let (events, whole) = read_events(response).await;
        assert!(whole);
        assert!(
            events
                .iter()
                .all(|(name, data)| name != "error" && data.get("error").is_none_or(Value::is_null)),
            "{path}: {events:?}"
        );
    }
    let stats = get_json(&providers.quota.url("/stats")).await;
    assert_eq!(
        stats["endpoints"]["model"]["requests"], 1,
        "skipped after its quota was spent: {stats}"
    );
    let metrics = metrics(&client, &gateway).await;
    assert_eq!(
        sample(&metrics, "ballast_fallbacks_total", &["route=\"quota\""]),
        Some(2.0),
        "both calls answered by the fallback:\n{metrics}"
    );
}

/// The gateway's `/metrics` text.
async fn metrics(client: &reqwest::Client, gateway: &support::gateway::Gateway) -> String {
    let response = client.get(gateway.url("/metrics")).send().await.unwrap();
    response.text().await.unwrap()
}

/// The value of the sample of `name` whose labels include every one of `labels` (`key="value"`).
fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    ballast_testkit::Samples::parse(metrics).get(name, labels)
}

/// A stream cut after its commit point ends with the API's error event, never a clean end.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_stream_ends_with_the_apis_error_event() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();
    let response = post(
        &client,
        &gateway,
        "/v1/responses",
        &streamed(responses("cut", "op-9")),
        &[],
    )
    .await;
    assert_eq!(response.status(), 200);
    let (events, _) = read_events(response).await;
    let (last_name, last) = events.last().expect("events");
    assert_eq!(last_name, "error", "{events:?}");
    assert_eq!(last["type"], "error");
    assert_eq!(
        last["error"]["code"], "upstream_error",
        "an error object the Python SDK raises on: {last}"
    );
    let before = events[events.len() - 2].1["sequence_number"].as_u64().unwrap();
    assert_eq!(last["sequence_number"], before + 1);
    assert!(!events.iter().any(|(name, _)| name == "response.completed"));

    let response = post(
        &client,
        &gateway,
        "/v1/chat/completions",
        &streamed(chat("cut", "op-10")),
        &[],
    )
    .await;
    let (events, _) = read_events(response).await;
    let (_, last) = events.last().expect("events");
    assert_eq!(last["error"]["code"], "upstream_error", "{events:?}");
    assert!(!events.iter().any(|(_, data)| data == "[DONE]"));
}

/// Issue 18: chat token usage is counted — the gateway asks the provider for it even when the caller did not
/// (the SDKs do not by default) — and the extra chunk is dropped when the caller did not ask for it.
#[tokio::test(flavor = "multi_thread")]
async fn chat_streams_count_their_tokens_and_hand_usage_only_to_who_asked() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();
    let answered = ["model=\"agent[0] mock\"", "outcome=\"answered\""];
    let mut asked = streamed(chat("agent", "op-11"));
    asked["stream_options"] = json!({"include_usage": true});
    let mut counted = 0.0;
    for (body, wants_usage) in [(streamed(chat("agent", "op-11")), false), (asked, true)] {
        let (events, _) =
            read_events(post(&client, &gateway, "/v1/chat/completions", &body, &[]).await).await;
        let usage_chunks = events
            .iter()
            .filter(|(_, d)| d.get("usage").is_some_and(|u| !u.is_null()))
            .count();
        assert_eq!(usage_chunks, usize::from(wants_usage), "{events:?}");
        assert_eq!(events.last().unwrap().1, "[DONE]");
        // The chaos provider sends usage only to a request that asks for it: tokens counted for a caller that
        // did not ask mean the gateway asked on its behalf.
        let metrics = metrics(&client, &gateway).await;
        let now = sample(&metrics, "ballast_tokens_total", &answered)
            .unwrap_or_else(|| panic!("no token count:\n{metrics}"));
        assert!(
            now > counted,
            "asked for usage: {wants_usage}; {counted} -> {now}"
        );
        counted = now;
    }
}

/// DESIGN.md, "Fallback and context": a response is continued by the deployment that made it, retrieved and
/// deleted there, and another principal's is not found.
#[tokio::test(flavor = "multi_thread")]
async fn a_response_is_continued_retrieved_and_deleted_where_it_was_made() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();
    let (status, headers, first) = read(
        post(
            &client,
            &gateway,
            "/v1/responses",
            &responses("stateful", "op-state"),
            &[],
        )
        .await,
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["model"], "fallback-model");
    assert_eq!(header(&headers, "ballast-fallback"), "stateful[1] fallback-model");
    let id = first["id"].as_str().unwrap();
    let call_id = first["output"][0]["call_id"].as_str().unwrap();
    let next = json!({"model": "stateful", "previous_response_id": id,
                      "input": [{"type": "function_call_output", "call_id": call_id, "output": "{\"amount\": 3}"}]});
    let (status, headers, second) = read(post(&client, &gateway, "/v1/responses", &next, &[]).await).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        second["model"], "fallback-model",
        "the primary is healthy for this turn, and not asked"
    );
    assert_eq!(header(&headers, "ballast-fallback"), "");
    assert_eq!(second["output"][0]["name"], "create_refund");

    let got = client
        .get(gateway.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    let (status, _, got) = read(got).await;
    assert_eq!((status, got["id"].as_str()), (200, Some(id)));
    let gone = client
        .delete(gateway.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    let (status, _, gone) = read(gone).await;
    assert_eq!((status, &gone["deleted"]), (200, &json!(true)), "{gone}");
    let (status, _, unknown) = read(
        client
            .get(gateway.url("/v1/responses/resp_unknown"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, unknown["error"]["code"].as_str()),
        (404, Some("invalid_request")),
        "{unknown}"
    );
}

/// A stored response belongs to the principal that made it: another principal cannot retrieve, delete or cancel
/// it (404, as for an id that does not exist); its own principal cancels it where it was made; a retrieval
/// asking for a stream is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_response_is_its_principals_and_is_cancelled_where_it_was_made() {
    let providers = Providers::start().await;
    let config = format!(
        "{}\n[[principals]]\nname = \"alice\"\nkey_env = \"ALICE_KEY\"\n\n[[principals]]\nname = \"bob\"\nkey_env = \"BOB_KEY\"\n",
        support::models::CONFIG
    );
    let (alice, bob) = ("alice-key-0123456789", "bob-key-0123456789");
    let gateway = providers.gateway_of(&config, &[("ALICE_KEY", alice), ("BOB_KEY", bob)]);
    let client = client();
    let mut body = responses("agent", "op-30");
    body["background"] = json!(true);
    let made = client
        .post(gateway.url("/v1/responses"))
        .bearer_auth(alice)
        .json(&body)
        .send()
        .await
        .unwrap();
    let (status, _, made) = read(made).await;
    assert_eq!((status, &made["status"]), (200, &json!("queued")), "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/responses/{id}");
    let cancel = format!("{path}/cancel");
    for (method, path) in [
        (reqwest::Method::GET, &path),
        (reqwest::Method::DELETE, &path),
        (reqwest::Method::POST, &cancel),
    ] {
        let answer = client
            .request(method.clone(), gateway.url(path))
            .bearer_auth(bob)
            .send()
            .await
            .unwrap();
        let (status, headers, answer) = read(answer).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (404, Some("invalid_request")),
            "{method} {path} as bob: {answer}"
        );
        assert_eq!(header(&headers, "x-should-retry"), "false");
        assert!(!header(&headers, "x-request-id").is_empty());
    }
    let streamed = client
        .get(gateway.url(&format!("{path}?stream=true")))
        .bearer_auth(alice)
        .send()
        .await
        .unwrap();
    let (status, _, answer) = read(streamed).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]["message"].as_str().unwrap().contains("stream"),
        "{answer}"
    );
    let cancelled = client
        .post(gateway.url(&cancel))
        .bearer_auth(alice)
        .send()
        .await
        .unwrap();
    let (status, _, cancelled) = read(cancelled).await;
    assert_eq!(
        (status, &cancelled["id"], &cancelled["status"]),
        (200, &json!(id), &json!("cancelled")),
        "{cancelled}"
    );
    let got = client
        .get(gateway.url(&path))
        .bearer_auth(alice)
        .send()
        .await
        .unwrap();
    let (status, _, got) = read(got).await;
    assert_eq!((status, &got["status"]), (200, &json!("cancelled")), "{got}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shed_invites_a_retry_and_a_context_overflow_is_handled_per_route() {
    let providers = Providers::start().await;
    let gateway = providers.gateway(&[]);
    let client = client();
    let body = responses("shed", "op-12");
    let (a, b) = tokio::join!(
        post(&client, &gateway, "/v1/responses", &body, &[]),
        post(&client, &gateway, "/v1/responses", &body, &[]),
    );
    let mut statuses = vec![a.status().as_u16(), b.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 503], "one slot, no queue");
    let shed = if a.status() == 503 { a } else { b };
    assert_eq!(header(shed.headers(), "x-should-retry"), "true");
    assert_eq!(header(shed.headers(), "ballast-shed"), "queue_full");
    let wait: u64 = header(shed.headers(), "retry-after").parse().unwrap();
    assert!((1..=60).contains(&wait));
    let (_, _, answer) = read(shed).await;
    assert_eq!(answer["error"]["code"], "overloaded");

    let long = "x".repeat(500);
    let history = json!([
        {"role": "user", "content": format!("earlier question {long}")},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "Refund order 1234, op=op-13"},
    ]);
    let body = json!({"model": "small", "input": history});
    let (status, headers, answer) = read(post(&client, &gateway, "/v1/responses", &body, &[]).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "ballast-truncated"), "2");
    let body = json!({"model": "small-fallback", "messages": history});
    let (status, headers, answer) =
        read(post(&client, &gateway, "/v1/chat/completions", &body, &[]).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["model"], "large-model");
    assert_eq!(
        header(&headers, "ballast-fallback"),
        "small-fallback[1] large-model"
    );

    let status = get_json(&gateway.url("/status")).await;
    let deployments = status["models"]["quota"]["deployments"].as_array().unwrap();
    assert_eq!(deployments[1]["name"], "quota[1] fallback-model");
    assert_eq!(deployments[0]["breaker"]["state"], "closed");
}

/// A client that retries on status alone (the Vercel AI SDK, a hand-written loop) against a failing deployment
/// and a failing read-only tool: one round of upstream attempts; its retries answered from the failure, nothing
/// sent, marked and counted; a different request in the same window, or an SDK's first try, still served.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_retries_on_status_alone_gets_one_round_of_upstream_attempts() {
    let upstream = support::gateway::chaos(
        "[endpoints.model]\nerrors = { 500 = 1.0 }\n[endpoints.lookup_order]\nerrors = { 500 = 1.0 }\n",
    )
    .await;
    let config = "version = 1\n[store]\nurl = \"sqlite://{dir}/ballast.db\"\n\
        [[models]]\nname = \"failing\"\ndeployments = [ { base_url = \"{chaos}/v1\", model = \"mock\" } ]\n\
        retry = { max_attempts = 3, base = \"10ms\", cap = \"20ms\" }\n\
        [[tools]]\nname = \"lookup_order\"\nupstream = { method = \"POST\", url = \"{chaos}/tools/lookup_order\" }\n\
        retry = { max_attempts = 3, base = \"10ms\", cap = \"20ms\" }\n";
    let gateway = support::gateway::Gateway::start_with(config, &[("chaos", &upstream)], &[]);
    let client = client();
    let sent = |endpoint: &'static str| {
        let stats = upstream.url("/stats");
        async move { get_json(&stats).await["endpoints"][endpoint]["requests"].as_u64() }
    };
    let routes = [
        ("/v1/chat/completions", chat("failing", "op-repeat"), "model"),
        (
            "/v1/tools/lookup_order",
            json!({"order_id": "A-1001"}),
            "lookup_order",
        ),
    ];
    for (path, body, endpoint) in &routes {
        // The first try and two retries on status alone, as the AI SDK makes them (its 2 s and 4 s backoff
        // shortened: the window is 10 s).
        let mut answers = Vec::new();
        for _ in 0..3 {
            answers.push(read(post(&client, &gateway, path, body, &[]).await).await);
        }
        let (status, headers, first) = &answers[0];
        assert_eq!(
            (*status, header(headers, "ballast-attempts")),
            (500, "3"),
            "{first}"
        );
        assert_eq!(
            header(headers, "ballast-repeat"),
            "",
            "{path}: the first try is served"
        );
        for (status, headers, again) in &answers[1..] {
            assert_eq!(*status, 500, "{path}: {again}");
            assert_eq!(again, first, "{path}: the failure again, as it was");
            assert_eq!(header(headers, "ballast-repeat"), "replayed", "{path}");
            assert_eq!(header(headers, "ballast-attempts"), "0", "{path}");
            assert_eq!(header(headers, "x-should-retry"), "false", "{path}");
            assert!(!header(headers, "ballast-remaining-ms").is_empty(), "{path}");
        }
        assert_eq!(
            sent(endpoint).await,
            Some(3),
            "{path}: one round of upstream attempts"
        );

        // A different request in the window is served: another body, another run.
        let mut other = body.clone();
        other["note"] = json!("another request");
        let (_, headers, _) = read(post(&client, &gateway, path, &other, &[]).await).await;
        assert_eq!(header(&headers, "ballast-repeat"), "", "{path}");
        let (_, headers, _) =
            read(post(&client, &gateway, path, body, &[("ballast-run-id", "run-2")]).await).await;
        assert_eq!(header(&headers, "ballast-repeat"), "", "{path}");
        assert_eq!(sent(endpoint).await, Some(9), "{path}");

        // `x-stainless-retry-count` is the exact signal: 0 is an SDK's first try, always served; above 0, its
        // retry, answered from the failure.
        let first_try = [("x-stainless-retry-count", "0")];
        let (_, headers, _) = read(post(&client, &gateway, path, body, &first_try).await).await;
        assert_eq!(header(&headers, "ballast-repeat"), "", "{path}");
        let retry = [("x-stainless-retry-count", "1")];
        let (_, headers, _) = read(post(&client, &gateway, path, body, &retry).await).await;
        assert_eq!(header(&headers, "ballast-repeat"), "replayed", "{path}");
        assert_eq!(sent(endpoint).await, Some(12), "{path}");
    }
    let metrics = metrics(&client, &gateway).await;
    for target in ["failing", "lookup_order"] {
        let label = format!("target=\"{target}\"");
        assert_eq!(
            sample(&metrics, "ballast_sdk_retries_total", &[&label]),
            Some(3.0),
            "{target}: two repeats and an SDK's retry\n{metrics}"
        );
    }
}
