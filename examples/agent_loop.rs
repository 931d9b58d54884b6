//! A full agent step against the chaos upstream in process: the model asks for tool calls, the tools run
//! through `ToolClient`, their answers go back to the model — every call of the step under ONE deadline and ONE
//! run (one retry allowance for the model's and the tools' calls together) — and each call's outcome report is
//! printed, model and tool alike.
//!
//! Run: `cargo run -p ballast --example agent_loop` (optionally `-- SEED` to meet other faults of the flash-sale preset).
//!
//! What to look for: the model's 5xx, 429s (`Retry-After: 1`) and hangs are retried or moved to the fallback
//! deployment within what is left of the deadline; the refund carries one idempotency key derived from the run
//! and the step, so a retried step never refunds twice; the model reports say how many tokens the step cost.

use std::time::Duration;

use ballast::config::Config;
use ballast::policy::Deadline;
use ballast::{
    Clients,
    model::{ChatCall, ChatRequest, Message, Role, ToolCallRef},
    tool::{ToolCall, ToolClients},
    transport::ServiceTransport,
};
use ballast::{clock, context::scope};
use ballast_chaos::Profile;
use serde_json::{Value, json};

const CONFIG: &str = r#"
version = 1
[server]
default_timeout = "30s"

[[models]]
name = "agent"
# Two deployments of the same chaos model: each has its own breaker and retry budget.
deployments = [ { base_url = "http://chaos/v1", model = "gpt-4.1" },
                { base_url = "http://chaos-fallback/v1", model = "mock" } ]
per_try_timeout = "5s"
primary_share = 0.6

[[tools]]
name = "lookup_order"
upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
per_try_timeout = "1s"

[[tools]]
name = "create_refund"
upstream = { method = "POST", url = "http://chaos/tools/create_refund" }
side_effects = true
upstream_idempotency = "keyed"
per_try_timeout = "2s"

[[tools]]
name = "process_payment"
upstream = { method = "POST", url = "http://chaos/tools/process_payment" }
side_effects = true
upstream_idempotency = "keyed"
per_try_timeout = "2s"
"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seed = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(7);
    let chaos = ballast_chaos::router(Profile::preset("flash-sale", seed)?);
    let config = Config::from_toml_str(CONFIG)?;
    // One registry of runs for the model and the tools, from the config's `[run]`: the run's deadline and its
    // retry allowance (3 retries plus half a retry per call, for the whole agent request) hold across every call
    // of the request, model and tool alike.
    // No deployment names an API key variable: the environment is not read.
    let Clients { tools, models, .. } = Clients::from_config(&config)
        .build(ServiceTransport::new(chaos).with_body_limit(config.server.body_limit))?;
    let model = models.route("agent")?;

    println!("flash-sale faults, seed {seed}; one 30 s deadline for the whole agent request\n");
    let deadline = Deadline::after(clock::now(), Duration::from_secs(30));
    let run = "customer-request-1";
    let mut messages = vec![
        Message::text(
            Role::Developer,
            "You handle refunds. Look the order up before refunding it.",
        ),
        Message::text(Role::User, "Refund order 1234, op=op-77"),
    ];
    // Everything inside the scope shares the deadline: each call gets what the calls before it left.
    scope(deadline, async {
        for step in 1..=5 {
            let request = ChatRequest::new("agent", messages.clone());
            let answer = match model.complete(ChatCall::new(request).run(run)).await {
                Ok(answer) => answer,
                Err(error) => {
                    println!("{}", error.report());
                    println!("  -> the model failed: {error}");
                    return;
                }
            };
            println!("step {step}, model:\n{}\n", answer.report);
            let Some(reply) = answer.response.choices.into_iter().next().and_then(|c| c.message) else {
                println!("the model sent no message");
                return;
            };
            messages.push(reply.clone());
            let Some(calls) = reply.tool_calls.filter(|calls| !calls.is_empty()) else {
                println!("the agent's answer: {}", reply.content.unwrap_or(Value::Null));
                return;
            };
            for (ordinal, tool_call) in (0_u32..).zip(calls) {
                messages.push(call_tool(&tools, &tool_call, run, step, ordinal).await);
            }
        }
        println!("stopped after 5 steps");
    })
    .await;
    println!(
        "time left of the deadline: {} ms",
        deadline.remaining(clock::now()).as_millis()
    );
    Ok(())
}

/// Runs one tool call the model asked for through its `ToolClient` (key derived from run, step and ordinal),
/// prints its report, and returns the `tool` message that answers it.
async fn call_tool(
    tools: &ToolClients,
    tool_call: &ToolCallRef,
    run: &str,
    step: u32,
    ordinal: u32,
) -> Message {
    let name = tool_call.function_name().unwrap_or_default();
    let arguments: Option<Value> = tool_call.arguments().ok();
    let reply = match (tools.get(name), arguments) {
        (Some(tool), Some(arguments)) => {
            let call = ToolCall::new(arguments)
                .run(run)
                .step(format!("step-{step}"), ordinal);
            match tool.call(call).await {
                Ok(answer) => {
                    println!("step {step}, tool:\n{}\n", answer.report);
                    answer.body().clone()
                }
                Err(error) => {
                    println!("step {step}, tool:\n{}\n  -> {error}\n", error.report());
                    json!({"error": error.to_string(), "outcome_unknown": error.outcome_unknown()})
                }
            }
        }
        _ => json!({"error": format!("no tool {name:?} with readable arguments")}),
    };
    Message::tool_reply(tool_call.id.clone(), reply.to_string())
}
