//! `--defer`: the `gateway` agents let their side effects wait when the gateway cannot serve them now, and the
//! bench drains what waited once the load is over.
//!
//! - **Asking.** Each side-effecting tool call (`create_refund`, `process_payment`) says `Prefer: respond-async`
//!   and `ballast-defer-ttl` ([`DeferAsk`]): what is left of its conversation's deadline plus a drain window of
//!   [`DRAIN_WINDOW`], both at the bench's time scale, and never under [`TTL_FLOOR`] of real time — the gateway's
//!   queue waits in real time at any scale (its backoff from 1 s, its 250 ms poll, its leases are the library's,
//!   not in the configuration), so a ttl scaled to a few hundred milliseconds would measure the scale, not the
//!   queue. Why that ttl: an operation may wait as long as its conversation could have, then a window in which a
//!   refund done late is still the one the user asked for; the lookup is read-only and asks nothing (only side
//!   effects are deferred).
//! - **A 202.** The gateway answers `202 Accepted` for a call it could not serve now and deferred. The agent keeps
//!   the operation ([`Deferral`]: its key, where to read it, when it expires) and its conversation ends there,
//!   neither a success within the deadline (its side effect did not happen in it) nor a failure (it was not lost:
//!   it waits) — as a failed side effect ends the conversation in the plain run, so the live load stays the plain
//!   run's and "success within the deadline" stays comparable with it.
//! - **The drain.** Once every conversation has ended, [`drain`] reads each kept operation at `GET
//!   /v1/operations/{key}` every [`POLL_EVERY`] (at most [`POLLS_AT_ONCE`] reads at once, each bounded) until it
//!   has ended — `completed`, `expired`, `failed`, `outcome_unknown`, or `not_found` (the gateway does not know
//!   it: never expected, counted unfinished) — and stops at the drain deadline: the last operation's expiry plus
//!   [`DRAIN_SLACK`] of real time (an attempt under way at its expiry may take up to 5 s more to end, and a worker
//!   takes an expired operation within its poll). What has not ended by then is unfinished. These reads are the
//!   bench's, not the agents' load: not counted per instance.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ballast::clock;
use ballast_core::Instant;
use futures::StreamExt as _;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::Value;

use super::deferrals::{DeferredEnd, DeferredRun, DeferredState};

/// The window after a conversation's deadline in which its deferred side effect may still be done (before time
/// scaling).
pub(super) const DRAIN_WINDOW: Duration = Duration::from_secs(60);
/// The shortest ttl asked for, in real time at any scale (see the module docs).
pub(super) const TTL_FLOOR: Duration = Duration::from_secs(5);
/// How long past the last expiry the drain still reads (real time).
pub(super) const DRAIN_SLACK: Duration = Duration::from_secs(10);
/// How often an unfinished operation is read again (real time, the queue's own poll).
pub(super) const POLL_EVERY: Duration = Duration::from_millis(250);
/// Reads of operations in flight at once.
pub(super) const POLLS_AT_ONCE: usize = 16;
/// The longest one read may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What the agents ask the gateway when they can wait (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct DeferAsk {
    time_scale: f64,
}

impl DeferAsk {
    /// Asking at the bench's `time_scale`.
    pub(super) fn new(time_scale: f64) -> DeferAsk {
        DeferAsk { time_scale }
    }

    /// The ttl of a call made with `left` of its conversation's deadline (scaled).
    pub(super) fn ttl(&self, left: Duration) -> Duration {
        (left + DRAIN_WINDOW.mul_f64(self.time_scale)).max(TTL_FLOOR)
    }

    /// Adds `Prefer: respond-async` and `ballast-defer-ttl` (in whole milliseconds, rounded up) to a call made
    /// with `left` of its conversation's deadline; the ttl asked.
    pub(super) fn ask(&self, headers: &mut HeaderMap, left: Duration) -> Duration {
        let ttl = self.ttl(left);
        let ms = ttl.as_nanos().div_ceil(1_000_000);
        headers.insert("prefer", HeaderValue::from_static("respond-async"));
        if let Ok(value) = HeaderValue::from_str(&format!("{ms}ms")) {
            headers.insert("ballast-defer-ttl", value);
        }
        ttl
    }
}

/// One side effect the gateway deferred, as its 202 said.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Deferral {
    /// The operation's key (empty: the 202 named none, and it cannot be read).
    pub(super) key: String,
    /// Where it is read: the 202's `Location`, else `/v1/operations/{key}`.
    pub(super) location: String,
    /// The tool.
    pub(super) tool: String,
    /// The call's `op`: what the upstream's ledger records an execution under.
    pub(super) op: Option<String>,
    /// When it expires: the 202's `expires_in_ms` from when it came, else the ttl asked.
    pub(super) expires: Instant,
}

impl Deferral {
    /// The operation a 202 with `headers` and `body` accepted for a call of `tool` with `op`, received at `at` for
    /// a call that asked for `asked`.
    pub(super) fn accepted(
        tool: &str,
        op: Option<String>,
        headers: &HeaderMap,
        body: &[u8],
        at: Instant,
        asked: Duration,
    ) -> Deferral {
        let json: Value = serde_json::from_slice(body).unwrap_or_default();
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let key = json["key"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| header("ballast-idempotency-key"))
            .unwrap_or_default();
        let location = header("location").unwrap_or_else(|| format!("/v1/operations/{key}"));
        let expires_in = json["expires_in_ms"]
            .as_u64()
            .map_or(asked, Duration::from_millis);
        Deferral {
            key,
            location,
            tool: tool.to_owned(),
            op,
            expires: at + expires_in,
        }
    }

    fn ended(&self, state: DeferredState, last_status: &str, took: Option<Duration>) -> DeferredEnd {
        DeferredEnd {
            key: self.key.clone(),
            tool: self.tool.clone(),
            op: self.op.clone(),
            state,
            last_status: last_status.to_owned(),
            took,
        }
    }
}

/// The operations one run's agents were told were deferred.
#[derive(Debug, Default)]
pub(super) struct Deferrals(Mutex<Vec<Deferral>>);

impl Deferrals {
    pub(super) fn push(&self, deferral: Deferral) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(deferral);
    }

    /// Every one kept so far, taken.
    pub(super) fn take(&self) -> Vec<Deferral> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Reads every one of `deferrals` at the gateway instances `bases` (`http://HOST:PORT`, taken in turn), with the
/// principal's `key`, until each has ended or the drain deadline passes (see the module docs).
pub(super) async fn drain(
    client: &reqwest::Client,
    bases: &[String],
    key: &str,
    deferrals: Vec<Deferral>,
) -> DeferredRun {
    let mut ends = Vec::with_capacity(deferrals.len());
    let Some(last_expiry) = deferrals.iter().map(|deferral| deferral.expires).max() else {
        return DeferredRun::new(ends);
    };
    let deadline = last_expiry + DRAIN_SLACK;
    // Each with the last status read ("unread": none yet).
    let mut pending: Vec<(Deferral, String)> = Vec::new();
    for deferral in deferrals {
        if deferral.key.is_empty() {
            ends.push(deferral.ended(DeferredState::Unfinished, "no_key", None));
        } else {
            pending.push((deferral, "unread".to_owned()));
        }
    }
    let mut round = 0;
    while !pending.is_empty() {
        // Made first, then run: a stream's closure over borrows would not be `Send` for every lifetime.
        let reading: Vec<_> = (pending.iter().enumerate())
            .map(|(i, (deferral, _))| {
                let base = &bases[(i + round) % bases.len().max(1)];
                read(client, base, key, &deferral.location)
            })
            .collect();
        let reads: Vec<Option<Read>> = futures::stream::iter(reading)
            .buffered(POLLS_AT_ONCE)
            .collect()
            .await;
        let mut still = Vec::with_capacity(pending.len());
        for ((deferral, last), read) in pending.into_iter().zip(reads) {
            match read {
                Some(read) => match read.state() {
                    Some(state) => ends.push(deferral.ended(state, &read.status, read.took)),
                    None => still.push((deferral, read.status)),
                },
                None => still.push((deferral, last)),
            }
        }
        pending = still;
        let now = clock::now();
        if pending.is_empty() || now >= deadline {
            break;
        }
        tokio::time::sleep(POLL_EVERY.min(deadline.saturating_duration_since(now))).await;
        round += 1;
    }
    ends.extend(
        pending
            .into_iter()
            .map(|(deferral, last)| deferral.ended(DeferredState::Unfinished, &last, None)),
    );
    DeferredRun::new(ends)
}

/// What one read of an operation said.
#[derive(Clone, Debug, PartialEq)]
struct Read {
    /// `status`: `queued`, `in_progress`, `completed`, ..., `not_found`.
    status: String,
    /// `took_ms`, for one that ended.
    took: Option<Duration>,
}

impl Read {
    /// How it ended (`None`: not yet). `not_found` ends it too: the gateway does not know it, and never will.
    fn state(&self) -> Option<DeferredState> {
        Some(match self.status.as_str() {
            "completed" => DeferredState::Completed,
            "expired" => DeferredState::Expired,
            "failed" => DeferredState::Failed,
            "outcome_unknown" => DeferredState::OutcomeUnknown,
            "not_found" => DeferredState::Unfinished,
            _ => return None,
        })
    }

    /// An answer of `GET /v1/operations/{key}` (`None`: not one to read — the store unavailable, ...).
    fn of(status: StatusCode, body: &[u8]) -> Option<Read> {
        if !(status.is_success() || status == StatusCode::NOT_FOUND) {
            return None;
        }
        let json: Value = serde_json::from_slice(body).ok()?;
        Some(Read {
            status: json["status"].as_str()?.to_owned(),
            took: json["took_ms"].as_u64().map(Duration::from_millis),
        })
    }
}

/// One `GET` of the operation at `location` on the instance `base`; `None` when no answer could be read.
async fn read(client: &reqwest::Client, base: &str, key: &str, location: &str) -> Option<Read> {
    let answer = client
        .get(format!("{base}{location}"))
        .bearer_auth(key)
        .timeout(READ_TIMEOUT)
        .send()
        .await
        .ok()?;
    let status = answer.status();
    let body = answer.bytes().await.ok()?;
    Read::of(status, &body)
}

#[cfg(test)]
mod tests;
