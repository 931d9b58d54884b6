//! The Responses API's calls of a model route: a response (streamed or not), routed and recorded by
//! `routing.rs`; and a response the provider keeps — retrieved, deleted or cancelled at the deployment that made
//! it.

use std::future::Future;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::api::Streamed;
use super::call::{ModelAnswer, ResponseIdCall, ResponsesAnswer, ResponsesCall, owner_of};
use super::client::ModelClient;
use super::responses::{Responses, StateId};
use super::route::Tried;
use super::stream::{ModelStream, ResponseStream};
use crate::body::Named;
use crate::client::{CallError, Refusal, record_request_id};

impl ModelClient {
    /// Asks the route for a response (the Responses API, not streamed: `stream` is dropped; use
    /// [`ModelClient::respond_stream`] to stream). A request that continues a response (`previous_response_id`)
    /// or a conversation goes only to the deployment that keeps it; any other goes through the deployments that
    /// speak the Responses API in order, as [`complete`](ModelClient::complete) does. The response's id is
    /// recorded with the deployment that made it, for the requests that continue it.
    pub fn respond(
        &self,
        call: ResponsesCall,
    ) -> impl Future<Output = Result<ResponsesAnswer, CallError>> + Send + '_ {
        let mut call = call;
        Responses::set_stream(&mut call.request, false);
        self.in_span(self.span_of(&call), |span| async move {
            let ctx = self.context(&call);
            let routed = self.route.route_responses(&call, &ctx).await?;
            let answer = self
                .unary::<Responses>(call.request, ctx.clone(), routed.targets.clone(), span, true)
                .await?;
            let index = self.route.index_of(&answer.deployment);
            self.route
                .record_state(
                    &routed,
                    Some(answer.response.id.clone()),
                    index,
                    ctx.effective_deadline(),
                )
                .await;
            Ok(answer)
        })
    }

    /// Asks the route for a streamed response (`stream: true` is set). The commit point is the first event
    /// after the preamble (`response.created`, `response.in_progress` are held back): an error the provider
    /// sends before it — an insufficient quota after `response.created` — falls back like any other failure and
    /// the caller never sees the failed deployment. After it, a failure is the stream's last item, an error.
    /// Routed and recorded as [`respond`](ModelClient::respond) does.
    pub fn respond_stream(
        &self,
        call: ResponsesCall,
    ) -> impl Future<Output = Result<ResponseStream, CallError>> + Send + '_ {
        let mut call = call;
        Responses::set_stream(&mut call.request, true);
        self.in_span(self.span_of(&call), |span| async move {
            let ctx = self.context(&call);
            let routed = self.route.route_responses(&call, &ctx).await?;
            let commit_by = call.commit_by;
            let (committed, tried, ctx) = self
                .to_commit::<Responses>(call.request, ctx, &routed.targets, commit_by, &span)
                .await?;
            let id = (committed.response.extensions().get::<Named>()).map(|named| named.0.clone());
            let source = self.source::<Responses>(&committed, call.idle);
            let stream = ModelStream::start(source, committed, tried, &ctx);
            // The status line waits for the record, never longer than the caller waits for it.
            let by = commit_by.map_or(ctx.effective_deadline(), |by| {
                by.earliest(&ctx.effective_deadline())
            });
            let index = self.route.index_of(stream.deployment());
            self.route.record_state(&routed, id, index, by).await;
            Ok(stream)
        })
    }

    /// Retrieves a response the route's deployments keep (`GET /responses/{id}`), from the deployment that made
    /// it; a response this caller did not make through the route is refused ([`Refusal::UnknownState`]).
    pub fn retrieve_response(
        &self,
        call: ResponseIdCall,
    ) -> impl Future<Output = Result<ResponsesAnswer, CallError>> + Send + '_ {
        self.in_span(self.span_of(&call), |span| {
            self.on_response(call, http::Method::GET, "", span)
        })
    }

    /// Deletes a response (`DELETE /responses/{id}`) at the deployment that made it; refused as
    /// [`retrieve_response`](ModelClient::retrieve_response) is. The answer is the provider's
    /// (`{"id", "object", "deleted"}`).
    pub fn delete_response(
        &self,
        call: ResponseIdCall,
    ) -> impl Future<Output = Result<ModelAnswer<Value>, CallError>> + Send + '_ {
        self.in_span(self.span_of(&call), |span| {
            self.on_response(call, http::Method::DELETE, "", span)
        })
    }

    /// Cancels a background response (`POST /responses/{id}/cancel`) at the deployment that made it; refused as
    /// [`retrieve_response`](ModelClient::retrieve_response) is.
    pub fn cancel_response(
        &self,
        call: ResponseIdCall,
    ) -> impl Future<Output = Result<ResponsesAnswer, CallError>> + Send + '_ {
        self.in_span(self.span_of(&call), |span| {
            self.on_response(call, http::Method::POST, "/cancel", span)
        })
    }

    /// A call about a kept response, at the deployment that made it: `method` on `/responses/{id}{suffix}` (and
    /// the call's query). Its tokens were counted when the response was made, and are not again.
    async fn on_response<T: DeserializeOwned>(
        &self,
        call: ResponseIdCall,
        method: http::Method,
        suffix: &str,
        span: tracing::Span,
    ) -> Result<ModelAnswer<T>, CallError> {
        let ctx = self.context(&call);
        let id = StateId::Response(call.request.id.clone());
        let index = self.route.home(owner_of(&call), &id, &ctx).await?;
        let query = call
            .request
            .query
            .as_deref()
            .map_or_else(String::new, |q| format!("?{q}"));
        let Some(uri) =
            self.route.deployments[index].uri_of(&format!("/responses/{}{suffix}{query}", id.id()))
        else {
            return Err(self.refused(Refusal::InvalidId(id.id().to_owned())));
        };
        record_request_id(&span, &ctx);
        let mut tried = Tried::default();
        let sent = self.route.state_trip(index, method, uri, &ctx, &mut tried).await;
        let result = match sent {
            Ok(committed) => self.answer::<Responses, T>(committed, &tried, false),
            Err(failure) => Err(self.failed::<Responses>(failure, &tried)),
        };
        self.observe(&span, result.as_ref().map_or_else(|e| e.report(), |a| &a.report));
        result
    }
}
