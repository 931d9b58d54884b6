//! The gateway's `/mcp` when things go wrong, with the MCP Python SDK as the client (`tests/sdk/README.md`, "The
//! MCP scenarios"): a client that leaves mid-call, upstream MCP servers that are down, slow or answer garbage, a
//! server whose annotations lie, and a gateway killed mid-refund. What the upstream saw is read from the chaos
//! upstream's ledger and stats, the breakers from `/status` (docs/mcp.md is the contract).

use crate::support;

use serde_json::Value;
use support::gateway::{Gateway, PATIENCE, chaos, eventually, executions};
use support::mcp::{
    IN_PROGRESS, KEY, KEY_MISSING, PYTHON, PYTHON_HANDSHAKE, Sdk, answered, config, endpoint_stats, line,
    listed_names, script, status, tool_error,
};
use support::sdk::installed;

/// A client that closes its stream mid-payment: the gateway runs the sent call on to its answer and stores it, so
/// the client's re-issued call gets it (after `idempotency_in_progress` while it runs); one execution. Both protocol eras: the
/// 2026 client closes the request's stream, the handshake client sends `notifications/cancelled`.
#[tokio::test(flavor = "multi_thread")]
async fn a_side_effect_whose_caller_left_runs_on_and_is_replayed() {
    if !installed() {
        return;
    }
    let upstream =
        chaos("[endpoints.process_payment]\nlatency = { p50 = \"1500ms\", p99 = \"1500ms\" }\n").await;
    let gateway = Gateway::start(&config("per_try_timeout = \"10s\"", ""), &upstream, &[KEY]);
    for sdk in [PYTHON_HANDSHAKE, PYTHON] {
        let lines = sdk.run(&gateway, Some(&upstream), &["close_mid_side_effect"]);
        let at = line(&lines, "close_mid_side_effect");
        assert_eq!(at["first"]["cancelled"], true, "{sdk:?}: {at}");
        let reissues = at["reissues"].as_array().expect("reissues");
        let (settled, waits) = reissues.split_last().expect("a re-issued call");
        assert!(
            answered(settled) && settled["replayed"] == true,
            "{sdk:?}: the stored outcome: {at}"
        );
        assert!(waits.iter().all(|o| tool_error(o, IN_PROGRESS)), "{sdk:?}: {at}");
        assert_eq!(
            executions(&upstream, &sdk.op("close_mid_side_effect")).await,
            1,
            "{sdk:?}: one payment: {at}"
        );
    }
}

/// A read-only call on a hanging upstream, cancelled by its `sdk` client, is cancelled upstream: the upstream sees
/// its request go long before the per-try timeout (60 s) would have ended it.
async fn cancelled_read_only_call(sdk: Sdk) {
    let profile = script("lookup_order", &sdk.op("read_only_cancelled"), "\"hang\"");
    let upstream = chaos(&profile).await;
    let gateway = Gateway::start(&config("per_try_timeout = \"60s\"", ""), &upstream, &[KEY]);
    let lines = sdk.run(&gateway, Some(&upstream), &["read_only_cancelled"]);
    let at = line(&lines, "read_only_cancelled");
    assert_eq!(at["first"]["cancelled"], true, "{sdk:?}: {at}");
    assert!(
        at["ok"] == true && at["upstream_released_ms"].as_u64() < Some(PATIENCE.as_millis() as u64),
        "{sdk:?}: the upstream kept the cancelled call: {at}"
    );
    let stats = endpoint_stats(&upstream, "lookup_order").await;
    assert_eq!(stats["in_flight"], 0, "{sdk:?}: {stats}");
}

/// 2026-07-28: the client cancels by closing the request's stream.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_read_only_call_is_cancelled_upstream() {
    if !installed() {
        return;
    }
    cancelled_read_only_call(PYTHON).await;
}

/// 2025-11-25: the client cancels with `notifications/cancelled` (a POST of its own; the spec says a disconnect is
/// not a cancellation in this era), and keeps the request's stream open.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_call_cancelled_by_notification_is_cancelled_upstream() {
    if !installed() {
        return;
    }
    cancelled_read_only_call(PYTHON_HANDSHAKE).await;
}

/// The breaker of the MCP server `name` in `/status`.
fn breaker<'a>(status: &'a Value, name: &str) -> &'a Value {
    &status["mcp_servers"][name]["breaker"]
}

/// Upstream MCP servers that went down after the gateway listed their tools (nothing listens any more), are slow
/// (every call outlives its 200 ms per-try timeout) and answer garbage (a 200 that is not JSON-RPC): every call is
/// answered at once with a tool error that has a code, and each server's breaker opens (3 failures in a row), after
/// which calls answer `circuit_open`; the healthy server's stays closed.
#[tokio::test(flavor = "multi_thread")]
async fn failing_servers_answer_tool_errors_and_open_their_breakers() {
    if !installed() {
        return;
    }
    let ok = chaos("").await;
    let down = chaos("").await;
    let slow = chaos("[endpoints.lookup_order]\nlatency = { p50 = \"5s\", p99 = \"5s\" }\n").await;
    let garbage = chaos("[endpoints.lookup_order]\ngarbage = 1.0\n").await;
    let policy = "side_effects = false\nper_try_timeout = \"200ms\"\nretry = { max_attempts = 1 }\n\
                  breaker = { consecutive_failures = 3, consecutive_spread = \"0s\", failure_rate = 0.0, \
                  open_for = \"60s\" }\n";
    let servers: String = ["down", "slow", "garbage"]
        .iter()
        .map(|name| {
            format!(
                "[[mcp_servers]]\nname = \"{name}\"\nurl = \"{{{name}}}/mcp\"\nprefix = \"{name}_\"\n{policy}"
            )
        })
        .collect();
    let gateway = Gateway::start_with(
        &config("", &servers),
        &[
            ("chaos", &ok),
            ("down", &down),
            ("slow", &slow),
            ("garbage", &garbage),
        ],
        &[KEY],
    );
    let listed = listed_names(&gateway).await;
    assert!(
        listed.iter().any(|name| name == "down_lookup_order"),
        "{listed:?}"
    );
    down.shutdown().await.expect("the upstream stops");
    let lines = PYTHON.run(&gateway, None, &["upstream_down", "slow", "garbage"]);
    for (scenario, server) in [
        ("upstream_down", "down"),
        ("slow", "slow"),
        ("garbage", "garbage"),
    ] {
        let at = line(&lines, scenario);
        let calls = at["calls"].as_array().expect("calls");
        let (last, before) = calls.split_last().expect("a call");
        assert!(
            tool_error(last, "circuit_open"),
            "{scenario}: the breaker never opened: {at}"
        );
        assert!(
            (before.iter()).all(|c| c["ok"] == true && c["is_error"] == true && c["code"].is_string()),
            "{scenario}: every answer a tool error with its code: {at}"
        );
        assert!(
            calls.iter().all(|c| c["elapsed_ms"].as_u64() < Some(2_000)),
            "{scenario}: each answer bounded: {at}"
        );
        let status = status(&gateway).await;
        assert_eq!(breaker(&status, server)["state"], "open", "{scenario}: {status}");
    }
    assert_eq!(breaker(&status(&gateway).await, "shop")["state"], "closed");
}

/// A server whose `create_refund` says `readOnlyHint: true` (a lie: it has side effects). Untrusted, the hint is
/// ignored: a call without a run has nothing to key on (`idempotency_key_missing`), and in a run the second call is the first's
/// replay (one execution). Trusted (`trust_annotations = true`), it is called as read-only: every call executes.
#[tokio::test(flavor = "multi_thread")]
async fn annotations_are_believed_only_from_a_trusted_server() {
    if !installed() {
        return;
    }
    let upstream = chaos("[mcp]\nlying_annotations = true\n").await;
    let servers = "[[mcp_servers]]\nname = \"untrusted\"\nurl = \"{chaos}/mcp\"\nprefix = \"untrusted_\"\n\
                   [[mcp_servers]]\nname = \"trusted\"\nurl = \"{chaos}/mcp\"\nprefix = \"trusted_\"\n\
                   trust_annotations = true\n";
    let gateway = Gateway::start(&config("", servers), &upstream, &[KEY]);
    // The handshake client: what 2026-07-28 clients make of an upstream tool's result is `mcp_python`'s business.
    let sdk = PYTHON_HANDSHAKE;
    let lines = sdk.run(&gateway, None, &["untrusted_annotations"]);
    let at = line(&lines, "untrusted_annotations");
    let tool = |name: &str| {
        let tool = &at["tools"][name];
        assert!(tool.is_object(), "{name} is not listed with readOnlyHint: {at}");
        tool
    };
    let untrusted = tool("untrusted_create_refund");
    assert!(tool_error(&untrusted["no_run"], KEY_MISSING), "{untrusted}");
    let same_run = &untrusted["same_run"];
    assert!(answered(&same_run[0]) && answered(&same_run[1]), "{untrusted}");
    assert_eq!(same_run[1]["replayed"], true, "{untrusted}");
    let op = |name: &str| sdk.op(&format!("untrusted_annotations-{name}"));
    assert_eq!(executions(&upstream, &op("untrusted_create_refund")).await, 1);

    let trusted = tool("trusted_create_refund");
    assert!(answered(&trusted["no_run"]), "{trusted}");
    let same_run = &trusted["same_run"];
    assert!(
        answered(&same_run[0]) && answered(&same_run[1]) && same_run[1]["replayed"] == false,
        "{trusted}"
    );
    assert_eq!(
        executions(&upstream, &op("trusted_create_refund")).await,
        3,
        "a trusted lie executes every call"
    );
}

/// kill -9 mid-payment: the gateway dies with the payment sent; restarted on the same SQLite store, the same call
/// (same run, same arguments) answers the stored result or `outcome_unknown`, and the payment never executes twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_payment_in_flight_at_kill_9_never_executes_twice() {
    if !installed() {
        return;
    }
    let upstream = chaos("[endpoints.process_payment]\nlatency = { p50 = \"3s\", p99 = \"3s\" }\n").await;
    let gateway = Gateway::start(&config("per_try_timeout = \"10s\"", ""), &upstream, &[KEY]);
    let first = PYTHON.start(&gateway, &["slow_side_effect"]);
    eventually("the payment in flight at the upstream", || async {
        let stats = endpoint_stats(&upstream, "process_payment").await;
        (stats["in_flight"].as_u64() >= Some(1)).then_some(())
    })
    .await;
    gateway.kill9();
    drop(first);
    let gateway = gateway.restart();
    let lines = PYTHON.run(&gateway, None, &["slow_side_effect"]);
    let call = &line(&lines, "slow_side_effect")["call"];
    assert!(
        answered(call) || tool_error(call, "outcome_unknown"),
        "after the restart: {call}"
    );
    // The first attempt's fate settled at the upstream (executed, or dropped with its connection) before counting.
    eventually("no payment in flight at the upstream", || async {
        let stats = endpoint_stats(&upstream, "process_payment").await;
        (stats["in_flight"] == 0).then_some(())
    })
    .await;
    assert!(
        executions(&upstream, &PYTHON.op("slow_side_effect")).await <= 1,
        "never a second payment: {call}"
    );
}
