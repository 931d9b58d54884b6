//! The naive strategy: the agent code of reference/000 and reference/002, as tutorials write it.
//!
//! - Per-call timeouts that add up: 30 s for the model (reference/000's SDK client and `wait_for`), 10 s for the
//!   order lookup (its `get_product_info`), 30 s for the refund or payment (its `FunctionConfig` default). No
//!   deadline for the conversation.
//! - 3 tries of every call, on every error: timeouts, connection errors, every non-2xx status (reference/002's
//!   async caller retries every `ClientError`; reference/000 retries every exception).
//! - Exponential backoff without a budget: 1 s, 2 s (doubling, capped at 30 s) with ±25 % jitter (reference/000);
//!   `Retry-After` is never read.
//! - The refund and the payment carry a new `Idempotency-Key` on every try: the key is made inside the retry
//!   loop, so a retry after a lost answer is a new operation to the upstream — the double refund.
//!
//! One departure, for the measurement only: every try sends `ballast-attempt` (its number from 1), as Ballast's
//! tries do, so that the chaos upstream draws the same fault for the same try of the same call whichever strategy
//! makes it. Nothing in the strategy reads it.
//!
//! The same agents call their tools over MCP in the `naive-mcp` strategy ([`NaiveMcp`]): the model calls as here,
//! the tool calls as tutorials write an MCP client ([`super::naive_mcp`]).

use std::time::Duration;

use futures::future::BoxFuture;
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use serde_json::{Value, json};

use super::mcp::McpClient;
use super::naive_mcp::{self, Tries};
use super::scenario::{Conversation, op_seed};
use super::strategy::{Agents, Outcome, Strategy, ToolApi, no_answer};

/// Tries per call.
const TRIES: u32 = 3;
/// The model's timeout per try.
const MODEL_TIMEOUT: Duration = Duration::from_secs(30);
/// The order lookup's timeout per try.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);
/// The refund's and the payment's timeout per try.
const ACTION_TIMEOUT: Duration = Duration::from_secs(30);
/// The first backoff sleep, doubled on every retry.
const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest backoff sleep.
const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// Model turns before the agent gives up on a conversation that never ends.
const MAX_TURNS: u32 = 4;

/// The naive strategy (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Naive;

impl Strategy for Naive {
    fn name(&self) -> &str {
        "naive"
    }

    fn agents<'a>(
        &'a self,
        base_url: &'a str,
        time_scale: f64,
    ) -> BoxFuture<'a, Result<Box<dyn Agents>, String>> {
        let agents = agents(base_url, time_scale, ToolApi::Http);
        Box::pin(std::future::ready(agents))
    }
}

/// The `naive-mcp` strategy: the naive agents with their tools on the upstream's MCP server, called as MCP
/// tutorials do ([`super::naive_mcp`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct NaiveMcp;

impl Strategy for NaiveMcp {
    fn name(&self) -> &str {
        "naive-mcp"
    }

    fn agents<'a>(
        &'a self,
        base_url: &'a str,
        time_scale: f64,
    ) -> BoxFuture<'a, Result<Box<dyn Agents>, String>> {
        Box::pin(std::future::ready(agents(base_url, time_scale, ToolApi::Mcp)))
    }
}

/// The naive agents of one run against the upstream at `base_url`, their tool calls over `tools`.
fn agents(base_url: &str, time_scale: f64, tools: ToolApi) -> Result<Box<dyn Agents>, String> {
    let client = reqwest::Client::builder()
        .build()
        .map_err(|error| format!("an HTTP client: {error}"))?;
    Ok(Box::new(NaiveAgents {
        client,
        base_url: base_url.to_owned(),
        time_scale,
        tools,
    }))
}

/// One run's naive agents, calling their tools at `/tools/{name}` or over MCP.
struct NaiveAgents {
    client: reqwest::Client,
    base_url: String,
    time_scale: f64,
    tools: ToolApi,
}

impl Agents for NaiveAgents {
    fn converse<'a>(&'a self, conversation: &'a Conversation) -> BoxFuture<'a, Outcome> {
        Box::pin(self.conversation(conversation))
    }
}

impl NaiveAgents {
    async fn conversation(&self, conversation: &Conversation) -> Outcome {
        // Jitter from the conversation's own seed: a run repeats.
        let mut rng = SmallRng::seed_from_u64(op_seed(&conversation.op));
        // Over MCP, a session first, as a tutorial's client opens one before the agent starts.
        let session = match self.tools {
            ToolApi::Http => None,
            ToolApi::Mcp => match naive_mcp::connect(
                &self.client,
                &self.base_url,
                LOOKUP_TIMEOUT.mul_f64(self.time_scale),
            )
            .await
            {
                Ok(session) => Some(session),
                Err(kind) => return Outcome::failed(0, "initialize", kind),
            },
        };
        let mut messages = vec![json!({"role": "user", "content": conversation.user_turn()})];
        let mut calls = 0;
        let mut acted = false;
        for _ in 0..MAX_TURNS {
            calls += 1;
            let request = json!({"model": "mock", "messages": messages});
            let url = format!("{}/v1/chat/completions", self.base_url);
            let timeout = MODEL_TIMEOUT.mul_f64(self.time_scale);
            let completion = match self.call(&url, &request, timeout, false, &mut rng).await {
                Ok(completion) => completion,
                Err(kind) => return Outcome::failed(calls, "model", kind),
            };
            let message = completion["choices"][0]["message"].clone();
            let tool_calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
            messages.push(message);
            if tool_calls.is_empty() {
                return if acted {
                    Outcome::success(calls)
                } else {
                    Outcome::failed(calls, "model", "answered_without_acting")
                };
            }
            for tool_call in tool_calls {
                calls += 1;
                let name = tool_call["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let arguments: Value = tool_call["function"]["arguments"]
                    .as_str()
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or(Value::Null);
                let side_effect = name != "lookup_order";
                let timeout = if side_effect {
                    ACTION_TIMEOUT
                } else {
                    LOOKUP_TIMEOUT
                };
                let reply = self
                    .call_tool(
                        session.as_ref(),
                        &name,
                        &arguments,
                        timeout,
                        side_effect,
                        &mut rng,
                    )
                    .await;
                let reply = match reply {
                    Ok(reply) => reply,
                    Err(kind) => return Outcome::failed(calls, &name, kind),
                };
                acted |= side_effect;
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": tool_call["id"],
                    "content": reply,
                }));
            }
        }
        Outcome::failed(calls, "model", "too_many_turns")
    }

    /// One tool call, at `/tools/{name}` or over the MCP `session`: its output for the model, or the last
    /// failure's kind.
    async fn call_tool(
        &self,
        session: Option<&McpClient>,
        name: &str,
        arguments: &Value,
        timeout: Duration,
        side_effect: bool,
        rng: &mut SmallRng,
    ) -> Result<String, String> {
        let timeout = timeout.mul_f64(self.time_scale);
        if let Some(session) = session {
            let tries = Tries {
                tries: TRIES,
                timeout,
                backoff: |attempt, rng: &mut SmallRng| backoff(attempt, rng).mul_f64(self.time_scale),
            };
            return naive_mcp::call(session, name, arguments, &tries, rng).await;
        }
        let url = format!("{}/tools/{name}", self.base_url);
        let reply = self.call(&url, arguments, timeout, side_effect, rng).await?;
        Ok(reply.to_string())
    }

    /// One call: [`TRIES`] tries of `timeout` (scaled) each on every error, with backoff between them; a new
    /// `Idempotency-Key` on each try of a side effect. The answer's JSON, or the last failure's kind.
    async fn call(
        &self,
        url: &str,
        body: &Value,
        timeout: Duration,
        side_effect: bool,
        rng: &mut SmallRng,
    ) -> Result<Value, String> {
        let mut last = String::new();
        for attempt in 1..=TRIES {
            let mut request = self
                .client
                .post(url)
                .timeout(timeout)
                .header("ballast-attempt", attempt)
                .json(body);
            if side_effect {
                request = request.header("idempotency-key", uuid::Uuid::new_v4().to_string());
            }
            last = match request.send().await {
                Ok(response) if response.status().is_success() => match response.json::<Value>().await {
                    Ok(answer) => return Ok(answer),
                    Err(error) => no_answer(&error),
                },
                Ok(response) => format!("status_{}", response.status().as_u16()),
                Err(error) => no_answer(&error),
            };
            if attempt < TRIES {
                tokio::time::sleep(backoff(attempt, rng).mul_f64(self.time_scale)).await;
            }
        }
        Err(last)
    }
}

/// The sleep after try `attempt` (from 1): `min(base * 2^(attempt-1), cap)` ± 25 % (unscaled).
fn backoff(attempt: u32, rng: &mut SmallRng) -> Duration {
    let exponential = BACKOFF_BASE
        .saturating_mul(1 << (attempt - 1).min(16))
        .min(BACKOFF_CAP);
    exponential.mul_f64(1.0 + 0.25 * rng.random_range(-1.0..=1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_a_quarter_and_caps() {
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..100 {
            let first = backoff(1, &mut rng).as_secs_f64();
            assert!((0.75..=1.25).contains(&first), "{first}");
            let second = backoff(2, &mut rng).as_secs_f64();
            assert!((1.5..=2.5).contains(&second), "{second}");
            assert!(backoff(10, &mut rng) <= BACKOFF_CAP.mul_f64(1.25));
        }
    }
}
