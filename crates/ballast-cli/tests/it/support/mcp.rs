//! The MCP black-box tests' fixture: the gateway's config over the chaos upstream's HTTP tools and MCP server, and
//! readers of the MCP programs' result lines (`tests/sdk/README.md`, "The MCP scenarios").

use std::collections::HashMap;

use ballast_chaos::ChaosServer;
use ballast_testkit::ConfigText;
use serde_json::Value;

use super::gateway::{Gateway, client, get_json};
use super::sdk::{Background, Program, run_with};

/// The principal the SDKs call as.
pub(crate) const KEY: (&str, &str) = ("AGENTS_KEY", "sk-agents-0123456789abcdef");

/// What the HTTP tools say about themselves (`[[tools]]`), as listed.
pub(crate) const LOOKUP_DESCRIPTION: &str = "Look up an order by id: its amount and status.";
pub(crate) const REFUND_DESCRIPTION: &str = "Refund an order, in full or in part. Returns the refund.";

/// The gateway over `{chaos}`: its HTTP tools `lookup_order` and `create_refund` (side effects, keyed), the chaos
/// MCP server as `shop` (prefix `shop_`; `lookup_order` read-only by override) with the keys `shop`, and `servers`
/// (more `[[mcp_servers]]` tables, whole). The store is SQLite in the gateway's directory.
pub(crate) fn config(shop: &str, servers: &str) -> String {
    let schema = "input_schema = { type = \"object\", required = [\"order_id\"], properties = { order_id = { type \
                  = \"string\" }, amount = { type = \"number\" }, op = { type = \"string\" } } }";
    ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .principal("agents", "AGENTS_KEY")
        .tool(
            "lookup_order",
            "{chaos}/tools/lookup_order",
            &format!("description = \"{LOOKUP_DESCRIPTION}\"\n{schema}"),
        )
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            &format!(
                "description = \"{REFUND_DESCRIPTION}\"\n{schema}\nside_effects = true\n\
                 upstream_idempotency = \"keyed\""
            ),
        )
        .raw(&format!(
            "[[mcp_servers]]\nname = \"shop\"\nurl = \"{{chaos}}/mcp\"\nprefix = \"shop_\"\n{shop}\n\
             [mcp_servers.tools.lookup_order]\nside_effects = false\n{servers}"
        ))
        .build()
}

/// A chaos profile's `[[scripts]]` entry: `steps` as TOML array items (`"\"hang\""`).
pub(crate) fn script(endpoint: &str, op: &str, steps: &str) -> String {
    format!("[[scripts]]\nendpoint = \"{endpoint}\"\nop = \"{op}\"\nsteps = [{steps}]\n")
}

/// The result line of `scenario`.
pub(crate) fn line<'a>(lines: &'a HashMap<String, Value>, scenario: &str) -> &'a Value {
    lines
        .get(scenario)
        .unwrap_or_else(|| panic!("no result for {scenario}: {:?}", lines.keys().collect::<Vec<_>>()))
}

/// A call's outcome that is the tool's answer: no exception, no tool error.
pub(crate) fn answered(outcome: &Value) -> bool {
    outcome["ok"] == true && outcome["is_error"] == false
}

/// A call's outcome that is Ballast's tool error `code` (`structuredContent.code`).
pub(crate) fn tool_error(outcome: &Value, code: &str) -> bool {
    outcome["ok"] == true && outcome["is_error"] == true && outcome["code"] == code
}

/// The chaos upstream's stats of one endpoint (a tool's name).
pub(crate) async fn endpoint_stats(upstream: &ChaosServer, endpoint: &str) -> Value {
    get_json(&upstream.url("/stats")).await["endpoints"][endpoint].clone()
}

/// The gateway's `/status`, read as the SDKs' principal.
pub(crate) async fn status(gateway: &Gateway) -> Value {
    client()
        .get(gateway.url("/status"))
        .bearer_auth(KEY.1)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON")
}

/// An MCP client program as the tests run it: its options, and the tag of its operations (`op-<tag>-<scenario>`,
/// runs `run-op-<tag>-<scenario>`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sdk {
    pub(crate) program: Program,
    pub(crate) options: &'static [&'static str],
    pub(crate) tag: &'static str,
}

/// The MCP Python SDK over 2026-07-28 (`server/discover`, stateless requests).
pub(crate) const PYTHON: Sdk = Sdk {
    program: Program::McpPython,
    options: &[],
    tag: "mcp-py",
};
/// The MCP Python SDK over the handshake (`initialize`, 2025-11-25).
pub(crate) const PYTHON_HANDSHAKE: Sdk = Sdk {
    program: Program::McpPython,
    options: &["--mode", "legacy"],
    tag: "mcp-py-legacy",
};
/// The OpenAI Agents SDK's MCP client.
pub(crate) const AGENTS: Sdk = Sdk {
    program: Program::McpAgents,
    options: &[],
    tag: "mcp-agents",
};
/// The MCP TypeScript SDK (the handshake).
pub(crate) const NODE: Sdk = Sdk {
    program: Program::McpNode,
    options: &[],
    tag: "mcp-node",
};

impl Sdk {
    /// The operation of `scenario`, as the program names it (`op-mcp-py-list_and_call`).
    pub(crate) fn op(self, scenario: &str) -> String {
        format!("op-{}-{scenario}", self.tag)
    }

    /// Runs `scenarios` against `gateway` (the upstream's root given as `--upstream` when there is one); the
    /// result lines by scenario. Blocks this thread: call it from a multi-threaded runtime.
    pub(crate) fn run(
        self,
        gateway: &Gateway,
        upstream: Option<&ChaosServer>,
        scenarios: &[&str],
    ) -> HashMap<String, Value> {
        let root = upstream.map(|u| u.url(""));
        let mut options = self.options.to_vec();
        if let Some(root) = &root {
            options.extend(["--upstream", root.trim_end_matches('/')]);
        }
        tokio::task::block_in_place(|| run_with(self.program, gateway, KEY.1, &options, scenarios))
    }

    /// Starts `scenarios` against `gateway` in the background (what it prints is dropped; killed on drop).
    pub(crate) fn start(self, gateway: &Gateway, scenarios: &[&str]) -> Background {
        Background::start(self.program, gateway, KEY.1, self.options, scenarios)
    }
}

/// docs/mcp.md's `structuredContent.code` of a call whose operation is still running.
pub(crate) const IN_PROGRESS: &str = "idempotency_in_progress";
/// docs/mcp.md's code of a side-effecting call with nothing to key it on.
pub(crate) const KEY_MISSING: &str = "idempotency_key_missing";

/// The served tools' names, from one `tools/list` of 2026-07-28 sent as plain JSON-RPC (a test's setup, not a
/// client under test: it makes the gateway read every upstream server's listing now).
pub(crate) async fn listed_names(gateway: &Gateway) -> Vec<String> {
    let version = "2026-07-28";
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }},
    });
    let answer: Value = client()
        .post(gateway.url("/mcp"))
        .bearer_auth(KEY.1)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .header("mcp-method", "tools/list")
        .json(&body)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON-RPC");
    (answer["result"]["tools"].as_array().into_iter().flatten())
        .filter_map(|tool| Some(tool["name"].as_str()?.to_owned()))
        .collect()
}
