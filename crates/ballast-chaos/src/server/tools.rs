//! `POST /tools/{name}`: the mock tools, their side effects and their idempotency keys; and the part of a call
//! that MCP's `tools/call` shares ([`enter`], [`Reached`]), so that a call meets the same faults, ledger, stats
//! and keys whichever way it comes.
//!
//! `lookup_order` is read-only. `create_refund` and `process_payment` have side effects: each execution is a
//! ledger entry under the body's `op`. Their endpoint's key mode (`EndpointProfile::key_mode`) decides what an
//! `Idempotency-Key` does:
//! - `none`: nothing; every request executes (a retry shows as a duplicate in the ledger).
//! - `keyed`: a key with a stored success replays it (`Idempotent-Replayed: true`, no execution); only successes
//!   are stored, so a retry after a failure executes.
//! - `keyed_replays_errors` (Stripe): the endpoint's own answers are stored and replayed, errors included. The
//!   injected statuses count as the endpoint's own answers (they model a failure *while executing*, the 5xx that
//!   Stripe replays), except 429: a rate limit refuses the request before it executes, so it is not stored.
//!
//! In both keyed modes a key reused with a different body is 422 and a key whose first request is still executing
//! is 409. Nothing decided before the endpoint acts is stored: outages, capacity sheds, malformed bodies.
//! A hang holds the key (a retry meanwhile gets 409) and releases it when it ends; a reset releases it at once;
//! a commit-then-lose stores the committed success before losing the answer, so a keyed retry gets the replay
//! and the ledger shows one execution.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::OwnedSemaphorePermit;

use super::answer::{Answer, Flavor};
use super::arrival::{Arrival, Door, answer, arrive, injected};
use super::keys::{Claim, KeyCheck, idempotency_key};
use super::lock::lock;
use super::lose::{self, ConnectionHandle};
use super::state::{App, Epoch};
use super::stats::{Outcome, Visit};
use super::{body_hash, short_hash};
use crate::{Fault, KeyMode};

/// The mock tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tool {
    LookupOrder,
    CreateRefund,
    ProcessPayment,
}

impl Tool {
    /// Every tool, in the order they are listed.
    pub(crate) const ALL: [Tool; 3] = [Tool::LookupOrder, Tool::CreateRefund, Tool::ProcessPayment];

    /// The tool called `name`, if there is one.
    pub(crate) fn named(name: &str) -> Option<Tool> {
        match name {
            "lookup_order" => Some(Tool::LookupOrder),
            "create_refund" => Some(Tool::CreateRefund),
            "process_payment" => Some(Tool::ProcessPayment),
            _ => None,
        }
    }

    /// Its name: in the path, over MCP, and as its endpoint in the profile, the stats and the ledger.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tool::LookupOrder => "lookup_order",
            Tool::CreateRefund => "create_refund",
            Tool::ProcessPayment => "process_payment",
        }
    }
}

/// One tool call past the front door and the key check.
#[derive(Debug)]
struct Call {
    tool: Tool,
    op: String,
    args: Value,
    key: Option<String>,
    claim: Option<Claim>,
}

/// Answers one tool call over HTTP.
pub(crate) async fn call_tool(
    State(app): State<App>,
    Path(name): Path<String>,
    conn: Option<Extension<ConnectionHandle>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(tool) = Tool::named(&name) else {
        let message =
            format!("no tool named {name:?}; the tools are lookup_order, create_refund, process_payment");
        return Answer::tool_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "unknown_tool",
            message,
        )
        .into_response();
    };
    let conn = conn.map(|Extension(conn)| conn);
    match enter(&app, tool, &body, &headers, conn).await {
        Ok(reached) => reached.answer().into_response(),
        Err(answered) => answered,
    }
}

/// A tool call that reached the tool: the front door let it in, and its fault (if any) is one the tool plays
/// itself. What is left is its answer — executing it, or the answer the key check (or its body) already gave —
/// or, over MCP, a fault only MCP plays ([`Fault::Garbage`], [`Fault::IsError`]).
///
/// It holds the request's place in the stats and its capacity slot until it is answered or dropped.
#[derive(Debug)]
pub(crate) struct Reached {
    epoch: Arc<Epoch>,
    visit: Visit,
    slot: Option<OwnedSemaphorePermit>,
    work: Work,
}

#[derive(Debug)]
enum Work {
    /// The answer without executing: a bad body (400), a key in use (409) or reused (422), a replay.
    Answer(Answer),
    /// Execute `call`, which drew `fault` (one the shared path leaves to the transport, or none).
    Execute { call: Call, fault: Fault },
}

impl Reached {
    /// The fault left for the transport to play: [`Fault::None`] when the call answers without executing, or
    /// when nothing goes wrong; a stream fault (a tool has no stream: served normally), [`Fault::Garbage`] or
    /// [`Fault::IsError`] otherwise.
    pub(crate) fn fault(&self) -> Fault {
        match self.work {
            Work::Answer(_) => Fault::None,
            Work::Execute { fault, .. } => fault,
        }
    }

    /// Ends the call without executing or answering it, counted as `outcome` (a key it claimed is released).
    pub(crate) fn skip(mut self, outcome: Outcome) {
        self.visit.count(outcome, false);
    }

    /// The tool's answer, counted under its status: the call executed (a ledger entry for a side effect, its
    /// success stored under its key), or the answer it already had.
    pub(crate) fn answer(self) -> Answer {
        let Reached {
            epoch,
            mut visit,
            slot,
            work,
        } = self;
        let done = match work {
            Work::Answer(answer) => answer,
            Work::Execute { mut call, .. } => execute(&epoch, &mut call),
        };
        visit.count(Outcome::Status(done.status.as_u16()), done.replayed);
        drop(slot);
        done
    }
}

/// The part of a tool call that is the same over HTTP and MCP: the front door (stats, outage, capacity, the
/// draw, latency), the body and key checks, and the faults that answer instead of the tool — an injected status,
/// a hang, a reset, a commit-then-lose. `body` is the tool's JSON arguments (the HTTP body; over MCP the call's
/// `arguments`): its `op` keys the faults and the ledger, and without one a hash of `body` does.
///
/// # Errors
/// The HTTP response that answered the call instead of the tool.
pub(crate) async fn enter(
    app: &App,
    tool: Tool,
    body: &[u8],
    headers: &HeaderMap,
    conn: Option<ConnectionHandle>,
) -> Result<Reached, Response> {
    let args: Option<Value> = serde_json::from_slice(body).ok();
    let op = match args.as_ref().and_then(|a| a.get("op")).and_then(Value::as_str) {
        Some(op) => op.to_owned(),
        None => body_hash(body),
    };
    let epoch = app.epoch();
    let door = Door {
        stopping: app.stopping(),
        conn: conn.clone(),
    };
    let Arrival {
        draw,
        mut visit,
        slot,
    } = arrive(&epoch, tool.name(), &op, headers, Flavor::Tool, door).await?;
    let work = match admit(&epoch, tool, op, args, headers) {
        Ok(call) => play(app, &epoch, draw.fault, &mut visit, call, conn).await?,
        Err(refusal) => Work::Answer(refusal),
    };
    Ok(Reached {
        epoch,
        visit,
        slot,
        work,
    })
}

/// Validates the body and checks the key: the call to execute, or the answer instead (400, replay, 409, 422).
fn admit(
    epoch: &Epoch,
    tool: Tool,
    op: String,
    args: Option<Value>,
    headers: &HeaderMap,
) -> Result<Call, Answer> {
    let args = validate(tool, args)?;
    let key = idempotency_key(headers)
        .map_err(|bad| invalid_request("invalid_idempotency_key", bad.to_string()))?;
    let keyed = tool != Tool::LookupOrder && epoch.profile.endpoint(tool.name()).key_mode != KeyMode::None;
    let claim = match key.as_deref() {
        Some(key) if keyed => match epoch.keys.check(tool.name(), key, &args) {
            KeyCheck::Claimed(claim) => Some(claim),
            KeyCheck::Replay(stored) => return Err(stored),
            KeyCheck::InUse => return Err(key_in_use(key)),
            KeyCheck::Reused => return Err(key_reused(key)),
        },
        _ => None,
    };
    Ok(Call {
        tool,
        op,
        args,
        key,
        claim,
    })
}

/// Plays the attempt's fault on `call` when it answers instead of the tool; else leaves the call to execute.
async fn play(
    app: &App,
    epoch: &Epoch,
    fault: Fault,
    visit: &mut Visit,
    mut call: Call,
    conn: Option<ConnectionHandle>,
) -> Result<Work, Response> {
    let mode = epoch.profile.endpoint(call.tool.name()).key_mode;
    match fault {
        Fault::Status {
            status,
            retry_after,
            quota,
        } => {
            let error = injected(Flavor::Tool, status, retry_after, quota);
            if let Some(claim) = call.claim.as_mut()
                && mode == KeyMode::KeyedReplaysErrors
                && status != 429
            {
                claim.store(&error);
            }
            Err(answer(visit, error))
        }
        Fault::Hang => {
            visit.count(Outcome::Hang, false);
            // The claim is held while hanging and released when the hang ends (or hyper drops this future).
            Err(lose::hang(app.stopping(), conn).await)
        }
        Fault::Reset => {
            visit.count(Outcome::Reset, false);
            drop(call.claim.take());
            Err(lose::reset(conn).await)
        }
        Fault::CommitThenLose(lose_with) => {
            let _lost = execute(epoch, &mut call);
            visit.count(Outcome::CommitThenLose, false);
            Err(lose::lose(lose_with, app.stopping(), conn).await)
        }
        Fault::None
        | Fault::StreamCut { .. }
        | Fault::StreamStall { .. }
        | Fault::StreamError { .. }
        | Fault::Garbage
        | Fault::IsError => Ok(Work::Execute { call, fault }),
    }
}

/// Executes `call` (a ledger entry for a side effect) and stores its success under its key.
fn execute(epoch: &Epoch, call: &mut Call) -> Answer {
    let Call {
        tool, op, args, key, ..
    } = &*call;
    let text = |field: &str| args.get(field).cloned().unwrap_or(Value::Null);
    let done = match tool {
        Tool::LookupOrder => {
            let order_id = args["order_id"].as_str().unwrap_or_default();
            Answer::ok(json!({
                "order_id": order_id,
                "status": "delivered",
                "amount": order_amount(order_id),
                "op": op,
            }))
        }
        Tool::CreateRefund | Tool::ProcessPayment => {
            let execution = lock(&epoch.ledger).record(tool.name(), op, key.as_deref());
            let (prefix, object) = match tool {
                Tool::CreateRefund => ("re", "refund"),
                _ => ("pay", "payment"),
            };
            Answer::ok(json!({
                "id": format!("{prefix}_{}", short_hash(format!("{op}/{execution}").as_bytes())),
                "object": object,
                "status": "succeeded",
                "op": op,
                "order_id": text("order_id"),
                "amount": text("amount"),
                "execution": execution,
            }))
        }
    };
    if let Some(claim) = call.claim.as_mut() {
        claim.store(&done);
    }
    done
}

/// An order's amount in cents: a stable function of its id (1.00 to 500.00).
fn order_amount(order_id: &str) -> u64 {
    let hash = u64::from_str_radix(&short_hash(order_id.as_bytes()), 16).unwrap_or_default();
    100 + hash % 49_901
}

/// The body must be a JSON object; `lookup_order` needs an `order_id` string.
fn validate(tool: Tool, args: Option<Value>) -> Result<Value, Answer> {
    let Some(args) = args.filter(Value::is_object) else {
        let message = "the body must be a JSON object of the tool's arguments".to_owned();
        return Err(invalid_request("invalid_body", message));
    };
    if tool == Tool::LookupOrder && !args.get("order_id").is_some_and(Value::is_string) {
        let message = "lookup_order needs \"order_id\" (a string)".to_owned();
        return Err(invalid_request("missing_order_id", message));
    }
    Ok(args)
}

fn invalid_request(code: &str, message: String) -> Answer {
    Answer::tool_error(StatusCode::BAD_REQUEST, "invalid_request_error", code, message)
}

fn key_in_use(key: &str) -> Answer {
    let message =
        format!("a request with Idempotency-Key {key:?} is still being processed; retry after it completes");
    Answer {
        retry_after: Some(super::answer::RetryAfter::seconds(1)),
        ..Answer::tool_error(
            StatusCode::CONFLICT,
            "idempotency_error",
            "idempotency_key_in_use",
            message,
        )
    }
}

fn key_reused(key: &str) -> Answer {
    let message = format!(
        "Idempotency-Key {key:?} was used with a different body; use a new key for a different request"
    );
    Answer::tool_error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_error",
        "idempotency_key_reused",
        message,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_known_by_name() {
        for tool in [Tool::LookupOrder, Tool::CreateRefund, Tool::ProcessPayment] {
            assert_eq!(Tool::named(tool.name()), Some(tool));
        }
        assert_eq!(Tool::named("send_email"), None);
    }

    #[test]
    fn order_amounts_are_stable_and_in_range() {
        let amount = order_amount("A-1001");
        assert_eq!(amount, order_amount("A-1001"));
        assert!((100..=50_000).contains(&amount));
    }

    #[test]
    fn bodies_are_validated() {
        assert!(validate(Tool::CreateRefund, Some(json!({"op": "x"}))).is_ok());
        assert!(validate(Tool::CreateRefund, Some(json!([1]))).is_err());
        assert!(validate(Tool::CreateRefund, None).is_err());
        let missing = validate(Tool::LookupOrder, Some(json!({"op": "x"}))).expect_err("order_id missing");
        assert_eq!(missing.body["error"]["code"], "missing_order_id");
    }
}
