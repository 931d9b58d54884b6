//! Agents over HTTP, written as Python and TypeScript agents are: model calls with the official SDK against a
//! base URL, tool calls with plain HTTP beside it, every call with the SDK's habits ([`super::sdk`]). The
//! `gateway` and `against` strategies are these agents pointed at different places ([`Route`]).
//!
//! - **The API**: [`ModelApi::Mixed`] (the default) alternates agents between the Responses API (today's default
//!   API of the SDKs; the agent continues with `previous_response_id` and sends only the new
//!   `function_call_output` items, as README's quick start does) and Chat Completions (the history resent each
//!   turn): even agents Responses, odd ones chat. The chaos model plays the same conversation with the same
//!   faults through both. [`ModelApi::Responses`] and [`ModelApi::Chat`] use one for every agent.
//! - **The SDK**: agents 0 and 1 have openai-python's habits, 2 and 3 openai-node's, and so on
//!   ([`Flavour::of_agent`]), so each API has agents of both. Each sets its SDK's timeout to its conversation's
//!   deadline (the SDKs' 600 s default would make one hang last ten minutes) and keeps the default 2 retries.
//! - **Through a Ballast gateway** ([`Route::Ballast`]): the conversation is one run — its `ballast-run-id` on
//!   every call, its deadline as `ballast-timeout-ms` on its first call (the run holds it for every later call) —
//!   and every tool call says its step (`ballast-step-id: turn-N`, and `ballast-call-ordinal` for a second call of
//!   one tool in one turn), from which the gateway derives the side effect's key: a retried step never pays twice.
//! - **Through any other gateway** ([`Route::Any`]): model calls go to it and carry only what an SDK sends; tool
//!   calls go straight to the upstream (such a gateway cannot take them), a side effect's `Idempotency-Key` made
//!   once per call and kept across its retries, as a careful agent (and the SDKs, where they send one) does.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderMap, HeaderName, HeaderValue};
use rand::rngs::SmallRng;

use super::scenario::Conversation;
use super::sdk::{Failure, Flavour, SdkHabits, jitter_rng};
use super::strategy::{Agents, Outcome};
use super::turns::{ToolCall, Turns};
use super::with_ballast;

/// The model route the agents ask for (`model`), through every gateway.
pub const MODEL: &str = with_ballast::ROUTE;
/// Model turns before an agent gives up on a conversation that never ends.
const MAX_TURNS: u32 = 4;

/// Which API the agents' model calls use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ModelApi {
    /// Even agents the Responses API, odd ones Chat Completions.
    #[default]
    Mixed,
    /// Every agent the Responses API.
    Responses,
    /// Every agent Chat Completions.
    Chat,
}

impl ModelApi {
    /// Whether `agent` calls the Responses API (else Chat Completions).
    fn responses_for(self, agent: usize) -> bool {
        match self {
            ModelApi::Mixed => agent.is_multiple_of(2),
            ModelApi::Responses => true,
            ModelApi::Chat => false,
        }
    }
}

impl FromStr for ModelApi {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mixed" => Ok(ModelApi::Mixed),
            "responses" => Ok(ModelApi::Responses),
            "chat" => Ok(ModelApi::Chat),
            _ => Err(format!("unknown API {s:?}: mixed, responses, chat")),
        }
    }
}

impl fmt::Display for ModelApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelApi::Mixed => "mixed",
            ModelApi::Responses => "responses",
            ModelApi::Chat => "chat",
        })
    }
}

/// Where an agent's calls go.
#[derive(Clone, Debug)]
pub(super) enum Route {
    /// Everything through a Ballast gateway at `base` (`http://HOST:PORT`): model calls to `/v1/...`, tool calls
    /// to `/v1/tools/{name}`, under one run per conversation.
    Ballast {
        /// The gateway's root URL.
        base: String,
    },
    /// Model calls to any OpenAI-compatible gateway; tool calls straight to the upstream.
    Any {
        /// The gateway's base URL (`http://HOST:PORT/v1`).
        models: String,
        /// The upstream's root URL, whose `/tools/{name}` the tool calls go to.
        upstream: String,
    },
}

/// One run's HTTP agents: one HTTP client (a connection pool) for all, as one process of agents has.
pub(super) struct HttpAgents {
    client: reqwest::Client,
    route: Route,
    /// `Authorization: Bearer` on the gateway's calls.
    key: Option<String>,
    api: ModelApi,
    time_scale: f64,
}

impl HttpAgents {
    /// Agents calling through `route`, with `key` when the gateway asks for one.
    pub(super) fn new(
        route: Route,
        key: Option<String>,
        api: ModelApi,
        time_scale: f64,
    ) -> Result<HttpAgents, String> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|error| format!("an HTTP client: {error}"))?;
        Ok(HttpAgents {
            client,
            route,
            key,
            api,
            time_scale,
        })
    }
}

impl Agents for HttpAgents {
    fn converse<'a>(&'a self, conversation: &'a Conversation) -> BoxFuture<'a, Outcome> {
        Box::pin(self.conversation(conversation))
    }
}

impl HttpAgents {
    async fn conversation(&self, conversation: &Conversation) -> Outcome {
        let sdk = SdkHabits::new(
            Flavour::of_agent(conversation.agent),
            conversation.deadline,
            self.time_scale,
        );
        let mut rng = jitter_rng(&conversation.op);
        let mut turns = Turns::new(self.api.responses_for(conversation.agent), conversation);
        let mut calls = 0;
        let mut acted = false;
        for turn in 1..=MAX_TURNS {
            calls += 1;
            let headers = self.model_headers(conversation, turn == 1);
            let url = self.model_url(turns.path());
            let answer = match sdk
                .post(&self.client, &url, &headers, &turns.request(), &mut rng)
                .await
            {
                Ok(answer) => answer,
                Err(failure) => return failed(calls, "model", &failure),
            };
            let tool_calls = match turns.read(&answer) {
                Ok(tool_calls) => tool_calls,
                Err(code) => return Outcome::failed(calls, "model", code),
            };
            if tool_calls.is_empty() {
                return if acted {
                    Outcome::success(calls)
                } else {
                    Outcome::failed(calls, "model", "answered_without_acting")
                };
            }
            let mut ordinals: HashMap<String, u32> = HashMap::new();
            let mut outputs = Vec::with_capacity(tool_calls.len());
            for call in tool_calls {
                calls += 1;
                let ordinal = ordinals.entry(call.name.clone()).or_insert(0);
                let result = self
                    .call_tool(&sdk, conversation, &call, turn, *ordinal, &mut rng)
                    .await;
                *ordinal += 1;
                match result {
                    Ok(output) => {
                        acted |= side_effect(&call.name);
                        outputs.push((call.id, output));
                    }
                    Err(failure) => return failed(calls, &call.name, &failure),
                }
            }
            turns.answer(outputs);
        }
        Outcome::failed(calls, "model", "too_many_turns")
    }

    /// One tool call, with the SDK's habits: through the gateway with the run and the step, or straight to the
    /// upstream with a key made once for the call. The answer's body, as the tool's output.
    async fn call_tool(
        &self,
        sdk: &SdkHabits,
        conversation: &Conversation,
        call: &ToolCall,
        turn: u32,
        ordinal: u32,
        rng: &mut SmallRng,
    ) -> Result<String, Failure> {
        let mut headers = self.authorization();
        let url = match &self.route {
            Route::Ballast { base } => {
                insert(&mut headers, "ballast-run-id", &conversation.op);
                insert(&mut headers, "ballast-step-id", &format!("turn-{turn}"));
                if ordinal > 0 {
                    insert(&mut headers, "ballast-call-ordinal", &ordinal.to_string());
                }
                format!("{base}/v1/tools/{}", call.name)
            }
            Route::Any { upstream, .. } => {
                if side_effect(&call.name) {
                    insert(&mut headers, "idempotency-key", &uuid::Uuid::new_v4().to_string());
                }
                format!("{upstream}/tools/{}", call.name)
            }
        };
        let body = Bytes::from(call.arguments.clone());
        let answer = sdk.post(&self.client, &url, &headers, &body, rng).await?;
        Ok(String::from_utf8_lossy(&answer).into_owned())
    }

    /// A model call's headers: the key, and through a Ballast gateway the run (its deadline on the first call).
    fn model_headers(&self, conversation: &Conversation, first: bool) -> HeaderMap {
        let mut headers = self.authorization();
        if let Route::Ballast { .. } = self.route {
            insert(&mut headers, "ballast-run-id", &conversation.op);
            if first {
                let ms = conversation.deadline.as_millis().max(1);
                insert(&mut headers, "ballast-timeout-ms", &ms.to_string());
            }
        }
        headers
    }

    fn model_url(&self, path: &str) -> String {
        match &self.route {
            Route::Ballast { base } => format!("{base}/v1{path}"),
            Route::Any { models, .. } => format!("{models}{path}"),
        }
    }

    fn authorization(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.key {
            insert(&mut headers, "authorization", &format!("Bearer {key}"));
        }
        headers
    }
}

/// Whether a tool acts (refund, payment) rather than reads.
fn side_effect(tool: &str) -> bool {
    tool != "lookup_order"
}

/// A conversation that failed on `call` with `failure`, its class when the gateway shed it.
fn failed(calls: u32, call: &str, failure: &Failure) -> Outcome {
    let mut outcome = Outcome::failed(calls, call, failure.code());
    if failure.shed_by_admission() {
        outcome.shed_class = Some(with_ballast::priority_of(call).to_owned());
    }
    outcome
}

fn insert(headers: &mut HeaderMap, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(HeaderName::from_static(name), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_alternate_apis_and_sdks_so_that_each_api_has_both() {
        let seen: Vec<(bool, Flavour)> = (0..4)
            .map(|agent| (ModelApi::Mixed.responses_for(agent), Flavour::of_agent(agent)))
            .collect();
        assert_eq!(
            seen,
            [
                (true, Flavour::Python),
                (false, Flavour::Python),
                (true, Flavour::Node),
                (false, Flavour::Node)
            ]
        );
        assert!(!ModelApi::Chat.responses_for(0) && ModelApi::Responses.responses_for(1));
        assert_eq!("chat".parse(), Ok(ModelApi::Chat));
        assert!(
            "soap"
                .parse::<ModelApi>()
                .unwrap_err()
                .contains("mixed, responses, chat")
        );
    }
}
