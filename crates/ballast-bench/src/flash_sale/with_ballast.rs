//! The `ballast` strategy: the `ballast` crate in process, configured as a user would configure it.
//!
//! The configuration sets what a user sets: a per-try timeout per call (model 5 s, lookup 1 s, refund and
//! payment 2 s), `max_attempts = 4`, the tools' priorities (payment over refund over lookup), and that the
//! refund and payment upstreams take an idempotency key (`side_effects = true`, `upstream_idempotency =
//! "keyed"`, as the flash-sale upstream does). Every breaker, budget, admission limit and the run allowance are
//! at their defaults. Each conversation is one run under one deadline, and its key for a side effect is derived
//! from the run and the step, so every retry carries the same key.
//!
//! At a time scale other than 1 the durations of those defaults are written out scaled (backoff, breaker open
//! time, longest `Retry-After`, the budget window down to its 1 s minimum), so every clock of the run keeps the
//! same pace; at 1 the configuration is exactly the one above. The `gateway` strategy's `ballast serve` runs this
//! same configuration, with a store and a principal added (`super::gateway`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast::{
    CallError, Clients, Error, Overload, Runs, clock,
    context::scope,
    model::{ChatCall, ChatRequest, Message, ModelClients, Role, ToolCallRef},
    tool::{ToolCall, ToolClients, ToolError},
    transport::HttpTransport,
};
use ballast_config::Config;
use ballast_core::{AdaptiveThrottle, BreakerConfig, CircuitBreaker, Deadline, ThrottleConfig};
use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::scenario::Conversation;
use super::strategy::{Agents, BreakerChange, Outcome, Strategy};

/// The model route's name.
pub(super) const ROUTE: &str = "agent";
/// Model turns before the agent gives up on a conversation that never ends.
const MAX_TURNS: u32 = 4;
/// The tools, their per-try timeouts and priorities.
const TOOLS: [(&str, Duration, &str); 3] = [
    ("lookup_order", Duration::from_secs(1), "sheddable_plus"),
    ("create_refund", Duration::from_secs(2), "critical"),
    ("process_payment", Duration::from_secs(2), "critical_plus"),
];
/// The model's per-try timeout.
const MODEL_TIMEOUT: Duration = Duration::from_secs(5);

/// The `ballast` strategy (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct WithBallast;

impl Strategy for WithBallast {
    fn name(&self) -> &str {
        "ballast"
    }

    fn agents<'a>(
        &'a self,
        base_url: &'a str,
        time_scale: f64,
    ) -> BoxFuture<'a, Result<Box<dyn Agents>, String>> {
        Box::pin(std::future::ready(agents(base_url, time_scale)))
    }
}

/// The agents of one run (see the module docs).
fn agents(base_url: &str, time_scale: f64) -> Result<Box<dyn Agents>, String> {
    let config = Config::from_toml_str(&config(base_url, time_scale))
        .map_err(|error| format!("the ballast strategy's config: {error}"))?;
    let runs = Arc::new(Runs::of(&config.run));
    let http = reqwest::Client::builder()
        .build()
        .map_err(|error| format!("an HTTP client: {error}"))?;
    let Clients { tools, models, .. } = Clients::from_config(&config)
        .runs(runs)
        .build(HttpTransport::new(http).with_body_limit(config.server.body_limit))
        .map_err(|error| format!("the ballast strategy's clients: {error}"))?;
    let model = models.route(ROUTE).map_err(|error| error.to_string())?;
    let mut breakers = vec![(
        format!("{ROUTE}[0]"),
        Arc::clone(model.breaker(0).ok_or("the model route has a deployment")?),
    )];
    for (name, _, _) in TOOLS {
        let tool = tools.get(name).ok_or("every tool is configured")?;
        breakers.push((name.to_owned(), Arc::clone(tool.breaker())));
    }
    let mut throttles: Vec<Arc<AdaptiveThrottle>> = model.throttle(0).into_iter().cloned().collect();
    for (name, _, _) in TOOLS {
        let tool = tools.get(name).ok_or("every tool is configured")?;
        throttles.extend(tool.throttle().cloned());
    }
    let seen = Mutex::new(vec![0; breakers.len()]);
    Ok(Box::new(BallastAgents {
        models,
        tools,
        breakers,
        throttles,
        seen,
    }))
}

/// The tool's admission class in this configuration; the model route's (its default, `critical`) for any other
/// name.
pub(super) fn priority_of(call: &str) -> &'static str {
    TOOLS
        .iter()
        .find(|(tool, _, _)| *tool == call)
        .map_or(ballast_core::Priority::Critical.as_str(), |(_, _, class)| class)
}

/// The configuration (see the module docs); the `gateway` strategy's too, with a store and a principal added.
pub(super) fn config(base_url: &str, time_scale: f64) -> String {
    config_speaking(base_url, time_scale, None)
}

/// The configuration, its model deployment speaking `apis` (a TOML array of API names) when given, else the
/// default APIs (Responses, chat and embeddings: all the in-process agents call).
pub(super) fn config_speaking(base_url: &str, time_scale: f64, apis: Option<&str>) -> String {
    let defaults = ScaledDefaults::at(time_scale);
    let mut toml = models(base_url, time_scale, apis, &defaults);
    let ScaledDefaults {
        retry,
        breaker,
        budget,
        ..
    } = &defaults;
    for (name, timeout, priority) in TOOLS {
        let side_effects = if name == "lookup_order" {
            ""
        } else {
            "side_effects = true\nupstream_idempotency = \"keyed\"\n"
        };
        toml.push_str(&format!(
            "\n[[tools]]\nname = \"{name}\"\nupstream = {{ method = \"POST\", url = \"{base_url}/tools/{name}\" }}\n\
             {side_effects}priority = \"{priority}\"\nper_try_timeout = {}\nretry = {{ max_attempts = 4{retry} }}\n\
             {breaker}{budget}",
            scaled_ms(timeout, time_scale)
        ));
    }
    toml
}

/// The name of the upstream MCP server of [`config_over_mcp`].
pub(super) const MCP_SERVER: &str = "shop";

/// The configuration with the tools on the upstream's MCP server instead (the gateway's over MCP): the same model
/// route, then one `[[mcp_servers]]` entry at `{base_url}/mcp` whose tools have side effects by default, the lookup
/// read-only by its override, and each tool its per-try timeout and priority as above. The server deduplicates by
/// the operation's key (the chaos MCP server honours the `Idempotency-Key` the gateway sends with each side
/// effect), declared as for the HTTP tools: `upstream_idempotency = "keyed"`. Its retries, and at another time
/// scale its breaker, throttle and budget (one each, shared by its tools: one upstream), are set as each tool's
/// are above.
pub(super) fn config_over_mcp(base_url: &str, time_scale: f64, apis: Option<&str>) -> String {
    let defaults = ScaledDefaults::at(time_scale);
    let mut toml = models(base_url, time_scale, apis, &defaults);
    let ScaledDefaults {
        retry,
        breaker,
        budget,
        ..
    } = &defaults;
    let action_timeout = TOOLS[1].1;
    toml.push_str(&format!(
        "\n[[mcp_servers]]\nname = \"{MCP_SERVER}\"\nurl = \"{base_url}/mcp\"\nupstream_idempotency = \"keyed\"\n\
         per_try_timeout = {}\n\
         retry = {{ max_attempts = 4{retry} }}\n{breaker}{budget}",
        scaled_ms(action_timeout, time_scale)
    ));
    for (name, timeout, priority) in TOOLS {
        let side_effects = if name == "lookup_order" {
            "side_effects = false\n"
        } else {
            ""
        };
        toml.push_str(&format!(
            "\n[mcp_servers.tools.{name}]\n{side_effects}priority = \"{priority}\"\nper_try_timeout = {}\n",
            scaled_ms(timeout, time_scale)
        ));
    }
    toml
}

/// The defaults' durations written out scaled, when the clock is not real time (empty at real time).
struct ScaledDefaults {
    /// `[server]`'s `max_retry_after`.
    server: String,
    /// The backoff's `base` and `cap`, inside a `retry` table.
    retry: String,
    /// The breaker's and the throttle's tables.
    breaker: String,
    /// The retry budget's table.
    budget: String,
}

impl ScaledDefaults {
    fn at(time_scale: f64) -> ScaledDefaults {
        if time_scale == 1.0 {
            return ScaledDefaults {
                server: String::new(),
                retry: String::new(),
                breaker: String::new(),
                budget: String::new(),
            };
        }
        let ms = |d: Duration| scaled_ms(d, time_scale);
        let budget_window = Duration::from_secs(10)
            .mul_f64(time_scale)
            .max(Duration::from_secs(1));
        ScaledDefaults {
            server: format!("[server]\nmax_retry_after = {}\n", ms(Duration::from_secs(60))),
            retry: format!(
                ", base = {}, cap = {}",
                ms(Duration::from_millis(100)),
                ms(Duration::from_secs(2))
            ),
            breaker: format!(
                "breaker = {{ open_for = {}, window = {} }}\nthrottle = {{ window = {} }}\n",
                ms(BreakerConfig::DEFAULT_OPEN_FOR),
                ms(BreakerConfig::DEFAULT_WINDOW),
                ms(ThrottleConfig::DEFAULT_WINDOW)
            ),
            budget: format!(
                "budget = {{ kind = \"ratio\", window = \"{}\" }}\n",
                ballast_config::format_duration(budget_window)
            ),
        }
    }
}

/// `d` scaled, as a quoted TOML duration (1 ms at least).
fn scaled_ms(d: Duration, time_scale: f64) -> String {
    let scaled = Duration::from_millis(d.mul_f64(time_scale).as_millis().max(1) as u64);
    format!("\"{}\"", ballast_config::format_duration(scaled))
}

/// The configuration's start: the version, `[server]` at another time scale, and the model route.
fn models(base_url: &str, time_scale: f64, apis: Option<&str>, defaults: &ScaledDefaults) -> String {
    let ScaledDefaults {
        server,
        retry,
        breaker,
        budget,
    } = defaults;
    let api = apis.map(|apis| format!(", api = {apis}")).unwrap_or_default();
    format!(
        "version = 1\n{server}\n[[models]]\nname = \"{ROUTE}\"\n\
         deployments = [ {{ base_url = \"{base_url}/v1\", model = \"mock\"{api} }} ]\n\
         per_try_timeout = {}\nretry = {{ max_attempts = 4{retry} }}\n{breaker}{budget}",
        scaled_ms(MODEL_TIMEOUT, time_scale)
    )
}

struct BallastAgents {
    models: ModelClients,
    tools: ToolClients,
    /// Every breaker of the run, by name.
    breakers: Vec<(String, Arc<CircuitBreaker>)>,
    /// Every adaptive throttle of the run.
    throttles: Vec<Arc<AdaptiveThrottle>>,
    /// Transitions of each breaker reported so far.
    seen: Mutex<Vec<u64>>,
}

impl Agents for BallastAgents {
    fn converse<'a>(&'a self, conversation: &'a Conversation) -> BoxFuture<'a, Outcome> {
        let deadline = Deadline::after(clock::now(), conversation.deadline);
        Box::pin(scope(deadline, self.conversation(conversation)))
    }

    fn throttled(&self) -> Option<u64> {
        let now = clock::now();
        Some(self.throttles.iter().map(|t| t.snapshot(now).refused_total).sum())
    }

    fn breaker_changes(&self) -> Vec<BreakerChange> {
        let now = clock::now();
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changes = Vec::new();
        for ((name, breaker), seen) in self.breakers.iter().zip(seen.iter_mut()) {
            let snapshot = breaker.snapshot(now);
            if snapshot.transitions == *seen {
                continue;
            }
            let unseen = snapshot.transitions - *seen - 1;
            *seen = snapshot.transitions;
            if let Some(transition) = snapshot.last_transition {
                let mut reason = transition.reason.to_string();
                if unseen > 0 {
                    reason.push_str(&format!(" ({unseen} earlier changes between two looks)"));
                }
                changes.push(BreakerChange {
                    breaker: name.clone(),
                    change: format!("{} -> {}", transition.from, transition.to),
                    reason,
                    at: Duration::ZERO,
                });
            }
        }
        changes
    }
}

impl BallastAgents {
    async fn conversation(&self, conversation: &Conversation) -> Outcome {
        let Ok(model) = self.models.route(ROUTE) else {
            return Outcome::failed(0, "model", "unknown_route");
        };
        let run = conversation.op.as_str();
        let mut messages = vec![Message::text(Role::User, conversation.user_turn())];
        let mut calls = 0;
        let mut acted = false;
        for step in 1..=MAX_TURNS {
            calls += 1;
            let request = ChatRequest {
                model: ROUTE.into(),
                messages: messages.clone(),
                tools: None,
                stream: None,
                extra: Map::new(),
            };
            let answer = match model.complete(ChatCall::new(request).run(run)).await {
                Ok(answer) => answer,
                Err(error) => {
                    let mut outcome = Outcome::failed(calls, "model", error.code().as_str());
                    if shed_by_admission(&error) {
                        outcome.shed_class = Some(priority_of("model").to_owned());
                    }
                    return outcome;
                }
            };
            let Some(reply) = answer.response.choices.into_iter().next().and_then(|c| c.message) else {
                return Outcome::failed(calls, "model", "no_message");
            };
            messages.push(reply.clone());
            let Some(tool_calls) = reply.tool_calls.filter(|calls| !calls.is_empty()) else {
                return if acted {
                    Outcome::success(calls)
                } else {
                    Outcome::failed(calls, "model", "answered_without_acting")
                };
            };
            for (ordinal, tool_call) in (0_u32..).zip(tool_calls) {
                calls += 1;
                match self.call_tool(&tool_call, run, step, ordinal).await {
                    Ok((name, message)) => {
                        acted |= name != "lookup_order";
                        messages.push(message);
                    }
                    Err(outcome) => return Outcome { calls, ..outcome },
                }
            }
        }
        Outcome::failed(calls, "model", "too_many_turns")
    }

    /// One tool call the model asked for, through its `ToolClient`: the tool's name and the `tool` message that
    /// answers it, or the conversation's failure.
    async fn call_tool(
        &self,
        tool_call: &ToolCallRef,
        run: &str,
        step: u32,
        ordinal: u32,
    ) -> Result<(String, Message), Outcome> {
        let function = tool_call.extra.get("function").cloned().unwrap_or(Value::Null);
        let name = function["name"].as_str().unwrap_or_default().to_owned();
        let arguments = function["arguments"]
            .as_str()
            .and_then(|a| serde_json::from_str::<Value>(a).ok());
        let (Some(tool), Some(arguments)) = (self.tools.get(&name), arguments) else {
            return Err(Outcome::failed(0, &name, "unknown_tool"));
        };
        let call = ToolCall::new(arguments)
            .run(run)
            .step(format!("step-{step}"), ordinal);
        match tool.call(call).await {
            Ok(answer) => Ok((
                name,
                Message {
                    role: Role::Tool,
                    content: Some(Value::String(answer.body().to_string())),
                    tool_calls: None,
                    tool_call_id: tool_call.id.clone(),
                    extra: Map::new(),
                },
            )),
            Err(error) => {
                let code = error.code().as_str();
                let mut outcome = Outcome::failed(0, &name, code);
                if shed_by_admission(&error) {
                    outcome.shed_class = Some(priority_of(&name).to_owned());
                }
                Err(outcome)
            }
        }
    }
}

/// Whether `error` is a shed by admission (not a throttle's refusal, which is `overloaded` too).
fn shed_by_admission(error: &ToolError) -> bool {
    matches!(
        error,
        CallError::Failed { error: Error::Overloaded { reason, .. }, .. } if *reason != Overload::Throttled
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_sets_only_what_a_user_sets_at_real_time() {
        let toml = config("http://127.0.0.1:1", 1.0);
        assert!(
            !toml.contains("breaker") && !toml.contains("budget") && !toml.contains("base ="),
            "{toml}"
        );
        let config = Config::from_toml_str(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
        assert_eq!(config.tools.len(), 3);
    }

    #[test]
    fn a_scaled_config_is_valid() {
        for scale in [0.01, 0.05, 0.5, 2.0] {
            let toml = config("http://127.0.0.1:1", scale);
            Config::from_toml_str(&toml).unwrap_or_else(|e| panic!("scale {scale}: {e}\n{toml}"));
        }
    }

    #[test]
    fn over_mcp_the_tools_are_one_servers_with_the_lookup_read_only_and_each_tools_timeout_and_priority() {
        for scale in [1.0, 0.05] {
            let toml = config_over_mcp("http://127.0.0.1:1", scale, None);
            let config = Config::from_toml_str(&toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
            assert!(config.tools.is_empty(), "{toml}");
            let [server] = &config.mcp_servers[..] else {
                panic!("one MCP server: {toml}")
            };
            assert_eq!(server.url, "http://127.0.0.1:1/mcp");
            for (name, timeout, priority) in TOOLS {
                let tool = server.tool_config(name, None);
                assert_eq!(tool.side_effects, name != "lookup_order", "{name}");
                let deduplicates = tool.upstream_idempotency.deduplicates();
                assert_eq!(deduplicates, tool.side_effects, "{name}: keyed, as over HTTP");
                assert_eq!(tool.priority.as_str(), priority, "{name}");
                let scaled = Duration::from_millis(timeout.mul_f64(scale).as_millis() as u64);
                assert_eq!(tool.per_try_timeout, scaled, "{name}");
                assert_eq!(tool.retry.max_attempts, 4, "{name}");
            }
            // The model route as in process.
            assert!(toml.starts_with(&models(
                "http://127.0.0.1:1",
                scale,
                None,
                &ScaledDefaults::at(scale)
            )));
        }
    }
}
