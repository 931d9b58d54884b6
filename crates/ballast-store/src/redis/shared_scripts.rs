//! The shared state's Lua scripts (one per operation, as the records' are) and the reading of their replies.

use redis::{Script, Value};

use super::scripts::{array, bytes, corrupt, integer};
use crate::{RunState, StoreError};

/// The scripts, hashed once (`EVALSHA`; the driver loads a script the server does not know yet).
#[derive(Clone)]
pub(super) struct SharedScripts {
    pub(super) run_visit: Script,
    pub(super) run_take: Script,
    pub(super) run_give_back: Script,
    pub(super) limit_reserve: Script,
    pub(super) limit_correct: Script,
    pub(super) heartbeat: Script,
}

impl SharedScripts {
    pub(super) fn new() -> Self {
        SharedScripts {
            run_visit: Script::new(include_str!("run_visit.lua")),
            run_take: Script::new(include_str!("run_take.lua")),
            run_give_back: Script::new(include_str!("run_give_back.lua")),
            limit_reserve: Script::new(include_str!("limit_reserve.lua")),
            limit_correct: Script::new(include_str!("limit_correct.lua")),
            heartbeat: Script::new(include_str!("heartbeat.lua")),
        }
    }
}

/// A driver error as a store error: a key of another type where a run, limit or instance set belongs cannot
/// be read (corrupt); anything else leaves the outcome unknown (unavailable).
pub(super) fn driver_error(error: redis::RedisError) -> StoreError {
    if error.code() == Some("WRONGTYPE") {
        return StoreError::Corrupt(format!("a shared-state key holds another type: {error}"));
    }
    StoreError::unavailable(error)
}

fn count(value: Value, what: &str) -> Result<u64, StoreError> {
    u64::try_from(integer(value, what)?).map_err(|_| corrupt(what))
}

/// The visit script's reply: `{deadline in ms from now | nil, calls, taken}`.
pub(super) fn run_state(value: Value) -> Result<RunState, StoreError> {
    let mut items = array(value)?.into_iter();
    let mut next = || items.next().unwrap_or(Value::Nil);
    let deadline_in_ms = match next() {
        Value::Nil => None,
        other => Some(integer(other, "run deadline")?),
    };
    Ok(RunState {
        deadline_in_ms,
        calls: count(next(), "run calls")?,
        taken: count(next(), "run retries taken")?,
    })
}

/// The take script's reply: `{1 taken | 0 not, calls, taken}`.
pub(super) fn take(value: Value) -> Result<(bool, u64, u64), StoreError> {
    let mut items = array(value)?.into_iter();
    let mut next = || items.next().unwrap_or(Value::Nil);
    let took = match integer(next(), "take decision")? {
        0 => false,
        1 => true,
        other => return Err(corrupt(&format!("take decision {other}"))),
    };
    Ok((
        took,
        count(next(), "run calls")?,
        count(next(), "run retries taken")?,
    ))
}

/// The reserve script's reply: `{'granted' | 'refused', wait µs as text}`.
pub(super) fn reserve(value: Value) -> Result<(bool, f64), StoreError> {
    let mut items = array(value)?.into_iter();
    let mut next = || items.next().unwrap_or(Value::Nil);
    let granted = match bytes(next())?.as_deref() {
        Some(b"granted") => true,
        Some(b"refused") => false,
        other => return Err(corrupt(&format!("reserve tag {other:?}"))),
    };
    let wait = bytes(next())?
        .and_then(|b| std::str::from_utf8(&b).ok()?.parse::<f64>().ok())
        .filter(|wait| wait.is_finite())
        .ok_or_else(|| corrupt("reserve wait"))?;
    Ok((granted, wait))
}

/// The heartbeat script's reply: the live instances, saturating.
pub(super) fn instances(value: Value) -> Result<u32, StoreError> {
    Ok(u32::try_from(count(value, "live instances")?).unwrap_or(u32::MAX))
}
