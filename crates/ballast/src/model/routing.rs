//! Where a Responses call may go, and what it records (`responses/state.rs` says why): questions the route
//! answers before and after its walk.
//!
//! - A call that continues a response (`previous_response_id`) goes to the deployment the records name for its
//!   owner, and only there; a response the owner did not make here is refused, and nothing is sent.
//! - A conversation goes where its owner's record says; its first call here goes to the first deployment that
//!   speaks the Responses API (and the conversation is recorded there) — unless another owner started it here.
//! - A call naming both is refused: the API takes one or the other, and checking one would let the other through.
//! - Anything else goes through every deployment that speaks the Responses API, in order.
//!
//! Reading a record is bounded by the call's deadline (less its reserve): a slow store answers
//! `store_unavailable` in time, never after the caller gave up. Writing one is waited for at most until `by` (the
//! call's deadline, or a stream's commit bound: the caller's SDK waits that long for the status line), then
//! goes on in the background, retried, so a slow store never holds an answer past what its caller waits.

use std::time::Duration;

use ballast_config::Api;
use ballast_core::Deadline;

use super::call::{ResponsesCall, owner_of};
use super::responses::{StateHome, StateId, StateRecordError, StateRecords, is_state_id};
use super::route::{Route, Targets};
use crate::client::{CallError, Refusal};
use crate::{CallContext, clock};

/// The owner every conversation is also recorded under, so a second caller cannot take over another's.
const EVERY_OWNER: &str = "*";

/// How often a record that could not be written is tried again in the background, and how long apart.
const RECORD_TRIES: u32 = 5;
const RECORD_BACKOFF: Duration = Duration::from_millis(200);

/// Where a Responses call goes, and what its answer records.
#[derive(Clone, Debug)]
pub(in crate::model) struct Routed {
    pub(in crate::model) targets: Targets,
    owner: String,
    /// Whether the provider keeps the response it makes: then its id is recorded.
    keeps: bool,
    /// A conversation started by this call: recorded with the deployment that answers.
    starts: Option<StateId>,
}

impl Route {
    /// Where `call` may go (module docs), its records read within `ctx`'s deadline.
    pub(in crate::model) async fn route_responses(
        &self,
        call: &ResponsesCall,
        ctx: &CallContext,
    ) -> Result<Routed, CallError> {
        let owner = owner_of(call).to_owned();
        let request = &call.request;
        let routed = |targets, starts| Routed {
            targets,
            owner: owner.clone(),
            keeps: request.keeps_state(),
            starts,
        };
        let conversation = request.conversation_id();
        if let (Some(previous), Some(conversation)) = (&request.previous_response_id, conversation) {
            return Err(self.refused(Refusal::BothStates {
                previous_response_id: previous.clone(),
                conversation: conversation.to_owned(),
            }));
        }
        if let Some(id) = &request.previous_response_id {
            let index = self.home(&owner, &StateId::Response(id.clone()), ctx).await?;
            return Ok(routed(Targets::Pinned(index), None));
        }
        let Some(id) = conversation else {
            return Ok(routed(Targets::Speaking(Api::Responses), None));
        };
        let conversation = StateId::Conversation(id.to_owned());
        if !is_state_id(id) {
            return Err(self.refused(Refusal::InvalidId(id.to_owned())));
        }
        if let Some(home) = self.find(&owner, &conversation, ctx).await? {
            return Ok(routed(
                Targets::Pinned(self.index_of_home(&home, &conversation)?),
                None,
            ));
        }
        // Its first call here: unless another caller started it, it stays with the first deployment.
        if self.find(EVERY_OWNER, &conversation, ctx).await?.is_some() {
            return Err(self.refused(Refusal::UnknownState(conversation.to_string())));
        }
        let Some(&first) = self.order(&Targets::Speaking(Api::Responses)).first() else {
            return Err(self.refused(Refusal::ApiNotServed(Api::Responses)));
        };
        Ok(routed(Targets::Pinned(first), Some(conversation)))
    }

    /// The deployment that keeps `id` for `owner`, or the refusal.
    pub(in crate::model) async fn home(
        &self,
        owner: &str,
        id: &StateId,
        ctx: &CallContext,
    ) -> Result<usize, CallError> {
        if !is_state_id(id.id()) {
            return Err(self.refused(Refusal::InvalidId(id.id().to_owned())));
        }
        match self.find(owner, id, ctx).await? {
            Some(home) => self.index_of_home(&home, id),
            None => Err(self.refused(Refusal::UnknownState(id.to_string()))),
        }
    }

    /// The record of `id` for `owner`, read within the call's deadline less its reserve.
    async fn find(
        &self,
        owner: &str,
        id: &StateId,
        ctx: &CallContext,
    ) -> Result<Option<StateHome>, CallError> {
        let deadline = ctx.effective_deadline();
        let until = clock::to_tokio(deadline.instant() - deadline.reserve());
        match tokio::time::timeout_at(until, self.states.find(owner, id)).await {
            Ok(found) => found.map_err(|e| self.refused(Refusal::StateRecords(e))),
            Err(_late) => Err(self.refused(Refusal::StateRecords(StateRecordError {
                id: id.to_string(),
                action: "read",
                source: "the store did not answer within the call's deadline".into(),
            }))),
        }
    }

    /// The deployment `home` names, among those that speak the Responses API.
    fn index_of_home(&self, home: &StateHome, id: &StateId) -> Result<usize, CallError> {
        (self.deployments.iter())
            .position(|d| d.speaks(Api::Responses) && d.home() == *home)
            .ok_or_else(|| self.refused(Refusal::UnknownState(id.to_string())))
    }

    /// Records what `routed` says the answer of deployment `index` made — the response `response` (when kept), the
    /// conversation it started — waiting at most until `by`, then in the background (module docs).
    pub(in crate::model) async fn record_state(
        &self,
        routed: &Routed,
        response: Option<String>,
        index: usize,
        by: Deadline,
    ) {
        let home = self.deployments[index].home();
        let mut records: Vec<(String, StateId)> = Vec::new();
        if let Some(id) = response.filter(|_| routed.keeps) {
            records.push((routed.owner.clone(), StateId::Response(id)));
        }
        if let Some(conversation) = &routed.starts {
            // The owner's first: a lost second write lets nobody take it over, a lost first would lock its owner out.
            records.push((routed.owner.clone(), conversation.clone()));
            records.push((EVERY_OWNER.to_owned(), conversation.clone()));
        }
        if records.is_empty() {
            return;
        }
        let states = std::sync::Arc::clone(&self.states);
        let route = self.name().to_owned();
        let writing = crate::background::spawn(async move {
            for (owner, id) in records {
                write_with_retries(&*states, &route, &owner, &id, &home).await;
            }
        });
        let until = clock::to_tokio(by.instant() - by.reserve());
        // Past `by` the write goes on in the background; the answer does not wait for it.
        let _ = tokio::time::timeout_at(until, writing).await;
    }
}

/// Writes one record, trying again a few times when the store fails.
async fn write_with_retries(
    states: &dyn StateRecords,
    route: &str,
    owner: &str,
    id: &StateId,
    home: &StateHome,
) {
    for attempt in 1..=RECORD_TRIES {
        match states.record(owner, id, home).await {
            Ok(()) => return,
            Err(error) if attempt == RECORD_TRIES => {
                tracing::warn!(%route, %error, "the state's home was not recorded: calls that continue it are refused");
            }
            Err(_) => tokio::time::sleep(RECORD_BACKOFF * attempt).await,
        }
    }
}
