//! The official OpenAI, Anthropic and MCP SDKs as clients of the real gateway: installed by `scripts/sdk-clients`
//! (pinned, into `target/sdk`), run as the programs of `tests/sdk/` (one JSON line per scenario), read back here.
//!
//! Where the SDKs cannot be installed (no network on a laptop), the tests skip with a printed reason — unless
//! `BALLAST_REQUIRE_SERVICES=1` (CI), where that fails them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::gateway::Gateway;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Installs the SDKs (at once when they are installed already); `false` with the reason printed when they cannot
/// be and the run does not require them.
pub(crate) fn installed() -> bool {
    let output = Command::new("bash")
        .arg(root().join("scripts/sdk-clients"))
        .current_dir(root())
        .output()
        .expect("bash runs");
    if output.status.success() {
        return true;
    }
    let why = String::from_utf8_lossy(&output.stderr).into_owned();
    let required = std::env::var("BALLAST_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "the SDKs are required (BALLAST_REQUIRE_SERVICES=1) but could not be installed:\n{why}"
    );
    eprintln!("skipped: the SDKs could not be installed (scripts/sdk-clients):\n{why}");
    false
}

/// Which client program.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Program {
    /// openai-python (`python_scenarios.py`).
    Python,
    /// openai-node (`node_scenarios.mjs`).
    Node,
    /// The OpenAI Agents SDK (`agents_scenario.py`).
    Agents,
    /// anthropic-sdk-python (`anthropic_scenarios.py`).
    AnthropicPython,
    /// @anthropic-ai/sdk (`anthropic_scenarios.mjs`).
    AnthropicNode,
    /// The MCP Python SDK (`mcp_python.py`).
    McpPython,
    /// The OpenAI Agents SDK's MCP client (`mcp_agents.py`).
    McpAgents,
    /// The MCP TypeScript SDK (`mcp_node.mjs`).
    McpNode,
}

/// Runs `program` against `gateway` with `scenarios` and `key`; its result lines by scenario. The OpenAI programs
/// are given the API root (`/v1`), the Anthropic ones the gateway's root (their SDKs add `/v1/messages`), the MCP
/// ones its `/mcp`. The program's own watchdog bounds the run; its exit and stderr are reported when a line is
/// missing.
pub(crate) fn run(
    program: Program,
    gateway: &Gateway,
    key: &str,
    scenarios: &[&str],
) -> HashMap<String, Value> {
    run_with(program, gateway, key, &[], scenarios)
}

/// [`run`] with the program's own `options` (`--upstream URL`, `--mode legacy`) before the scenarios.
pub(crate) fn run_with(
    program: Program,
    gateway: &Gateway,
    key: &str,
    options: &[&str],
    scenarios: &[&str],
) -> HashMap<String, Value> {
    let output = command(program, gateway, key, options, scenarios)
        .output()
        .expect("the client program runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines = result_lines(&stdout);
    assert!(
        output.status.success(),
        "{program:?} exited with {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    lines
}

/// The command that runs `program` against `gateway` (see [`run`]).
fn command(program: Program, gateway: &Gateway, key: &str, options: &[&str], scenarios: &[&str]) -> Command {
    let python = root().join("target/sdk/venv/bin/python");
    let dir = root().join("crates/ballast-cli/tests/sdk");
    let (interpreter, file) = match program {
        Program::Python => (python.as_path(), "python_scenarios.py"),
        Program::Agents => (python.as_path(), "agents_scenario.py"),
        Program::AnthropicPython => (python.as_path(), "anthropic_scenarios.py"),
        Program::McpPython => (python.as_path(), "mcp_python.py"),
        Program::McpAgents => (python.as_path(), "mcp_agents.py"),
        Program::Node => (Path::new("node"), "node_scenarios.mjs"),
        Program::AnthropicNode => (Path::new("node"), "anthropic_scenarios.mjs"),
        Program::McpNode => (Path::new("node"), "mcp_node.mjs"),
    };
    let base = match program {
        Program::AnthropicPython | Program::AnthropicNode => gateway.url(""),
        Program::McpPython | Program::McpAgents | Program::McpNode => gateway.url("/mcp"),
        Program::Python | Program::Node | Program::Agents => format!("{}/v1", gateway.url("")),
    };
    let watchdog = Duration::from_secs(240);
    let mut command = Command::new(interpreter);
    command
        .arg(dir.join(file))
        .args([
            "--base-url",
            &base,
            "--api-key",
            key,
            "--watchdog",
            &watchdog.as_secs().to_string(),
        ])
        .args(options)
        .args(scenarios)
        .current_dir(root())
        .stdin(Stdio::null());
    command
}

/// A program's result lines by scenario.
fn result_lines(stdout: &str) -> HashMap<String, Value> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|v| Some((v["scenario"].as_str()?.to_owned(), v)))
        .collect()
}

/// A client program running in the background (started by [`Background::start`]), killed on drop.
pub(crate) struct Background(std::process::Child);

impl Background {
    /// Starts `program` as [`run_with`] does, without waiting for it; what it prints is dropped.
    pub(crate) fn start(
        program: Program,
        gateway: &Gateway,
        key: &str,
        options: &[&str],
        scenarios: &[&str],
    ) -> Background {
        let child = command(program, gateway, key, options, scenarios)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the client program starts");
        Background(child)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs a printed snippet as a newcomer would on a fresh machine, in a new directory, and its output: `python`
/// with the venv's interpreter (what `pip install openai` gives), `typescript` as `npx tsx agent.ts` in a project
/// like the one `npm install openai` makes in an empty directory — a `package.json` with no `"type"`, so CommonJS,
/// where a top-level `await` fails (the SDKs' packages are linked from `target/sdk/node`) — and `sh` with `sh`.
pub(crate) fn run_snippet(language: &str, code: &str) -> std::process::Output {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sdk = root().join("target/sdk");
    let mut command = match language {
        "python" => {
            std::fs::write(dir.path().join("agent.py"), code).unwrap();
            let mut c = Command::new(sdk.join("venv/bin/python"));
            c.arg("agent.py");
            c
        }
        "typescript" => {
            let package = r#"{"name": "agent", "version": "1.0.0", "dependencies": {"openai": "^7.59.0"}}"#;
            std::fs::write(dir.path().join("package.json"), package).unwrap();
            std::os::unix::fs::symlink(sdk.join("node/node_modules"), dir.path().join("node_modules"))
                .unwrap();
            std::fs::write(dir.path().join("agent.ts"), code).unwrap();
            let mut c = Command::new("npx");
            c.args(["--no-install", "tsx", "agent.ts"]);
            c
        }
        "sh" => {
            let mut c = Command::new("sh");
            c.args(["-c", code]);
            c
        }
        other => panic!("no way to run a {other} snippet"),
    };
    command
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("the snippet runs")
}
