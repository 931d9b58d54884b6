//! The gateway's model routes with the clients agents really use: the official OpenAI Python and Node SDKs and
//! the OpenAI Agents SDK (installed by `scripts/sdk-clients`), against the real `ballast serve` in front of chaos
//! providers. Each SDK runs every scenario of `tests/sdk/README.md` in one process; this file says what each must
//! have seen.

mod support;

use std::collections::HashMap;

use serde_json::Value;
use support::gateway::get_json;
use support::models::Providers;
use support::sdk::{Program, installed, run};

/// The principal the SDKs call as.
const KEY: (&str, &str) = ("AGENTS_KEY", "sk-agents-0123456789abcdef");

fn with_principal() -> String {
    support::models::CONFIG.replace(
        "[server]",
        "[[principals]]\nname = \"agents\"\nkey_env = \"AGENTS_KEY\"\n[server]",
    )
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
    let stats = get_json(&providers.failing.url("/stats")).await;
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

/// README's quick starts work as printed: the Python agent loop through the Responses API and the TypeScript one
/// through Chat Completions, against the gateway of examples/quickstart.toml (only the addresses changed).
#[tokio::test(flavor = "multi_thread")]
async fn the_readme_quick_starts_work_as_printed() {
    if !installed() {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let config =
        std::fs::read_to_string(root.join("examples/quickstart.toml")).expect("examples/quickstart.toml");
    let upstream = support::gateway::chaos("").await;
    let gateway = support::gateway::Gateway::start(
        &config.replace("http://127.0.0.1:9000", "{chaos}"),
        &upstream,
        &[("BALLAST_KEY_DEV", "dev-key-1")],
    );
    let block = |language: &str| -> String {
        let fence = format!("```{language}\n");
        let start = readme
            .find(&fence)
            .unwrap_or_else(|| panic!("README has a {language} block"))
            + fence.len();
        let end = start + readme[start..].find("```").expect("the block ends");
        readme[start..end].replace("http://127.0.0.1:8080", &gateway.url(""))
    };
    let sdk = root.join("target/sdk");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let python = dir.path().join("agent.py");
    std::fs::write(&python, block("python")).unwrap();
    // Inside the Node project, so that `openai` resolves.
    let typescript = sdk.join(format!("node/readme-agent-{}.ts", std::process::id()));
    std::fs::write(&typescript, block("typescript")).unwrap();
    let runs = [
        (sdk.join("venv/bin/python"), python, "op-77"),
        (
            sdk.join("node/node_modules/.bin/tsx"),
            typescript.clone(),
            "op-78",
        ),
    ];
    for (program, script, op) in runs {
        let output = tokio::task::block_in_place(|| {
            std::process::Command::new(&program)
                .arg(&script)
                .stdin(std::process::Stdio::null())
                .output()
                .expect("the quick start runs")
        });
        let printed = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success()
                && printed.contains(&format!("Done: the refund of order 1234 went through (op {op})")),
            "{}: {printed}\n{}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let _ = std::fs::remove_file(typescript);
    assert_eq!(
        support::gateway::executions(&upstream, "op-77").await,
        1,
        "one refund, through the gateway"
    );
}
