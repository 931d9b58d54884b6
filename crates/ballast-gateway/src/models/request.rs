//! A model request read and checked: its body as its API's, its route (by `model`), and its deadline from the
//! caller's headers (DESIGN.md, "Deadline").
//!
//! - **Not streamed**: the smallest deadline header of any kind (an SDK's timeout is the time to the whole
//!   answer), else the run's, else `server.default_timeout`.
//! - **Streamed**: the stream's total is bounded by the explicit headers (`ballast-timeout-ms`, `grpc-timeout`),
//!   Envoy's, or the run's — else `server.max_timeout`; an SDK's timeout bounds only the time to the commit point
//!   (the status line, which the SDK's HTTP client waits for) and, the Python SDK's read timeout, the longest gap.
//!
//! A deadline (or a commit bound) that cannot hold an attempt is answered at once, 504 `deadline_exceeded`, and
//! nothing is sent. An explicit header is offered to the caller's run (`ballast-run-id`), whose deadline then
//! holds across its later calls; an SDK's timeout never is.

use axum::body::Body;
use ballast::idempotency::Principal;
use ballast::{clock, policy::Deadline};
use ballast::{
    config::Api,
    model::{ChatRequest, EmbeddingsRequest, MessagesRequest, ModelCall, ModelClient, ResponsesRequest},
};
use ballast_core::Instant;
use http::HeaderMap;
use serde::de::DeserializeOwned;

use crate::Gateway;
use crate::error::{AppError, Refused};
use crate::inbound::{Inbound, call_deadline};
use crate::repeats::Identity;

/// A model request of an API: what routing and the deadline read of it.
pub(super) trait ModelRequest: DeserializeOwned {
    /// The route it names.
    fn model(&self) -> &str;
    /// Whether it asks for a stream.
    fn streamed(&self) -> bool;
    /// Takes what the API reads from the caller's headers (Anthropic's `anthropic-version` and `anthropic-beta`,
    /// sent upstream with the request); nothing by default.
    fn read_headers(&mut self, _headers: &HeaderMap) -> Result<(), AppError> {
        Ok(())
    }
}

impl ModelRequest for MessagesRequest {
    fn model(&self) -> &str {
        &self.model
    }
    fn streamed(&self) -> bool {
        self.stream == Some(true)
    }
    /// `anthropic-version` once (two would be a guess), `anthropic-beta` as often as sent (its lines joined, as
    /// the betas of one list); printable ASCII, as Anthropic reads them.
    fn read_headers(&mut self, headers: &HeaderMap) -> Result<(), AppError> {
        let values = |header: &'static str| -> Result<Vec<&str>, AppError> {
            (headers.get_all(header).iter())
                .map(|value| {
                    value.to_str().map_err(|_| AppError::BadHeader {
                        header,
                        value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
                        expected: "printable ASCII".to_owned(),
                    })
                })
                .collect()
        };
        let version = values("anthropic-version")?;
        if version.len() > 1 {
            return Err(AppError::HeaderRepeated {
                header: "anthropic-version",
            });
        }
        self.version = version.first().map(|v| (*v).to_owned());
        let betas = values("anthropic-beta")?;
        self.beta = (!betas.is_empty()).then(|| betas.join(","));
        Ok(())
    }
}

impl ModelRequest for ResponsesRequest {
    fn model(&self) -> &str {
        &self.model
    }
    fn streamed(&self) -> bool {
        self.stream == Some(true)
    }
}

impl ModelRequest for ChatRequest {
    fn model(&self) -> &str {
        &self.model
    }
    fn streamed(&self) -> bool {
        self.stream == Some(true)
    }
}

impl ModelRequest for EmbeddingsRequest {
    fn model(&self) -> &str {
        &self.model
    }
    fn streamed(&self) -> bool {
        false
    }
}

/// What the gateway settled about a call before sending it.
#[derive(Clone, Debug)]
pub(super) struct Settled {
    /// Whether the answer is streamed.
    pub(super) stream: bool,
    /// The call's deadline as the gateway told it (its run's folded in): what `ballast-remaining-ms` counts down.
    pub(super) deadline: Deadline,
    /// A retrieve, delete or cancel (a 404 for a response it does not know, not a 400).
    pub(super) about_a_response: bool,
    /// Whether this call started its run again after the run was evicted for room.
    pub(super) run_restarted: bool,
    /// The gateway's shutdown: a call it cut before sending anything is a shed, not a failure.
    pub(super) closing: tokio_util::sync::CancellationToken,
    inbound: Inbound,
    /// The explicit deadline the caller sent, offered to its run.
    explicit: Option<Deadline>,
    /// For a stream: the bound on the time to its commit point (an SDK's timeout).
    commit_by: Option<Deadline>,
    /// What the call is, when the request is traced (`telemetry/`): its answer then says what the call did.
    pub(super) traced: Option<crate::telemetry::Called>,
}

/// A request ready to call: the route's client, the call and what was settled.
pub(super) struct Prepared<R> {
    pub(super) client: ModelClient,
    pub(super) call: ModelCall<R>,
    pub(super) settled: Settled,
    /// What tells it from a repeat of a failure just answered.
    pub(super) identity: Identity,
}

/// Reads and checks a request of `api` to `path` (module docs). Its body is read within the deadline of a call that is
/// not streamed (whether it is, the body says), which is also what a refusal before the call is settled counts
/// down in `ballast-remaining-ms`.
pub(super) async fn prepare<R: ModelRequest>(
    gateway: &Gateway,
    caller: &Principal,
    inbound: Inbound,
    headers: &HeaderMap,
    body: Body,
    (api, path): (Api, &'static str),
) -> Result<Prepared<R>, Refused> {
    let now = clock::now();
    let server = &gateway.inner.config.server;
    let (reading, run_restarted, refused) =
        crate::inbound::unary_deadline(gateway, caller.name(), &inbound, now).await;
    let bytes = crate::body::read_body(body, server, reading, now)
        .await
        .map_err(refused)?;
    let mut request: R = serde_json::from_slice(&bytes).map_err(|e| {
        refused(AppError::InvalidRequest {
            message: format!("the body is not a {} request: {e}", api.title()),
        })
    })?;
    request.read_headers(headers).map_err(&refused)?;
    let client = gateway.inner.models.get(request.model()).ok_or_else(|| {
        let mut models: Vec<String> = gateway
            .inner
            .config
            .models
            .iter()
            .map(|m| m.name.clone())
            .collect();
        models.sort();
        refused(AppError::UnknownModel {
            name: request.model().to_owned(),
            models,
        })
    })?;
    if !client.speaks(api) {
        return Err(refused(AppError::InvalidRequest {
            message: format!(
                "no deployment of model route {:?} speaks the {} API (each deployment's `api` in the config says \
                 which it speaks)",
                client.name(),
                api.title()
            ),
        }));
    }
    crate::metrics::sdk_retry(client.name(), inbound.sdk_retry);
    // The reading's lookup made the run, when it was new: the restart, if any, was seen there.
    let mut settled = settle(gateway, caller, client.name(), inbound, request.streamed(), now)
        .await
        .map_err(|mut refused| {
            refused.run_restarted |= run_restarted;
            refused
        })?;
    settled.run_restarted |= run_restarted;
    // A traced request carries a sampled trace: the caller's, or the one the edge started (`telemetry/`).
    if gateway.inner.telemetry.is_some() && settled.inbound.trace.is_some_and(|t| t.sampled()) {
        settled.traced = Some(crate::telemetry::CallTrace::model(api, client.name()));
    }
    let call = with_options(ModelCall::new(request), gateway, caller, &settled);
    let identity = Identity::of(caller.name(), path, headers, bytes, settled.inbound.sdk_retry);
    Ok(Prepared {
        client: client.clone(),
        call,
        settled,
        identity,
    })
}

/// The deadline of a retrieve, delete or cancel (not streamed).
pub(super) async fn settle_state_call(
    gateway: &Gateway,
    caller: &Principal,
    inbound: Inbound,
) -> Result<Settled, Refused> {
    let mut settled = settle(gateway, caller, "responses", inbound, false, clock::now()).await?;
    settled.about_a_response = true;
    Ok(settled)
}

/// The call's deadlines (module docs); a deadline that cannot hold an attempt is answered at once.
async fn settle(
    gateway: &Gateway,
    caller: &Principal,
    route: &str,
    inbound: Inbound,
    stream: bool,
    now: Instant,
) -> Result<Settled, Refused> {
    let server = &gateway.inner.config.server;
    let (bound, fallback) = if stream {
        (inbound.whole_call_timeout, server.max_timeout)
    } else {
        (inbound.timeout, server.default_timeout)
    };
    let (deadline, run_restarted) =
        call_deadline(gateway, caller.name(), &inbound, bound, fallback, now).await;
    let commit_by = (inbound.sdk_timeout).filter(|_| stream).map(|t| {
        Deadline::after(now, t)
            .with_reserve(server.reserve)
            .with_min_attempt(server.min_attempt)
            .earliest(&deadline)
    });
    for bound in std::iter::once(deadline).chain(commit_by) {
        if let Err(exceeded) = bound.attempt_timeout(std::time::Duration::MAX, now) {
            return Err(Refused {
                error: AppError::too_late(route, &exceeded, inbound.run_id.as_deref()),
                deadline: Some(deadline),
                run_restarted,
            });
        }
    }
    let explicit = inbound.explicit_timeout.map(|t| Deadline::after(now, t));
    Ok(Settled {
        stream,
        deadline,
        run_restarted,
        about_a_response: false,
        closing: gateway.inner.closing.clone(),
        inbound,
        explicit,
        commit_by,
        traced: None,
    })
}

/// `call` with what the caller's headers and the gateway say about it: its deadlines, owner, run, priority,
/// hops, trace, and the gateway's shutdown.
pub(super) fn with_options<R>(
    call: ModelCall<R>,
    gateway: &Gateway,
    caller: &Principal,
    settled: &Settled,
) -> ModelCall<R> {
    let inbound = &settled.inbound;
    let mut call = call
        .call_deadline(settled.deadline)
        .owner(caller.name())
        .cancel_token(settled.closing.child_token());
    if let Some(explicit) = settled.explicit {
        call = call.deadline(explicit);
    }
    if let Some(by) = settled.commit_by {
        call = call.commit_by(by);
    }
    if let Some(gap) = inbound.read_timeout.filter(|_| settled.stream) {
        // Less the reserve: the stream's error event reaches the caller before its own read timeout fires.
        let reserve = gateway.inner.config.server.reserve;
        call = call.stream_idle_timeout(gap.saturating_sub(reserve).max(reserve));
    }
    if let Some(run) = &inbound.run_id {
        call = call.run(run.as_str());
    }
    crate::inbound::with_inbound!(call, inbound)
}
