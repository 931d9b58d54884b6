//! A model deployment's account limits (requests and tokens per minute), decided before each attempt so that
//! Ballast never sends the request that would earn a 429 (DESIGN.md, "Many instances").
//!
//! ```text
//! deadline -> admission -> retry -> LimitService -> BreakerService (throttle, breaker) -> AttemptService
//! ```
//!
//! Each attempt (a retry is a request to the provider too) charges one request and its estimated tokens — its
//! body's bytes / 4 plus the output it asks for at most (`max_tokens`, `max_output_tokens`,
//! `max_completion_tokens`) — against every limit together (ballast-core's GCRA, [`ballast_core::reserve_all`]).
//! A charge that cannot go now waits for its slot when the call's deadline still holds an attempt after the wait;
//! otherwise the attempt is refused as [`Overload::Limited`] with the time the limit has room again — a first
//! attempt moves on to the route's next deployment (or is shed, `overloaded`), a retry ends the call with the last
//! real answer, as a throttled one does. When a whole answer reports its usage, the token limit is corrected by
//! the difference (a streamed answer keeps its estimate: the charge was made before its first byte).
//!
//! Where the limits are counted ([`LimitMode`]): in the shared store when the gateway has one (Redis,
//! PostgreSQL: every instance charges the same numbers, on the store's clock); in this process when it has none
//! (SQLite: one process is the whole deployment); and while the shared store is lost, as `on_store_loss` says —
//! this instance's share of each limit (the limit divided by the instances seen alive lately), or refusal. Never
//! silently the whole limit per instance.

mod service;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast_config::{Limits, OnStoreLoss};
use ballast_core::{Deadline, Gcra, Instant, reserve_all};

pub(crate) use service::LimitLayer;

use crate::{Error, Overload, clock};

/// Where a deployment's limits are counted now (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitMode {
    /// In the shared store, across every instance.
    Shared,
    /// In this process, the whole limit: there is no shared store (one process is the whole deployment).
    Local,
    /// In this process, its share of the limit: the shared store is lost (`on_store_loss = "share"`).
    Share,
    /// Refusing every attempt: the shared store is lost (`on_store_loss = "refuse"`).
    Refuse,
}

impl LimitMode {
    /// Its name: `shared`, `local`, `share`, `refuse` (`ballast_limit_mode`'s `mode` label, `/status`).
    pub fn as_str(self) -> &'static str {
        crate::metrics::LIMIT_MODES[self as usize]
    }
}

/// One limit of a deployment: its key in the shared store, and its rate.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "idempotency"), allow(dead_code))]
struct Rate {
    key: String,
    per_minute: u32,
}

/// A deployment's account limits (module docs).
#[derive(Debug)]
#[cfg_attr(not(feature = "idempotency"), allow(dead_code))]
pub struct AccountLimits {
    target: Arc<str>,
    requests: Option<Rate>,
    tokens: Option<Rate>,
    burst: Duration,
    on_store_loss: OnStoreLoss,
    #[cfg(feature = "idempotency")]
    sharing: Option<Arc<crate::sharing::Sharing>>,
    /// The limits' TATs (µs since the clock's origin) as this process counts them when it counts them itself.
    local: Mutex<[f64; 2]>,
    /// The mode last reported (`u8::MAX`: none yet).
    mode: AtomicU8,
    /// The tokens a whole answer's body says the call used (the model protocols' reading of `usage`).
    usage: UsageReader,
}

/// Reads the tokens a whole answer used from its body, if it says.
pub(crate) type UsageReader = fn(&[u8]) -> Option<u64>;

/// What one attempt was charged: what a correction moves by.
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(not(feature = "idempotency"), allow(dead_code))]
pub(crate) struct Charged {
    tokens: f64,
    shared: bool,
}

impl AccountLimits {
    /// The limits of deployment `target` (named `account` in the store: its base URL, model and key name, the
    /// same on every instance), counted in `sharing` when given.
    pub(crate) fn new(
        target: Arc<str>,
        account: &str,
        limits: &Limits,
        usage: UsageReader,
        #[cfg(feature = "idempotency")] sharing: Option<Arc<crate::sharing::Sharing>>,
    ) -> Self {
        let rate = |kind: &str, per_minute: Option<u32>| {
            per_minute.map(|per_minute| Rate {
                key: format!("{kind}|{account}"),
                per_minute,
            })
        };
        AccountLimits {
            target,
            requests: rate("rpm", limits.requests_per_minute),
            tokens: rate("tpm", limits.tokens_per_minute),
            burst: limits.burst,
            on_store_loss: limits.on_store_loss,
            #[cfg(feature = "idempotency")]
            sharing,
            local: Mutex::new([0.0; 2]),
            mode: AtomicU8::new(u8::MAX),
            usage,
        }
    }

    /// The tokens a whole answer's `body` says the call used.
    pub(crate) fn used(&self, body: &[u8]) -> Option<u64> {
        (self.usage)(body)
    }

    /// Whether a token limit is set (the attempt's tokens are then estimated).
    pub(crate) fn counts_tokens(&self) -> bool {
        self.tokens.is_some()
    }

    /// Where the limits are counted now.
    pub fn mode(&self) -> LimitMode {
        #[cfg(feature = "idempotency")]
        if let Some(sharing) = &self.sharing {
            return match (sharing.is_reachable(), self.on_store_loss) {
                (true, _) => LimitMode::Shared,
                (false, OnStoreLoss::Share) => LimitMode::Share,
                (false, OnStoreLoss::Refuse) => LimitMode::Refuse,
            };
        }
        LimitMode::Local
    }

    /// The limits as configured: requests and tokens per minute.
    pub fn per_minute(&self) -> (Option<u32>, Option<u32>) {
        (
            self.requests.as_ref().map(|r| r.per_minute),
            self.tokens.as_ref().map(|r| r.per_minute),
        )
    }

    /// The instances whose share this one takes while the store is lost (1 without a shared store).
    pub fn instances(&self) -> u32 {
        #[cfg(feature = "idempotency")]
        if let Some(sharing) = &self.sharing {
            return sharing.instances();
        }
        1
    }

    /// Charges one attempt of `tokens` estimated tokens, under `deadline` and `cancel`: `Ok` once it may be sent
    /// (after waiting for its slot), or the attempt's refusal.
    pub(crate) async fn charge(
        &self,
        tokens: u64,
        deadline: &Deadline,
        cancel: &crate::Cancel,
    ) -> Result<Charged, Error> {
        let now = clock::now();
        // The longest wait that still leaves the deadline an attempt.
        let max_wait = deadline
            .attempt_timeout(Duration::MAX, now)
            .map_or(Duration::ZERO, |left| left.saturating_sub(deadline.min_attempt()));
        let (wait, charged) = self.reserve(tokens as f64, now, max_wait).await?;
        if !wait.is_zero() {
            crate::metrics::limited(&self.target, "waited");
            // The slot is `wait` from when the store decided: from now, not from before it was asked.
            let until = clock::now() + wait;
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    self.give_back(charged);
                    return Err(Error::Cancelled);
                }
                () = clock::sleep_until(until) => {}
            }
        }
        Ok(charged)
    }

    /// The reservation of `tokens` at `now` for a caller that may wait `max_wait`, where the mode says.
    async fn reserve(
        &self,
        tokens: f64,
        now: Instant,
        max_wait: Duration,
    ) -> Result<(Duration, Charged), Error> {
        #[cfg_attr(not(feature = "idempotency"), allow(unused_mut))]
        let mut mode = LimitMode::Local;
        // Asked while the store works (and, while it is lost, once a second, which is how a client without the
        // gateway's heartbeat finds it again: `Sharing::ask`).
        #[cfg(feature = "idempotency")]
        if let Some(sharing) = &self.sharing {
            let charges = self.charges(tokens, 1);
            match sharing
                .ask(
                    crate::sharing::PATIENCE,
                    sharing.state().reserve(&charges, max_wait),
                )
                .await
            {
                Some(ballast_store::Reservation::Granted(wait)) => {
                    self.report_mode(LimitMode::Shared);
                    return Ok((wait, Charged { tokens, shared: true }));
                }
                Some(ballast_store::Reservation::Refused(after)) => {
                    self.report_mode(LimitMode::Shared);
                    return Err(self.refused(Some(after)));
                }
                // Lost, or too slow this once: this attempt is decided as `on_store_loss` says — never asked
                // again (a reservation given up on may still land in the store).
                None => {
                    mode = match self.on_store_loss {
                        OnStoreLoss::Share => LimitMode::Share,
                        OnStoreLoss::Refuse => LimitMode::Refuse,
                    };
                    crate::metrics::limit_unshared(&self.target, mode.as_str());
                }
            }
        }
        self.report_mode(mode);
        if mode == LimitMode::Refuse {
            return Err(self.refused(None));
        }
        let share = if mode == LimitMode::Share {
            self.instances()
        } else {
            1
        };
        let at = micros(now);
        let mut tats = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        let charges: Vec<(Gcra, f64, f64)> = [(&self.requests, 1.0, 0), (&self.tokens, tokens, 1)]
            .into_iter()
            .filter_map(|(rate, cost, slot)| {
                rate.as_ref()
                    .map(|rate| (self.gcra(rate.per_minute, share), tats[slot], cost))
            })
            .collect();
        match reserve_all(&charges, at, max_wait.as_secs_f64() * 1e6) {
            Ok((wait, new)) => {
                let mut new = new.into_iter();
                for (rate, slot) in [(&self.requests, 0), (&self.tokens, 1)] {
                    if rate.is_some()
                        && let Some(tat) = new.next()
                    {
                        tats[slot] = tat;
                    }
                }
                Ok((
                    Duration::from_secs_f64(wait / 1e6),
                    Charged {
                        tokens,
                        shared: false,
                    },
                ))
            }
            Err(after) => Err(self.refused(Some(Duration::from_secs_f64(after / 1e6)))),
        }
    }

    /// Corrects the token limit of a `charged` attempt by what its answer says it `used`.
    pub(crate) fn correct(&self, charged: Charged, used: u64) {
        self.adjust(charged, 0.0, used as f64 - charged.tokens);
    }

    /// Gives back what a `charged` attempt took: it was refused below, or given up, before anything was sent.
    pub(crate) fn give_back(&self, charged: Charged) {
        self.adjust(charged, -1.0, -charged.tokens);
    }

    /// Moves the limits of a `charged` attempt by `requests` and `tokens` units — in the shared store in the
    /// background (a correction never holds an answer), else here.
    fn adjust(&self, charged: Charged, requests: f64, tokens: f64) {
        let moves = [(&self.requests, requests, 0), (&self.tokens, tokens, 1)];
        #[cfg(feature = "idempotency")]
        if charged.shared
            && let Some(sharing) = &self.sharing
        {
            let corrections: Vec<(ballast_store::Charge, f64)> = (moves.into_iter())
                .filter(|(_, delta, _)| delta.abs() >= 1.0)
                .filter_map(|(rate, delta, _)| {
                    rate.as_ref().map(|rate| {
                        let charge = ballast_store::Charge {
                            key: rate.key.clone(),
                            rate: self.gcra(rate.per_minute, 1),
                            cost: 0.0,
                        };
                        (charge, delta)
                    })
                })
                .collect();
            if corrections.is_empty() {
                return;
            }
            let sharing = Arc::clone(sharing);
            crate::background::spawn(async move {
                for (charge, delta) in corrections {
                    let correct = sharing.state().correct(&charge, delta);
                    let _ = sharing.ask(crate::sharing::PATIENCE, correct).await;
                }
            });
            return;
        }
        let share = if self.mode() == LimitMode::Share {
            self.instances()
        } else {
            1
        };
        let now = micros(clock::now());
        let mut tats = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        for (rate, delta, slot) in moves {
            if let Some(rate) = rate
                && delta.abs() >= 1.0
            {
                tats[slot] = self.gcra(rate.per_minute, share).correct(tats[slot], now, delta);
            }
        }
    }

    /// The charges of one attempt in the shared store.
    #[cfg(feature = "idempotency")]
    fn charges(&self, tokens: f64, share: u32) -> Vec<ballast_store::Charge> {
        [(&self.requests, 1.0), (&self.tokens, tokens)]
            .into_iter()
            .filter_map(|(rate, cost)| {
                rate.as_ref().map(|rate| ballast_store::Charge {
                    key: rate.key.clone(),
                    rate: self.gcra(rate.per_minute, share),
                    cost,
                })
            })
            .collect()
    }

    /// A rate's GCRA for `share` instances: its per-minute limit divided among them (a fraction kept: 2 a minute
    /// over 5 instances is one every 150 s each, not 1 a minute each).
    fn gcra(&self, per_minute: u32, share: u32) -> Gcra {
        let interval_us = 60e6 * f64::from(share.max(1)) / f64::from(per_minute.max(1));
        let whole = Gcra::per_minute(u64::from(per_minute), self.burst);
        Gcra::from_parts(interval_us, whole.tolerance_us())
    }

    fn refused(&self, retry_after: Option<Duration>) -> Error {
        crate::metrics::limited(&self.target, "refused");
        Error::Overloaded {
            reason: Overload::Limited,
            retry_after: retry_after.or(Some(Duration::from_secs(1))),
        }
    }

    fn report_mode(&self, mode: LimitMode) {
        let code = mode as u8;
        if self.mode.swap(code, Ordering::Relaxed) != code {
            crate::metrics::limit_mode(&self.target, mode.as_str());
        }
    }
}

/// `now` in microseconds since the clock's origin.
fn micros(now: Instant) -> f64 {
    now.elapsed_since_origin().as_secs_f64() * 1e6
}

/// The tokens one attempt of `body` is charged before it is sent: a quarter of its bytes (the prompt, roughly,
/// as providers' own pre-checks count it) plus the output it asks for at most.
pub(crate) fn estimate_tokens(body: &[u8]) -> u64 {
    #[derive(serde::Deserialize)]
    struct Asked {
        max_tokens: Option<u64>,
        max_output_tokens: Option<u64>,
        max_completion_tokens: Option<u64>,
    }
    let output = serde_json::from_slice::<Asked>(body).map_or(0, |asked| {
        (asked.max_tokens)
            .or(asked.max_output_tokens)
            .or(asked.max_completion_tokens)
            .unwrap_or(0)
    });
    (body.len() as u64).div_ceil(4) + output
}

#[cfg(test)]
mod tests;
