//! The gateway's model routes with the clients agents really use: the official OpenAI Python and Node SDKs and
//! the OpenAI Agents SDK (installed by `scripts/sdk-clients`), against the real `ballast serve` in front of chaos
//! providers. Each SDK runs every scenario of `tests/sdk/README.md` in one process; this file says what each must
//! have seen.

use crate::support;

use std::collections::HashMap;

use serde_json::Value;
use support::gateway::get_json;
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

/// Every snippet a user reads — each Python, TypeScript and curl block of README.md and docs/gateway.md — runs as
/// printed on a fresh machine (in a new directory: TypeScript as `npx tsx agent.ts` in the CommonJS project `npm
/// install openai` makes), against the gateway of examples/quickstart.toml in front of the chaos upstream (only
/// the addresses changed). The agent loops finish their refund, the curls are answered 200.
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
    for doc in ["README.md", "docs/gateway.md"] {
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
