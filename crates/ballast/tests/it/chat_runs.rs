//! One run across an agent's model and tool calls: `ModelClients` and `ToolClients` built on one registry of runs
//! share each run's retry allowance and deadline (paused time, chaos upstreams in process).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use ballast::{
    Clients, Runs, clock,
    model::ModelClient,
    tool::{ToolCall, ToolClients},
    transport::ServiceTransport,
};
use ballast_config::Config;
use ballast_core::{Deadline, StopReason};
use serde_json::json;
use support::BODY_LIMIT;
use support::chat::{Upstreams, call, first_turn, profile};

/// A model route over `primary` alone and the tool `lookup_order`, both with 3 attempts; runs get 2 retries.
const CONFIG: &str = r#"
version = 1
[server]
default_timeout = "10s"
[run]
retry_allowance = 2
[[models]]
name = "agent"
deployments = [ { base_url = "http://primary/v1", model = "mock" } ]
retry = { max_attempts = 3, base = "100ms", cap = "1s" }
[[tools]]
name = "lookup_order"
upstream = { method = "POST", url = "http://tools/tools/lookup_order" }
retry = { max_attempts = 3, base = "100ms", cap = "1s" }
"#;

/// The tools and the `agent` route over one registry of runs; the tools' chaos upstream has `tool_faults`.
fn agent(tool_faults: &str, upstreams: &Upstreams) -> (ToolClients, ModelClient, Arc<Runs>) {
    let config = Config::from_toml_str(CONFIG).expect("a valid config");
    let runs = Arc::new(Runs::new(config.run.retry_allowance, config.run.ttl));
    let tools_upstream = ballast_chaos::router(profile(tool_faults));
    let tools = (Clients::from_config(&config).runs(Arc::clone(&runs)))
        .build(ServiceTransport::new(tools_upstream).with_body_limit(BODY_LIMIT))
        .expect("the tools build")
        .tools;
    let models = (Clients::from_config(&config).runs(Arc::clone(&runs)))
        .build(upstreams.transport())
        .expect("the route builds")
        .models;
    let model = models.get("agent").expect("the agent route").clone();
    (tools, model, runs)
}

fn lookup() -> ToolCall {
    ToolCall::new(json!({"order_id": "1234", "op": "op-1"}))
}

#[tokio::test(start_paused = true)]
async fn retries_spent_by_a_runs_tool_calls_are_not_given_again_to_its_model_calls() {
    let upstreams = Upstreams::new(&[("primary", profile("[endpoints.model]\nerrors = { 503 = 1.0 }"))]);
    let (tools, model, runs) = agent("[endpoints.lookup_order]\nerrors = { 503 = 1.0 }", &upstreams);
    let tool = tools.get("lookup_order").expect("the tool");

    let error = tool
        .call(lookup().run("run-1"))
        .await
        .expect_err("the tool fails");
    let report = error.report();
    assert_eq!(
        report.attempts.len(),
        3,
        "two retries, the run's whole allowance: {report}"
    );
    assert_eq!(report.run_allowance_left, Some(0));
    assert_eq!(runs.get("run-1", clock::now()).allowance().left(), 0);

    let error = model
        .complete(call(&first_turn("op-1")).run("run-1"))
        .await
        .expect_err("the model fails");
    let report = error.report();
    assert_eq!(
        report.attempts.len(),
        1,
        "the run has no retry left for its model call: {report}"
    );
    assert_eq!(report.stop, Some(StopReason::RunAllowanceExhausted));
    assert_eq!(upstreams.count("primary"), 1);

    // Another run of the same clients has its own allowance: the model call is retried.
    let error = model
        .complete(call(&first_turn("op-2")).run("run-2"))
        .await
        .expect_err("the model fails");
    let report = error.report();
    assert_eq!(report.attempts.len(), 3, "{report}");
    assert_eq!(report.run_allowance_left, Some(0));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_given_to_a_runs_tool_call_holds_for_its_later_model_call() {
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let (tools, model, _runs) = agent("", &upstreams);
    let tool = tools.get("lookup_order").expect("the tool");
    let deadline = Deadline::after(clock::now(), Duration::from_secs(2));
    tool.call(lookup().run("run-1").deadline(deadline))
        .await
        .expect("the tool answers");
    tokio::time::advance(Duration::from_millis(500)).await;

    // The model call names no deadline (the route's default would be 10 s): the run's 2 s hold.
    model
        .complete(call(&first_turn("op-1")).run("run-1"))
        .await
        .expect("the model answers");
    let seen = upstreams.seen();
    assert_eq!(
        seen[0].headers["ballast-timeout-ms"], "1450",
        "2 s less the 500 ms gone and the 50 ms reserve"
    );

    // A call of another run gets the default.
    model
        .complete(call(&first_turn("op-2")).run("run-2"))
        .await
        .expect("the model answers");
    assert_eq!(upstreams.seen()[1].headers["ballast-timeout-ms"], "9950");
}
