//! The deferred queue's Lua scripts (one per operation, as the records' are) and the reading of their replies.
//!
//! Every script but the reap starts with `defer_common.lua` (the clock, the key layout, the reply of an
//! operation, the record writes), joined at compile time, so the scripts cannot drift apart on the layout.

use ballast_core::IdempotencyKey;
use bytes::Bytes;
use redis::{Script, Value};

use super::scripts::{array, bytes, corrupt, integer};
use crate::clock::from_millis;
use crate::{Operation, OperationState, QueueDepth, Scope, StoreError, StoredResponse, decode_headers};

/// The scripts, hashed once (`EVALSHA`; the driver loads a script the server does not know yet).
#[derive(Clone)]
pub(super) struct DeferredScripts {
    pub(super) defer: Script,
    pub(super) take: Script,
    pub(super) renew: Script,
    pub(super) begin: Script,
    pub(super) reschedule: Script,
    pub(super) finish: Script,
    pub(super) lookup: Script,
    pub(super) depth: Script,
    pub(super) expire: Script,
    pub(super) reap: Script,
}

/// A script of the queue: `defer_common.lua` and then its own file.
macro_rules! queue_script {
    ($file:literal) => {
        Script::new(concat!(include_str!("defer_common.lua"), include_str!($file)))
    };
}

impl DeferredScripts {
    pub(super) fn new() -> Self {
        DeferredScripts {
            defer: queue_script!("defer.lua"),
            take: queue_script!("defer_take.lua"),
            renew: queue_script!("defer_renew.lua"),
            begin: queue_script!("defer_begin.lua"),
            reschedule: queue_script!("defer_reschedule.lua"),
            finish: queue_script!("defer_finish.lua"),
            lookup: queue_script!("defer_lookup.lua"),
            depth: queue_script!("defer_depth.lua"),
            expire: queue_script!("defer_expire.lua"),
            reap: Script::new(include_str!("defer_reap.lua")),
        }
    }
}

/// A driver error as a store error: a key of another type where an operation or a queue belongs cannot be read
/// (corrupt); anything else leaves the outcome unknown (unavailable).
pub(super) fn driver_error(error: redis::RedisError) -> StoreError {
    if error.code() == Some("WRONGTYPE") {
        return StoreError::Corrupt(format!("a deferred-queue key holds another type: {error}"));
    }
    StoreError::unavailable(error)
}

/// An operation as a script answered it (see `operation` in `defer_common.lua`).
pub(super) struct Answer {
    /// The operation, its durations counted from the script's now.
    pub(super) operation: Operation,
    /// A take found it in progress with an attempt begun (its worker died).
    pub(super) interrupted: bool,
    /// Whether the lookup script found it ended and past its retention (Redis has not deleted it yet).
    pub(super) past_retention: bool,
}

fn corrupt_operation(what: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "a Redis deferred operation has a missing or unreadable {what}"
    ))
}

fn text(value: Value, what: &str) -> Result<String, StoreError> {
    let raw = bytes(value)?.ok_or_else(|| corrupt_operation(what))?;
    String::from_utf8(raw).map_err(|_| corrupt_operation(what))
}

fn number<T: TryFrom<i64>>(value: Value, what: &str) -> Result<T, StoreError> {
    T::try_from(integer(value, what).map_err(|_| corrupt_operation(what))?)
        .map_err(|_| corrupt_operation(what))
}

fn optional_number(value: Value, what: &str) -> Result<Option<i64>, StoreError> {
    match value {
        Value::Nil => Ok(None),
        other => integer(other, what)
            .map(Some)
            .map_err(|_| corrupt_operation(what)),
    }
}

/// The last answer from its three fields (no status: none).
fn last_answer(status: Value, headers: Value, body: Value) -> Result<Option<StoredResponse>, StoreError> {
    let Some(status) = optional_number(status, "last answer's status")? else {
        return Ok(None);
    };
    Ok(Some(StoredResponse {
        status: u16::try_from(status).map_err(|_| corrupt_operation("last answer's status"))?,
        headers: decode_headers(&bytes(headers)?.unwrap_or_default())?,
        body: Bytes::from(bytes(body)?.unwrap_or_default()),
    }))
}

/// A script's operation reply: `None` when it names no operation (a lookup of an unknown scope, an empty take).
pub(super) fn answer(value: Value) -> Result<Option<Answer>, StoreError> {
    let items = match value {
        Value::Nil => return Ok(None),
        other => array(other)?,
    };
    let mut items = items.into_iter();
    let mut next = || items.next().unwrap_or(Value::Nil);
    let now = integer(next(), "server time")?;
    let interrupted = integer(next(), "interrupted flag")? == 1;
    let principal = match next() {
        Value::Nil => return Ok(None),
        other => text(other, "principal")?,
    };
    let route = text(next(), "route")?;
    let key = IdempotencyKey::parse(&text(next(), "key")?).map_err(|_| corrupt_operation("key"))?;
    let tool = text(next(), "tool")?;
    let priority: u8 = number(next(), "priority")?;
    let state = OperationState::parse(&text(next(), "state")?).ok_or_else(|| corrupt_operation("state"))?;
    let attempts: u32 = number(next(), "attempts")?;
    let max_attempts: u32 = number(next(), "max attempts")?;
    let request = Bytes::from(bytes(next())?.unwrap_or_default());
    let deferred: i64 = number(next(), "deferral time")?;
    let due: i64 = number(next(), "due time")?;
    let expires: i64 = number(next(), "ttl end")?;
    let finished = optional_number(next(), "end time")?;
    let last = last_answer(next(), next(), next())?;
    let keep = optional_number(next(), "retention end")?;
    let due_in = if state == OperationState::Queued {
        from_millis(due - now)
    } else {
        std::time::Duration::ZERO
    };
    Ok(Some(Answer {
        operation: Operation {
            scope: Scope::new(principal, route, key),
            tool,
            priority,
            state,
            attempts,
            max_attempts,
            request,
            last,
            age: from_millis(now - deferred),
            due_in,
            expires_in: from_millis(expires - now),
            took: finished.map(|end| from_millis(end - deferred)),
        },
        interrupted,
        past_retention: state.is_finished() && keep.is_some_and(|keep| keep <= now),
    }))
}

/// The defer script's reply: the operation, or `None` when the owner does not hold the record (`0`).
pub(super) fn deferred(value: Value) -> Result<Option<Operation>, StoreError> {
    if matches!(value, Value::Int(0)) {
        return Ok(None);
    }
    let answer = answer(value)?.ok_or_else(|| corrupt("a defer reply without its operation"))?;
    Ok(Some(answer.operation))
}

/// The depth script's reply: `{tool, priority, queued, in progress, oldest age ms}` per class, flattened.
pub(super) fn depth(value: Value) -> Result<Vec<QueueDepth>, StoreError> {
    let items = array(value)?;
    if items.len() % 5 != 0 {
        return Err(corrupt("a depth reply of uneven length"));
    }
    let mut depths = Vec::with_capacity(items.len() / 5);
    let mut items = items.into_iter();
    while let Some(tool) = items.next() {
        let mut next = || items.next().unwrap_or(Value::Nil);
        depths.push(QueueDepth {
            tool: text(tool, "tool")?,
            priority: number(next(), "priority")?,
            queued: number(next(), "queued count")?,
            in_progress: number(next(), "in-progress count")?,
            oldest: from_millis(integer(next(), "oldest age")?),
        });
    }
    Ok(depths)
}
