//! The store's Lua scripts and the reading of their replies.

use ballast_core::Fingerprint;
use bytes::Bytes;
use redis::{Script, Value};

use crate::clock::from_millis;
use crate::decide::{Stored, visible};
use crate::{
    ClaimOutcome, InFlight, OwnerToken, Record, RecordState, StoreError, StoredResponse, decode_headers,
};

/// The scripts, hashed once (`EVALSHA`; the driver loads a script the server does not know yet).
#[derive(Clone)]
pub(super) struct Scripts {
    pub(super) claim: Script,
    pub(super) transition: Script,
    pub(super) renew: Script,
    pub(super) lookup: Script,
    pub(super) reap: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Scripts {
            claim: Script::new(include_str!("claim.lua")),
            transition: Script::new(include_str!("transition.lua")),
            renew: Script::new(include_str!("renew.lua")),
            lookup: Script::new(include_str!("lookup.lua")),
            reap: Script::new(include_str!("reap.lua")),
        }
    }
}

/// A driver error as a store error: a key of another type under the prefix cannot be read (corrupt); anything
/// else (refused, timed out, dropped, a server error) leaves the record's fate unknown (unavailable).
pub(super) fn driver_error(error: redis::RedisError) -> StoreError {
    if error.code() == Some("WRONGTYPE") {
        return StoreError::Corrupt(format!("a key under the record prefix is not a hash: {error}"));
    }
    StoreError::unavailable(error)
}

pub(super) fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("unexpected reply from a Redis store script: {what}"))
}

/// A bulk string's bytes, or `None` for nil (a missing field).
pub(super) fn bytes(value: Value) -> Result<Option<Vec<u8>>, StoreError> {
    match value {
        Value::Nil => Ok(None),
        Value::BulkString(bytes) => Ok(Some(bytes)),
        Value::SimpleString(text) => Ok(Some(text.into_bytes())),
        Value::Int(number) => Ok(Some(number.to_string().into_bytes())),
        other => Err(corrupt(&format!("{other:?} where a string was expected"))),
    }
}

/// An integer reply or an integer stored as text.
pub(super) fn integer(value: Value, what: &str) -> Result<i64, StoreError> {
    match value {
        Value::Int(number) => Ok(number),
        other => bytes(other)?
            .and_then(|b| std::str::from_utf8(&b).ok()?.parse().ok())
            .ok_or_else(|| corrupt(what)),
    }
}

pub(super) fn array(value: Value) -> Result<Vec<Value>, StoreError> {
    match value {
        Value::Array(items) => Ok(items),
        other => Err(corrupt(&format!("{other:?} where an array was expected"))),
    }
}

/// The transition script's reply: applied, or the caller does not hold the record.
pub(super) fn applied(value: Value) -> Result<(), StoreError> {
    match integer(value, "transition result")? {
        1 => Ok(()),
        0 => Err(StoreError::NotHeld),
        other => Err(corrupt(&format!("transition result {other}"))),
    }
}

/// The reap script's reply: how many records it deleted.
pub(super) fn count(value: Value) -> Result<u64, StoreError> {
    u64::try_from(integer(value, "reap count")?).map_err(|_| corrupt("negative reap count"))
}

fn in_flight(state: &[u8]) -> Result<InFlight, StoreError> {
    match state {
        b"claimed" => Ok(InFlight::Claimed),
        b"dispatched" => Ok(InFlight::Dispatched),
        _ => Err(corrupt("in-flight state")),
    }
}

/// A stored response from its three fields.
fn response(status: Value, headers: Value, body: Value) -> Result<StoredResponse, StoreError> {
    let status = u16::try_from(integer(status, "stored status")?).map_err(|_| corrupt("stored status"))?;
    Ok(StoredResponse {
        status,
        headers: decode_headers(&bytes(headers)?.unwrap_or_default())?,
        body: Bytes::from(bytes(body)?.unwrap_or_default()),
    })
}

/// The claim script's reply (see `claim.lua`).
pub(super) fn claim_outcome(value: Value) -> Result<ClaimOutcome, StoreError> {
    let mut items = array(value)?.into_iter();
    let mut next = || items.next().unwrap_or(Value::Nil);
    let tag = bytes(next())?.ok_or_else(|| corrupt("empty claim reply"))?;
    Ok(match tag.as_slice() {
        b"acquired" => ClaimOutcome::Acquired,
        b"took_over" => ClaimOutcome::TookOver {
            was: in_flight(&bytes(next())?.unwrap_or_default())?,
        },
        b"unknown" => ClaimOutcome::OutcomeUnknown,
        b"mismatch" => ClaimOutcome::FingerprintMismatch,
        b"in_progress" => ClaimOutcome::InProgress {
            state: in_flight(&bytes(next())?.unwrap_or_default())?,
            lease_left: from_millis(integer(next(), "lease left")?),
        },
        b"completed" => ClaimOutcome::Completed(response(next(), next(), next())?),
        b"corrupt" => {
            let what = bytes(next())?.unwrap_or_default();
            return Err(StoreError::Corrupt(format!(
                "a Redis idempotency record has a missing or unknown {}",
                String::from_utf8_lossy(&what)
            )));
        }
        other => {
            return Err(corrupt(&format!(
                "claim tag {:?}",
                String::from_utf8_lossy(other)
            )));
        }
    })
}

/// The lookup script's reply as the record a caller sees (`None`: absent or past its retention).
pub(super) fn record(value: Value, storage_key: &str) -> Result<Option<Record>, StoreError> {
    let mut items = array(value)?.into_iter();
    let mut next = || items.next().unwrap_or(Value::Nil);
    let now = integer(next(), "server time")?;
    let Some(state) = bytes(next())? else {
        return Ok(None);
    };
    let bad = |what: &str| StoreError::Corrupt(format!("{what} of Redis idempotency record {storage_key:?}"));
    let fingerprint = bytes(next())?.ok_or_else(|| bad("fingerprint"))?;
    let owner = bytes(next())?.ok_or_else(|| bad("owner"))?;
    let lease_until = integer(next(), "lease").map_err(|_| bad("lease"))?;
    let expires_at = integer(next(), "exp").map_err(|_| bad("retention end"))?;
    let state = match state.as_slice() {
        b"claimed" => RecordState::Claimed,
        b"dispatched" => RecordState::Dispatched,
        b"outcome_unknown" => RecordState::OutcomeUnknown,
        b"completed" => {
            RecordState::Completed(response(next(), next(), next()).map_err(|_| bad("response"))?)
        }
        _ => return Err(bad("state")),
    };
    let stored = Stored {
        state,
        fingerprint: Fingerprint::from_bytes(fingerprint.try_into().map_err(|_| bad("fingerprint"))?),
        owner: std::str::from_utf8(&owner)
            .ok()
            .and_then(OwnerToken::from_hex)
            .ok_or_else(|| bad("owner"))?,
        lease_until,
        expires_at,
    };
    Ok(visible(stored, now))
}
