//! The gateway's model routes with the clients agents really use: the official OpenAI Python and Node SDKs, the
//! OpenAI Agents SDK and the official Anthropic Python and Node SDKs (installed by `scripts/sdk-clients`), against
//! the real `ballast serve` in front of chaos providers. Each SDK runs every scenario of `tests/sdk/README.md` in one
//! process; this file says what each must have seen.

use crate::support;

use std::collections::HashMap;

use serde_json::Value;
use support::gateway::{Gateway, get_json};
use support::models::Providers;
use support::sdk::{Program, installed, run};

/// The principal the SDKs call as.
const KEY: (&str, &str) = ("AGENTS_KEY", "sk-agents-0123456789abcdef");

fn with_principal() -> String {
    support::models::config()
        .principal("agents", "AGENTS_KEY")
        .build()
}

fn line<'a>(lines: &'a HashMap<String, Value>, scenario: &str) -> &'a Value {
    lines
        .get(scenario)
        .unwrap_or_else(|| panic!("no result for {scenario}: {:?}", lines.keys().collect::<Vec<_>>()))
}

fn names(calls: &Value) -> Vec<&str> {
    (calls.as_array().into_iter().flatten())
        .filter_map(|c| c["name"].as_str())
        .collect()
}

/// What both SDKs must have seen, scenario by scenario, for both APIs.
fn check(sdk: &str, lines: &HashMap<String, Value>) {
    for api in ["responses", "chat"] {
        let at = |scenario: &str| line(lines, &format!("{api}.{scenario}"));
        let what = |scenario: &str| format!("{sdk} {api}.{scenario}: {}", at(scenario));

        let loop_ = at("tool_call");
        assert_eq!(loop_["ok"], true, "{}", what("tool_call"));
        let turns = loop_["turns"].as_array().expect("turns");
        assert_eq!(
            names(&turns[0]["calls"]),
            ["lookup_order"],
            "{}",
            what("tool_call")
        );
        assert_eq!(
            names(&turns[1]["calls"]),
            ["create_refund"],
            "{}",
            what("tool_call")
        );
        assert!(
            loop_["final_text"]
                .as_str()
                .unwrap()
                .contains(loop_["op"].as_str().unwrap()),
            "{}",
            what("tool_call")
        );

        // A stream reassembled is the JSON answer: the call's name and arguments, the text.
        let stream = at("stream");
        assert_eq!(stream["ok"], true, "{}", what("stream"));
        assert_eq!(
            stream["stream"]["calls"],
            stream["json"]["calls"],
            "{}",
            what("stream")
        );
        assert!(
            stream["stream"]["completed"].as_bool().unwrap(),
            "{}",
            what("stream")
        );
        assert_eq!(
            stream["final_stream"]["text"],
            stream["final_json"]["text"],
            "{}",
            what("stream")
        );
        assert!(
            !stream["final_json"]["text"].as_str().unwrap().is_empty(),
            "{}",
            what("stream")
        );

        // Retries spent at the gateway: the SDK is told not to retry, so the provider sees only the gateway's.
        let failing = at("failing");
        assert_eq!(failing["error"]["status"], 500, "{}", what("failing"));
        assert_eq!(failing["error"]["code"], "upstream_error", "{}", what("failing"));
        assert_eq!(failing["sdk_requests"], 1, "{}", what("failing"));
        assert_eq!(
            failing["error"]["headers"]["x-should-retry"],
            "false",
            "{}",
            what("failing")
        );
        assert_eq!(
            failing["error"]["headers"]["ballast-attempts"],
            "3",
            "{}",
            what("failing")
        );

        // A shed invites the SDK's retry, which is served.
        let shed = at("shed");
        let outcomes = shed["outcomes"].as_array().expect("outcomes");
        assert!(outcomes.iter().all(|o| o["ok"] == true), "{}", what("shed"));
        let retried: Vec<&Value> = outcomes.iter().filter(|o| o["sdk_retried"] == true).collect();
        assert_eq!(retried.len(), 1, "{}", what("shed"));
        let first = &retried[0]["http"][0];
        assert_eq!(
            (
                first["status"].as_u64(),
                first["headers"]["x-should-retry"].as_str()
            ),
            (Some(503), Some("true")),
            "{}",
            what("shed")
        );

        // The SDK's timeout is the gateway's deadline: its 504 arrives before the SDK gives up.
        let timeout = at("timeout");
        assert_eq!(timeout["error"]["status"], 504, "{}", what("timeout"));
        assert_eq!(
            timeout["error"]["code"],
            "deadline_exceeded",
            "{}",
            what("timeout")
        );
        assert!(
            timeout["elapsed_ms"].as_f64().unwrap() < 2000.0,
            "{}",
            what("timeout")
        );

        // A stream longer than the SDK's timeout, with short gaps, is not cut.
        let long = at("long_stream");
        assert_eq!(
            (long["ok"].as_bool(), long["completed"].as_bool()),
            (Some(true), Some(true)),
            "{}",
            what("long_stream")
        );
        assert!(
            long["elapsed_ms"].as_f64().unwrap() > 2000.0,
            "{}",
            what("long_stream")
        );

        // An error event after the preamble (insufficient quota) falls back unseen.
        let quota = at("quota_fallback");
        for part in ["stream", "json"] {
            assert_eq!(quota[part]["ok"], true, "{}", what("quota_fallback"));
            assert_eq!(
                quota[part]["model"],
                "fallback-model",
                "{}",
                what("quota_fallback")
            );
        }

        // A stream cut after its commit point raises in the SDK: never a clean end.
        let cut = at("cut");
        assert_eq!(cut["ok"], false, "{}", what("cut"));
        assert!(cut["error"].is_object(), "{}", what("cut"));
        assert_ne!(cut["completed"], true, "{}", what("cut"));

        let truncated = at("context_truncate");
        assert_eq!(truncated["ok"], true, "{}", what("context_truncate"));
        let dropped: u64 = truncated["headers"]["ballast-truncated"]
            .as_str()
            .unwrap_or("0")
            .parse()
            .unwrap();
        assert!(dropped > 0, "{}", what("context_truncate"));
        let larger = at("context_fallback");
        assert_eq!(
            (larger["ok"].as_bool(), larger["model"].as_str()),
            (Some(true), Some("large-model")),
            "{}",
            what("context_fallback")
        );
    }
    let previous = line(lines, "responses.previous_response");
    assert_eq!(previous["turn1"]["model"], "fallback-model", "{sdk}: {previous}");
    assert_eq!(
        previous["turn2"]["model"], "fallback-model",
        "{sdk}: the deployment that made it: {previous}"
    );
    assert_eq!(
        names(&previous["turn2"]["calls"]),
        ["create_refund"],
        "{sdk}: {previous}"
    );
    let embeddings = line(lines, "embeddings");
    assert_eq!(embeddings["count"], 2, "{sdk}: {embeddings}");
    let models = line(lines, "models");
    assert!(
        models["ids"].as_array().unwrap().iter().any(|id| id == "agent"),
        "{sdk}: {models}"
    );
    assert_eq!(models["retrieved"]["id"], "agent", "{sdk}: {models}");
    // The gateway's 404s on the SDK's paths are OpenAI's envelope: the SDK shows the code and the message.
    for (what, code) in [("unknown", "model_not_found"), ("unknown_path", "not_found")] {
        let error = &models[what]["error"];
        assert_eq!(error["class"], "NotFoundError", "{sdk} {what}: {models}");
        assert_eq!(
            (error["status"].as_u64(), error["code"].as_str()),
            (Some(404), Some(code)),
            "{sdk} {what}: {models}"
        );
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("the gateway serves") || message.contains("the models are"),
            "{sdk} {what}: {message}"
        );
    }
}

/// Both APIs' `failing` scenarios hit the always-500 provider: it saw the gateway's three attempts each, never
/// an SDK retry's.
async fn the_failing_provider_saw_only_the_gateways_attempts(providers: &Providers) {
    let stats = get_json(&providers.at("failing").url("/stats")).await;
    assert_eq!(stats["endpoints"]["model"]["requests"], 2 * 3, "{stats}");
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_python() {
    if !installed() {
        return;
    }
    let providers = Providers::start().await;
    let gateway = providers.gateway_of(&with_principal(), &[KEY]);
    let lines = tokio::task::block_in_place(|| run(Program::Python, &gateway, KEY.1, &["all"]));
    check("openai-python", &lines);
    the_failing_provider_saw_only_the_gateways_attempts(&providers).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_node() {
    if !installed() {
        return;
    }
    let providers = Providers::start().await;
    let gateway = providers.gateway_of(&with_principal(), &[KEY]);
    let lines = tokio::task::block_in_place(|| run(Program::Node, &gateway, KEY.1, &["all"]));
    check("openai-node", &lines);
    the_failing_provider_saw_only_the_gateways_attempts(&providers).await;
}

/// The OpenAI Agents SDK runs an agent with one function tool through the gateway, end to end.
#[tokio::test(flavor = "multi_thread")]
async fn openai_agents() {
    if !installed() {
        return;
    }
    let providers = Providers::start().await;
    let gateway = providers.gateway_of(&with_principal(), &[KEY]);
    let lines = tokio::task::block_in_place(|| run(Program::Agents, &gateway, KEY.1, &["agent_tool"]));
    let agent = line(&lines, "agent_tool");
    assert_eq!(agent["ok"], true, "{agent}");
    assert_eq!(agent["tool_called"], true, "{agent}");
    assert_eq!(agent["tool_arguments"][0]["op"], "op-agents", "{agent}");
    assert!(
        agent["final_output"].as_str().unwrap().contains("not available"),
        "{agent}"
    );
}

/// The shared routes, the principal, and the tools a Claude agent calls through the gateway, over the healthy
/// provider (whose ledger counts the refunds).
fn with_tools() -> String {
    support::models::config()
        .principal("agents", "AGENTS_KEY")
        .tool("lookup_order", "{ok}/tools/lookup_order", "")
        .tool(
            "create_refund",
            "{ok}/tools/create_refund",
            "side_effects = true\nupstream_idempotency = \"keyed\"",
        )
        .build()
}

/// Input and output tokens of a message summary's `usage`, both above 0.
fn spent_tokens(message: &Value) -> bool {
    let usage = &message["usage"];
    usage["input_tokens"].as_u64() > Some(0) && usage["output_tokens"].as_u64() > Some(0)
}

/// What both Anthropic SDKs must have seen on the Messages routes, scenario by scenario.
fn check_messages(sdk: &str, lines: &HashMap<String, Value>) {
    let at = |scenario: &str| line(lines, scenario);
    let what = |scenario: &str| format!("{sdk} {scenario}: {}", at(scenario));

    // The agent loop: a tool use per turn, each called through the gateway, then the text naming the op.
    let loop_ = at("message");
    assert_eq!(loop_["ok"], true, "{}", what("message"));
    assert_eq!(
        loop_["tool_names"],
        serde_json::json!([["lookup_order"], ["create_refund"], []]),
        "{}",
        what("message")
    );
    let calls = loop_["tool_calls"].as_array().expect("tool_calls");
    assert!(calls.iter().all(|c| c["status"] == 200), "{}", what("message"));
    let op = loop_["op"].as_str().unwrap();
    assert!(
        loop_["final_text"].as_str().unwrap().contains(op),
        "{}",
        what("message")
    );
    let turns = loop_["turns"].as_array().expect("turns");
    assert!(turns.iter().all(spent_tokens), "{}", what("message"));

    // A stream read to its `message_stop` is the JSON answer: the tool use (its input from the deltas), the text.
    let stream = at("stream");
    assert_eq!(stream["ok"], true, "{}", what("stream"));
    for part in ["first", "final"] {
        let (streamed, answered) = (&stream[format!("{part}_stream")], &stream[format!("{part}_json")]);
        assert_eq!(streamed["message_stop"], true, "{}", what("stream"));
        assert_eq!(
            streamed["final"]["content"],
            answered["content"],
            "{part}: {}",
            what("stream")
        );
        assert!(spent_tokens(&streamed["final"]), "{}", what("stream"));
    }
    assert_eq!(
        names(&stream["first_stream"]["final"]["tool_uses"]),
        ["lookup_order"],
        "{}",
        what("stream")
    );
    assert!(
        (stream["final_stream"]["text"].as_str().unwrap()).contains(stream["op"].as_str().unwrap()),
        "{}",
        what("stream")
    );

    // Overloaded before content: the gateway falls back, the SDK (told not to retry) never hears of it.
    let before = at("overloaded_before_content");
    assert_eq!(before["ok"], true, "{}", what("overloaded_before_content"));
    for part in ["stream", "json"] {
        assert_eq!(
            before[part]["model"],
            "claude-fallback",
            "{}",
            what("overloaded_before_content")
        );
    }
    let kinds = before["stream"]["event_types"].as_array().unwrap();
    assert!(
        !kinds.iter().any(|kind| kind == "error") && before["stream"]["message_stop"] == true,
        "{}",
        what("overloaded_before_content")
    );

    // Overloaded after content: the SDK raises Anthropic's error after the text began, and sends nothing again.
    let after = at("overloaded_after_content");
    assert_eq!(after["ok"], false, "{}", what("overloaded_after_content"));
    assert_eq!(
        after["error"]["type"],
        "overloaded_error",
        "{}",
        what("overloaded_after_content")
    );
    assert!(
        after["content_events"].as_u64() >= Some(1) && after["message_stop"] == false,
        "{}",
        what("overloaded_after_content")
    );
    assert_eq!(after["sdk_requests"], 1, "{}", what("overloaded_after_content"));

    // The spend limit: a 429 the SDK is told not to retry (the provider's count is checked by the caller). The SDKs
    // raise their `RateLimitError`, or its subclass `EnforcedSpendLimitReachedError` when the body keeps the
    // provider's `error.details.error_code`.
    let spend = at("spend_limit");
    let raised = (
        spend["error"]["class"].as_str(),
        spend["error"]["status"].as_u64(),
    );
    assert!(
        matches!(
            raised,
            (
                Some("RateLimitError" | "EnforcedSpendLimitReachedError"),
                Some(429)
            )
        ),
        "{}",
        what("spend_limit")
    );
    assert_eq!(
        spend["error"]["headers"]["x-should-retry"],
        "false",
        "{}",
        what("spend_limit")
    );
    assert_eq!(spend["sdk_requests"], 1, "{}", what("spend_limit"));

    let count = at("count_tokens");
    assert!(
        count["ok"] == true && count["input_tokens"].as_u64() > Some(0),
        "{}",
        what("count_tokens")
    );

    // The model routes as Anthropic's model objects: the SDK's `models.list()` pages through them.
    let models = at("models");
    assert_eq!(models["ok"], true, "{}", what("models"));
    assert!(
        models["listed"]
            .as_array()
            .is_some_and(|l| l.contains(&Value::from("claude"))),
        "{}",
        what("models")
    );
    assert_eq!(
        (&models["retrieved"], &models["display_name"]),
        (&Value::from("claude"), &Value::from("claude"))
    );
}

/// The storm: every call raised the SDK's overload (the gateway's retries spent, or its throttle's shed once the
/// SDK's own retries were), and between them the gateway sent enough attempts over enough time that a breaker
/// counting 529s as failures (7 in a row over 500 ms by default) would have opened; `/status` shows it closed.
async fn the_storm_left_the_breaker_closed(sdk: &str, lines: &HashMap<String, Value>, gateway: &Gateway) {
    let storm = line(lines, "storm");
    let calls = storm["calls"].as_array().expect("calls");
    for call in calls {
        let raised = (call["error"]["class"].as_str(), call["error"]["status"].as_u64());
        assert!(
            matches!(
                raised,
                (Some("OverloadedError"), Some(529)) | (Some("ServiceUnavailableError"), Some(503))
            ),
            "{sdk}: {call}"
        );
    }
    let attempts: u64 = calls
        .iter()
        .flat_map(|call| call["http"].as_array().into_iter().flatten())
        .filter_map(|sent| sent["headers"]["ballast-attempts"].as_str()?.parse::<u64>().ok())
        .sum();
    assert!(
        attempts >= 7 && storm["spread_ms"].as_u64() >= Some(500),
        "{sdk}: a storm too small to tell: {storm}"
    );
    let status: Value = support::gateway::client()
        .get(gateway.url("/status"))
        .bearer_auth(KEY.1)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON");
    let breaker = &status["models"]["claude-storm"]["deployments"][0]["breaker"];
    assert_eq!(
        (breaker["state"].as_str(), breaker["transitions"].as_u64()),
        (Some("closed"), Some(0)),
        "{sdk}: {breaker}"
    );
}

/// An Anthropic SDK's run of every Messages scenario, and what the providers saw: the refund of the agent loop
/// executed once, the spend limit asked once (neither the SDK nor the gateway retried it).
async fn anthropic(program: Program, sdk: &str) {
    let providers = Providers::start().await;
    let gateway = providers.gateway_of(&with_tools(), &[KEY]);
    let lines = tokio::task::block_in_place(|| run(program, &gateway, KEY.1, &["all"]));
    check_messages(sdk, &lines);
    the_storm_left_the_breaker_closed(sdk, &lines, &gateway).await;
    let op = line(&lines, "message")["op"].as_str().unwrap().to_owned();
    assert_eq!(
        support::gateway::executions(providers.at("ok"), &op).await,
        1,
        "{sdk}: one refund"
    );
    let spend = get_json(&providers.at("spend").url("/stats")).await;
    assert_eq!(spend["endpoints"]["model"]["requests"], 1, "{sdk}: {spend}");
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_python() {
    if !installed() {
        return;
    }
    anthropic(Program::AnthropicPython, "anthropic-python").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_node() {
    if !installed() {
        return;
    }
    anthropic(Program::AnthropicNode, "anthropic-node").await;
}

/// Every snippet a user reads — each Python, TypeScript and curl block of README.md, docs/gateway.md and docs/mcp.md — runs as
/// printed on a fresh machine (in a new directory: TypeScript as `npx tsx agent.ts` in the CommonJS project `npm
/// install openai` makes), against the gateway of examples/quickstart.toml in front of the chaos upstream (only
/// the addresses changed). The agent loops (Responses, chat, and the Claude agent's Messages) finish their refund,
/// the curls are answered 200.
#[tokio::test(flavor = "multi_thread")]
async fn every_printed_snippet_runs_as_printed() {
    if !installed() {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config =
        std::fs::read_to_string(root.join("examples/quickstart.toml")).expect("examples/quickstart.toml");
    let upstream = support::gateway::chaos("").await;
    let gateway = support::gateway::Gateway::start(
        &config.replace("http://127.0.0.1:9000", "{chaos}"),
        &upstream,
        &[("BALLAST_KEY_DEV", "dev-key-1")],
    );
    // README's chaos section talks to `ballast chaos` itself: a second upstream of its own, so that the ledger
    // checked below counts the gateway's refunds only.
    let chaos_alone = support::gateway::chaos("").await;
    let (address, chaos_address) = (gateway.url(""), chaos_alone.url(""));
    let mut ran = Vec::new();
    for doc in ["README.md", "docs/gateway.md", "docs/mcp.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect("the doc");
        for (language, code) in runnable_blocks(&text) {
            let code = code
                .replace("http://127.0.0.1:8080", &address)
                .replace("localhost:8080", &address)
                .replace("localhost:9000", &chaos_address);
            let output = tokio::task::block_in_place(|| support::sdk::run_snippet(language, &code));
            let printed = String::from_utf8_lossy(&output.stdout);
            let done = match language {
                // Every answer shown with its status (`-i`) is a 200.
                "sh" => {
                    !printed.is_empty()
                        && printed.matches("HTTP/1.1 200").count() == code.matches("curl -s -i").count()
                }
                _ => {
                    !code.contains("print") || printed.contains("Done: the refund of order 1234 went through")
                }
            };
            assert!(
                output.status.success() && done,
                "{doc}'s {language} block failed as printed:\n{code}\n--- stdout:\n{printed}\n--- stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
            ran.push(format!("{doc} {language}"));
        }
    }
    for expected in [
        "README.md python",
        "README.md typescript",
        "README.md sh",
        "docs/gateway.md python",
        "docs/gateway.md sh",
        "docs/mcp.md python",
        "docs/mcp.md typescript",
    ] {
        assert!(
            ran.iter().any(|r| r == expected),
            "no {expected} block ran: {ran:?}"
        );
    }
    assert_eq!(
        support::gateway::executions(&upstream, "op-77").await,
        1,
        "one refund, through the gateway"
    );
    assert_eq!(
        support::gateway::executions(&upstream, "op-79").await,
        1,
        "the Claude agent's refund, through the gateway"
    );
    for (op, client) in [
        ("op-81", "README's MCP client"),
        ("op-82", "openai-agents"),
        ("op-83", "the TypeScript MCP SDK"),
    ] {
        assert_eq!(
            support::gateway::executions(&upstream, op).await,
            1,
            "{client}'s refund over MCP: one execution"
        );
    }
}

/// The fenced blocks a user runs: `python`, `typescript`, and `sh` blocks of curl commands only (the others start
/// Ballast itself or build it).
fn runnable_blocks(text: &str) -> Vec<(&'static str, String)> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some(line_end) = after.find('\n') else { break };
        let language = after[..line_end].trim();
        let body = &after[line_end + 1..];
        let Some(end) = body.find("```") else { break };
        let code = &body[..end];
        rest = &body[end + 3..];
        let curls = code
            .lines()
            .filter(|l| !l.trim().is_empty())
            .all(|l| l.starts_with("curl ") || l.starts_with("  "));
        let language = match language {
            "python" => "python",
            "typescript" => "typescript",
            "sh" if curls && code.contains("curl ") => "sh",
            _ => continue,
        };
        blocks.push((language, code.to_owned()));
    }
    blocks
}
