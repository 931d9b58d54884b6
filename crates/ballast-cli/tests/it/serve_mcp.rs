//! The gateway's `/mcp` with the MCP clients agents really use: the MCP Python SDK (both protocol eras), the OpenAI
//! Agents SDK's MCP client and the MCP TypeScript SDK (installed by `scripts/sdk-clients`), against the real
//! `ballast serve` in front of the chaos upstream's HTTP tools and its MCP server. Each SDK runs the MCP scenarios
//! of `tests/sdk/README.md` in one process; this file says what each must have seen and what the upstream's ledger
//! of side effects holds. The contract is docs/mcp.md; its faults (disconnects, failing servers, annotations,
//! kill -9) are `serve_mcp_faults.rs`.

use crate::support;

use std::collections::HashMap;

use ballast_chaos::ChaosServer;
use serde_json::{Value, json};
use support::gateway::{Gateway, chaos, executions};
use support::mcp::{
    AGENTS, IN_PROGRESS, KEY, LOOKUP_DESCRIPTION, NODE, PYTHON, PYTHON_HANDSHAKE, REFUND_DESCRIPTION, Sdk,
    answered, config, line, script, tool_error,
};
use support::sdk::installed;

/// The chaos upstream of the core scenarios: refunds take 300 ms (16 identical calls meet one running), and the
/// first attempt of each SDK's `lost_answer_reissued` refund executes, then its connection is reset.
async fn core_upstream() -> ChaosServer {
    let mut profile = String::from(
        "[endpoints.create_refund]\nlatency = { p50 = \"300ms\", p99 = \"300ms\" }\nlose_with = \"reset\"\n\
         key_mode = \"keyed\"\n",
    );
    for sdk in [PYTHON, PYTHON_HANDSHAKE, AGENTS, NODE] {
        profile.push_str(&script(
            "create_refund",
            &sdk.op("lost_answer_reissued"),
            "\"commit_then_lose\"",
        ));
    }
    chaos(&profile).await
}

/// `list_and_call`: both kinds of tools listed with what they say of themselves, each called once, each side effect
/// executed once.
async fn check_list_and_call(sdk: Sdk, lines: &HashMap<String, Value>, upstream: &ChaosServer) {
    let at = line(lines, "list_and_call");
    assert_eq!(at["ok"], true, "{sdk:?}: {at}");
    let tools = at["tools"].as_array().expect("tools");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{sdk:?}: {name} is not listed: {at}"))
    };
    for name in [
        "lookup_order",
        "create_refund",
        "shop_lookup_order",
        "shop_create_refund",
        "shop_process_payment",
    ] {
        let listed = tool(name);
        assert!(
            listed["description"].as_str().is_some_and(|d| !d.is_empty())
                && listed["input_schema"]["type"] == "object",
            "{sdk:?}: {listed}"
        );
    }
    assert_eq!(tool("lookup_order")["description"], LOOKUP_DESCRIPTION);
    assert_eq!(tool("create_refund")["description"], REFUND_DESCRIPTION);
    assert_eq!(
        tool("create_refund")["input_schema"]["required"],
        json!(["order_id"])
    );
    for (name, call) in at["calls"].as_object().expect("calls") {
        assert!(answered(call), "{sdk:?}: {name}: {call}");
    }
    let op = sdk.op("list_and_call");
    for (what, suffix) in [("the HTTP tool's", "-http"), ("the MCP tool's", "-shop")] {
        assert_eq!(
            executions(upstream, &format!("{op}{suffix}")).await,
            1,
            "{sdk:?}: {what} refund: {at}"
        );
    }
}

/// `lost_answer_reissued`: the upstream executed the refund and lost the answer, so the first call's outcome is
/// unknown; the same call again (same run, same arguments) is the same operation: its stored outcome, never a
/// second execution.
async fn check_lost_answer(sdk: Sdk, lines: &HashMap<String, Value>, upstream: &ChaosServer) {
    let at = line(lines, "lost_answer_reissued");
    assert!(tool_error(&at["first"], "outcome_unknown"), "{sdk:?}: {at}");
    let reissued = &at["reissued"];
    assert!(
        answered(reissued) || tool_error(reissued, "outcome_unknown"),
        "{sdk:?}: the re-issued call: {at}"
    );
    assert_eq!(
        executions(upstream, &sdk.op("lost_answer_reissued")).await,
        1,
        "{sdk:?}: one refund: {at}"
    );
}

/// `concurrent_same_key`: 16 identical calls at once, by run and by `_meta` key: one execution each, every caller
/// the result or `idempotency_in_progress`.
async fn check_concurrent(sdk: Sdk, lines: &HashMap<String, Value>, upstream: &ChaosServer) {
    let at = line(lines, "concurrent_same_key");
    for (part, suffix) in [("by_run", "-run"), ("by_key", "-key")] {
        let outcomes = at[part].as_array().expect("outcomes");
        assert_eq!(outcomes.len(), 16, "{sdk:?} {part}: {at}");
        assert!(
            outcomes.iter().all(|o| answered(o) || tool_error(o, IN_PROGRESS)),
            "{sdk:?} {part}: {at}"
        );
        let results: Vec<&Value> = (outcomes.iter().filter(|o| answered(o)))
            .map(|o| &o["structured"])
            .collect();
        assert!(!results.is_empty(), "{sdk:?} {part}: nobody got the result: {at}");
        assert!(
            results.windows(2).all(|w| w[0] == w[1]),
            "{sdk:?} {part}: one result: {at}"
        );
        assert_eq!(
            executions(upstream, &sdk.op(&format!("concurrent_same_key{suffix}"))).await,
            1,
            "{sdk:?} {part}: one refund: {at}"
        );
    }
}

/// One SDK's run of `scenarios` (the core ones) against a gateway of its own; `list_and_call` and
/// `lost_answer_reissued` checked.
async fn core(sdk: Sdk, scenarios: &[&str]) -> (HashMap<String, Value>, ChaosServer) {
    let upstream = core_upstream().await;
    let gateway = Gateway::start(&config("per_try_timeout = \"5s\"", ""), &upstream, &[KEY]);
    let lines = sdk.run(&gateway, None, scenarios);
    check_list_and_call(sdk, &lines, &upstream).await;
    check_lost_answer(sdk, &lines, &upstream).await;
    (lines, upstream)
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_python() {
    if !installed() {
        return;
    }
    let scenarios = ["list_and_call", "lost_answer_reissued", "concurrent_same_key"];
    let (lines, upstream) = core(PYTHON, &scenarios).await;
    assert_eq!(line(&lines, "list_and_call")["protocol_version"], "2026-07-28");
    check_concurrent(PYTHON, &lines, &upstream).await;
}

/// The same over the handshake era (2025-11-25: `initialize` first, then plain JSON-RPC).
#[tokio::test(flavor = "multi_thread")]
async fn mcp_python_handshake() {
    if !installed() {
        return;
    }
    let scenarios = ["list_and_call", "lost_answer_reissued", "concurrent_same_key"];
    let (lines, upstream) = core(PYTHON_HANDSHAKE, &scenarios).await;
    assert_eq!(line(&lines, "list_and_call")["protocol_version"], "2025-11-25");
    check_concurrent(PYTHON_HANDSHAKE, &lines, &upstream).await;
}

/// The Agents SDK with one server object per agent run, `ballast-run-id` in its headers: a run's repeated call is
/// its first call's replay, and two runs are two operations.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_agents() {
    if !installed() {
        return;
    }
    let scenarios = ["list_and_call", "lost_answer_reissued", "runs_are_separate"];
    let (lines, upstream) = core(AGENTS, &scenarios).await;
    let at = line(&lines, "runs_are_separate");
    let runs = at["runs"].as_object().expect("runs");
    assert_eq!(runs.len(), 2, "{at}");
    for calls in runs.values() {
        assert!(answered(&calls[0]) && calls[0]["replayed"] == false, "{at}");
        assert!(answered(&calls[1]) && calls[1]["replayed"] == true, "{at}");
        assert_eq!(calls[0]["structured"], calls[1]["structured"], "{at}");
    }
    assert_eq!(
        executions(&upstream, &AGENTS.op("runs_are_separate")).await,
        2,
        "one refund per run: {at}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_node() {
    if !installed() {
        return;
    }
    let scenarios = ["list_and_call", "lost_answer_reissued", "concurrent_same_key"];
    let (lines, upstream) = core(NODE, &scenarios).await;
    check_concurrent(NODE, &lines, &upstream).await;
}
