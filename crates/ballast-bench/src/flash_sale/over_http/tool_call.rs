//! One tool call of an agent over HTTP: through a Ballast gateway with its run and step — and with `--defer`, for a
//! side effect, asking to wait ([`super::super::defer`]) and telling a `202 Accepted` from the tool's output — or
//! straight to the upstream with a key made once for the call.

use std::sync::Arc;
use std::time::Duration;

use ballast::clock;
use bytes::Bytes;
use http::StatusCode;
use rand::rngs::SmallRng;

use super::super::defer::Deferral;
use super::super::scenario::Conversation;
use super::super::sdk::{Failure, SdkHabits};
use super::super::spread::Target;
use super::super::turns::ToolCall;
use super::{HttpAgents, Way, insert};

/// A tool call's step in its conversation: its turn, its ordinal among the turn's calls of one tool, and what is
/// left of the conversation's deadline when it is made.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    pub(super) turn: u32,
    pub(super) ordinal: u32,
    pub(super) left: Duration,
}

/// What a tool call came to when it did not fail.
pub(super) enum ToolAnswer {
    /// The tool's output, for the model.
    Output(String),
    /// The key of the operation the gateway deferred (a `202 Accepted`).
    Deferred(String),
}

impl HttpAgents {
    /// One tool call of `step`, with the SDK's habits: through the gateway with the run and the step (and, with
    /// `--defer`, for a side effect, asking to wait), or straight to the upstream with a key made once for the
    /// call. The answer's body, as the tool's output, or the key of the operation the gateway deferred.
    pub(super) async fn call_tool(
        &self,
        sdk: &SdkHabits,
        conversation: &Conversation,
        way: &Way<'_>,
        call: &ToolCall,
        Step { turn, ordinal, left }: Step,
        rng: &mut SmallRng,
    ) -> Result<ToolAnswer, Failure> {
        let mut headers = self.authorization();
        let mut asked = None;
        let target = match way {
            Way::Gateway(picker) => {
                insert(&mut headers, "ballast-run-id", &conversation.op);
                insert(&mut headers, "ballast-step-id", &format!("turn-{turn}"));
                if ordinal > 0 {
                    insert(&mut headers, "ballast-call-ordinal", &ordinal.to_string());
                }
                if let Some((ask, deferrals)) = &self.defer
                    && side_effect(&call.name)
                {
                    asked = Some((ask.ask(&mut headers, left), deferrals));
                }
                Target::Gateway {
                    picker: Arc::clone(picker),
                    path: format!("/v1/tools/{}", call.name),
                }
            }
            Way::Any { upstream, .. } => {
                if side_effect(&call.name) {
                    insert(&mut headers, "idempotency-key", &uuid::Uuid::new_v4().to_string());
                }
                Target::Url(format!("{upstream}/tools/{}", call.name))
            }
        };
        let body = Bytes::from(call.arguments.clone());
        let answer = sdk
            .post_answer(&self.client, &target, &headers, &body, rng)
            .await?;
        if let Some((ttl, deferrals)) = asked
            && answer.status == StatusCode::ACCEPTED
        {
            let op = operation(&call.arguments);
            let deferral =
                Deferral::accepted(&call.name, op, &answer.headers, &answer.body, clock::now(), ttl);
            let key = deferral.key.clone();
            deferrals.push(deferral);
            return Ok(ToolAnswer::Deferred(key));
        }
        Ok(ToolAnswer::Output(
            String::from_utf8_lossy(&answer.body).into_owned(),
        ))
    }
}

/// Whether a tool acts (refund, payment) rather than reads.
pub(super) fn side_effect(tool: &str) -> bool {
    tool != "lookup_order"
}

/// The operation a tool call's arguments name (their `op`): what the chaos upstream's ledger records it under.
pub(super) fn operation(arguments: &str) -> Option<String> {
    let arguments: serde_json::Value = serde_json::from_str(arguments).ok()?;
    arguments["op"].as_str().map(str::to_owned)
}
