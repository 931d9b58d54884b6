//! The adaptive throttle: refuse locally, with a probability, what an overloaded upstream would refuse anyway.
//!
//! Why: overload answers (429, 529, 503 with `Retry-After`, a capacity refusal) mean "less, please", not
//! "broken". A breaker that counted them would trip on every crowd and jump from 0 to 100% refused; sending
//! everything anyway turns a crowd into a retry storm. Google's client-side throttling (*Site Reliability
//! Engineering*, "Handling Overload") degrades smoothly between the two (DESIGN.md, "Overload — adaptive
//! throttling").
//!
//! # The rule
//! Over a sliding `window`, per upstream: `requests` — every attempt the throttle was asked about and that
//! ended (answered, timed out, or refused here; not one an open breaker refused, not one cancelled) — and
//! `accepts` — attempts the upstream answered with anything but an overload refusal (a timeout is not an
//! accept). A new attempt is refused locally with probability
//!
//! ```text
//! max(0, (requests - K x accepts) / (requests + 1))      K = accept_multiplier, 2 by default
//! ```
//!
//! so nothing is refused until fewer than half the attempts are accepted, and an upstream that refuses
//! everything is refused locally almost always, as a breaker would. Local refusals count as requests, which
//! keeps the probability up while the upstream refuses; the window is short (seconds, not the book's two
//! minutes) so recovery is quick, and it restarts when the upstream's breaker closes after successful probes.
//!
//! An overload answer's `Retry-After` is honoured too ([`AdaptiveThrottle::hold`]): while the upstream is refusing
//! (the probability above 0, or five attempts in a row unaccepted over half a second), every attempt is refused until
//! the time the upstream named, and told so.
//!
//! Two differences from the book, both for crowds: attempts are counted when they *end*, not when asked — a burst
//! of 200 attempts asked at once, none answered yet, would otherwise read as 200 requests and no accepts and
//! refuse itself; and nothing is refused while the window holds fewer than `min_requests` requests — at a trickle,
//! one 429 would otherwise refuse half the next calls (1 request, 0 accepts: probability 1/2).

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rand::{Rng, RngExt as _};

use crate::cache_line::OwnCacheLine;
use crate::window::Window;
use crate::{DEFAULT_MAX_RETRY_AFTER, DefaultRng, Instant, default_rng};

/// Attempts in a row, by their ends, that the upstream did not accept, after which an overload answer's
/// `Retry-After` holds the upstream even though the probability is still 0 (see [`AdaptiveThrottle::hold`]).
pub(crate) const HOLD_AFTER_UNACCEPTED_IN_A_ROW: u32 = 5;

/// How long such a run must last, from its first end to the answer that holds: the refusals of one instant (a
/// burst meeting a full upstream) are not an upstream refusing everything — the breaker's
/// `consecutive_spread` for overload.
pub(crate) const HOLD_AFTER_UNACCEPTED_FOR: Duration = Duration::from_millis(500);

/// How one attempt the throttle let through ended, as the throttle counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThrottleOutcome {
    /// The upstream answered with anything but an overload refusal (a 2xx, a 4xx, a 500 too): a request and an
    /// accept.
    Accepted,
    /// The upstream refused for load (429, 529, 503 with `Retry-After`): a request, not an accept.
    Overloaded,
    /// No answer (a timeout, a transport error): a request, not an accept.
    Unanswered,
}

/// The throttle's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThrottleConfig {
    accept_multiplier: f64,
    window: Duration,
    window_buckets: u32,
    min_requests: u32,
}

/// A throttle setting that cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidThrottle {
    /// `K` under 1 would refuse attempts to a healthy upstream.
    #[error(
        "accept_multiplier: {0} is not at least 1 (K x accepts must cover a healthy upstream's requests)"
    )]
    AcceptMultiplier(f64),
    /// The window cannot be split into its buckets.
    #[error("window: {window:?} is too short for {buckets} buckets of at least 1 ms")]
    Window {
        /// The window.
        window: Duration,
        /// Its buckets.
        buckets: u32,
    },
    /// Buckets out of `1..=1000`.
    #[error("window_buckets: {0} is not in 1..=1000")]
    WindowBuckets(u32),
}

impl ThrottleConfig {
    /// Default `K`: the book's 2 — no throttling until fewer than half the attempts are accepted.
    pub const DEFAULT_ACCEPT_MULTIPLIER: f64 = 2.0;
    /// Default window: 2 s — an upstream that starts refusing everything is refused locally within about one
    /// and a half windows' worth of its accepts ageing out (once the requests outnumber twice the accepts still
    /// in it), and one that recovers is sent everything again a few windows after its first accepts (each window
    /// halves what the refusals add: `p' = 2p - 1`). Seconds, not the book's two minutes; long enough that ten
    /// requests come within it at a few calls a second.
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(2);
    /// Default buckets: 20 of 100 ms.
    pub const DEFAULT_WINDOW_BUCKETS: u32 = 20;
    /// Default least requests in the window before anything is refused: 10 — a trickle's random 429s refuse
    /// nothing (at 10 % of overload answers, six of ten come once in 7,000 windows), ten attempts refused with
    /// nothing accepted do.
    pub const DEFAULT_MIN_REQUESTS: u32 = 10;

    /// A validated configuration.
    pub fn new(
        accept_multiplier: f64,
        window: Duration,
        window_buckets: u32,
        min_requests: u32,
    ) -> Result<Self, InvalidThrottle> {
        if !(accept_multiplier >= 1.0 && accept_multiplier.is_finite()) {
            return Err(InvalidThrottle::AcceptMultiplier(accept_multiplier));
        }
        if !(1..=1000).contains(&window_buckets) {
            return Err(InvalidThrottle::WindowBuckets(window_buckets));
        }
        if window < Duration::from_millis(u64::from(window_buckets)) {
            return Err(InvalidThrottle::Window {
                window,
                buckets: window_buckets,
            });
        }
        Ok(ThrottleConfig {
            accept_multiplier,
            window,
            window_buckets,
            min_requests,
        })
    }

    /// `K`.
    pub fn accept_multiplier(&self) -> f64 {
        self.accept_multiplier
    }

    /// The sliding window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Its buckets.
    pub fn window_buckets(&self) -> u32 {
        self.window_buckets
    }

    /// The least requests in the window before anything is refused.
    pub fn min_requests(&self) -> u32 {
        self.min_requests
    }

    /// The refusal probability for `requests` and `accepts` in the window: `(requests - K x accepts) /
    /// (requests + 1)`, at least 0; 0 under `min_requests`.
    ///
    /// ```
    /// use ballast_core::ThrottleConfig;
    /// let config = ThrottleConfig::default();
    /// assert_eq!(config.probability(100, 80), 0.0); // 20% refused: nothing throttled
    /// assert_eq!(config.probability(100, 50), 0.0); // half accepted: still nothing
    /// assert!((config.probability(100, 25) - 50.0 / 101.0).abs() < 1e-12);
    /// assert!(config.probability(100, 0) > 0.99); // refuses everything: refused almost always
    /// assert_eq!(config.probability(9, 0), 0.0); // a trickle: too little to judge
    /// ```
    pub fn probability(&self, requests: u64, accepts: u64) -> f64 {
        if requests < u64::from(self.min_requests) {
            return 0.0;
        }
        let requests = requests as f64;
        ((requests - self.accept_multiplier * accepts as f64) / (requests + 1.0)).max(0.0)
    }
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig {
            accept_multiplier: Self::DEFAULT_ACCEPT_MULTIPLIER,
            window: Self::DEFAULT_WINDOW,
            window_buckets: Self::DEFAULT_WINDOW_BUCKETS,
            min_requests: Self::DEFAULT_MIN_REQUESTS,
        }
    }
}

/// An attempt refused locally by the throttle: nothing was sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throttled {
    /// The refusal probability it was drawn against (1 while the upstream's `Retry-After` holds).
    pub probability: f64,
    /// When the upstream said to come back, if it did and that time has not come: the refusal's `Retry-After`.
    pub retry_in: Option<Duration>,
}

impl fmt::Display for Throttled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "throttled: the upstream refused most recent attempts for load, so {:.0}% of attempts are refused \
             here before they are sent",
            self.probability * 100.0
        )
    }
}

/// What `/status` and the metrics show of a throttle.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct ThrottleSnapshot {
    /// Requests in the window (local refusals included).
    pub requests: u64,
    /// Accepts in the window.
    pub accepts: u64,
    /// The probability a new attempt is refused now.
    pub probability: f64,
    /// Attempts refused locally since the throttle was made.
    pub refused_total: u64,
}

#[derive(Debug)]
struct Inner<R> {
    /// Requests, and those not accepted ("marked").
    window: Window,
    refused_total: u64,
    /// The latest time an overload answer's `Retry-After` named (at most [`DEFAULT_MAX_RETRY_AFTER`] ahead).
    hold_until: Option<Instant>,
    /// When the current run of unaccepted attempts began (its first end), and when its latest one ended: a run
    /// with a gap longer than the window is over (an hour-old timeout says nothing about a 429 now).
    unaccepted_since: Instant,
    unaccepted_last: Instant,
    rng: R,
}

/// The adaptive throttle of one upstream, shared by every call to it.
///
/// ```
/// use ballast_core::{AdaptiveThrottle, Instant, ThrottleConfig, ThrottleOutcome};
/// use std::time::Duration;
///
/// let throttle = AdaptiveThrottle::seeded(ThrottleConfig::default(), Some(1));
/// let now = Instant::from_millis(0);
/// // A maintenance page: every attempt refused for load.
/// for _ in 0..50 {
///     throttle.record(ThrottleOutcome::Overloaded, now);
/// }
/// let refused = (0..100).filter(|_| throttle.try_admit(now).is_err()).count();
/// assert!(refused > 95, "{refused}");
/// // Two seconds later the window has forgotten it.
/// assert!(throttle.try_admit(now + Duration::from_secs(2)).is_ok());
/// ```
#[derive(Debug)]
pub struct AdaptiveThrottle<R = DefaultRng> {
    config: ThrottleConfig,
    /// Until when (nanoseconds of [`Instant`]) nothing is refused: a healthy upstream's attempts are admitted with
    /// one load, not the lock. Written under the lock by every step that records or folds (see `settle_calm`);
    /// read without it (a read a record has just made stale admits one attempt the new probability might have
    /// refused: a draw's worth).
    calm_until: OwnCacheLine<AtomicU64>,
    /// Accepts recorded without the lock and not yet in the window: every attempt to a healthy upstream ends in
    /// one, so it is counted with one `fetch_add` and folded into the window by the next locked step (which then
    /// settles `calm_until`: an accept that brings the window to `min_requests` can raise the probability from 0).
    /// They belong to bucket [`accepts_bucket`](Self::accepts_bucket).
    accepts: OwnCacheLine<AtomicU64>,
    /// The window bucket (`nanos / bucket_nanos`) the lock-free accepts belong to, or `u64::MAX` for none; written
    /// under the lock. An accept that read it just before a fold is counted a bucket late.
    accepts_bucket: AtomicU64,
    /// The window's bucket length.
    bucket_nanos: u64,
    /// Attempts in a row, by their ends, that were not accepted (reset by an accept, without the lock).
    unaccepted_in_a_row: AtomicU32,
    inner: Mutex<Inner<R>>,
}

impl AdaptiveThrottle<DefaultRng> {
    /// A throttle drawing from a [`DefaultRng`] seeded with `seed` (tests, reproducible runs) or from the
    /// operating system.
    pub fn seeded(config: ThrottleConfig, seed: Option<u64>) -> Self {
        AdaptiveThrottle::new(config, default_rng(seed))
    }
}

impl<R> AdaptiveThrottle<R> {
    /// A throttle with an empty window, drawing from `rng`.
    pub fn new(config: ThrottleConfig, rng: R) -> Self {
        let window = Window::new(config.window, config.window_buckets);
        AdaptiveThrottle {
            config,
            // An empty window refuses nothing until something is recorded.
            calm_until: OwnCacheLine(AtomicU64::new(u64::MAX)),
            accepts: OwnCacheLine(AtomicU64::new(0)),
            accepts_bucket: AtomicU64::new(u64::MAX),
            bucket_nanos: window.bucket_nanos(),
            unaccepted_in_a_row: AtomicU32::new(0),
            inner: Mutex::new(Inner {
                window,
                refused_total: 0,
                hold_until: None,
                unaccepted_since: Instant::ZERO,
                unaccepted_last: Instant::ZERO,
                rng,
            }),
        }
    }

    /// Its parameters.
    pub fn config(&self) -> &ThrottleConfig {
        &self.config
    }

    /// Runs `step` under the lock, on a window that holds every accept recorded so far.
    fn with_inner<T>(&self, step: impl FnOnce(&mut Inner<R>) -> T) -> T {
        // Counters only: a poisoned lock still guards usable numbers.
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        self.fold_accepts(&mut inner);
        step(&mut inner)
    }

    /// Moves the lock-free accepts into the window, in their bucket, and settles `calm_until` on the result
    /// (under the lock).
    fn fold_accepts(&self, inner: &mut Inner<R>) {
        if self.accepts.load(Ordering::Relaxed) == 0 {
            return;
        }
        let accepts = self.accepts.swap(0, Ordering::AcqRel);
        let bucket = self.accepts_bucket.load(Ordering::Relaxed);
        let at = Instant::from_nanos(bucket.saturating_mul(self.bucket_nanos));
        inner.window.record_many(at, accepts, 0);
        self.settle_calm(inner, at);
    }

    /// Sets [`calm_until`](Self::calm_until) from the window as of `now` (under the lock): with a probability of 0,
    /// calm until the newest bucket ends (accepts ageing out may raise it, and so may accepts counted without the
    /// lock that bring the window to `min_requests`: the first locked step after the bucket folds them); held or
    /// refusing, not calm.
    fn settle_calm(&self, inner: &Inner<R>, now: Instant) {
        let (requests, not_accepted) = inner.window.totals();
        let calm = if inner.hold_until.is_some_and(|until| now < until) {
            0
        } else if self.config.probability(requests, requests - not_accepted) == 0.0 {
            inner.window.newest_ends().as_nanos()
        } else {
            0
        };
        if self.calm_until.load(Ordering::Relaxed) != calm {
            self.calm_until.store(calm, Ordering::Relaxed);
        }
    }

    /// Counts one attempt it let through that ended at `now` with `outcome`.
    pub fn record(&self, outcome: ThrottleOutcome, now: Instant) {
        if outcome == ThrottleOutcome::Accepted && self.unaccepted_in_a_row.load(Ordering::Relaxed) != 0 {
            self.unaccepted_in_a_row.store(0, Ordering::Relaxed);
        }
        let bucket = now.as_nanos() / self.bucket_nanos;
        if outcome == ThrottleOutcome::Accepted && self.accepts_bucket.load(Ordering::Acquire) == bucket {
            self.accepts.fetch_add(1, Ordering::AcqRel);
            return;
        }
        self.with_inner(|inner| {
            inner.window.record(now, outcome != ThrottleOutcome::Accepted);
            if outcome != ThrottleOutcome::Accepted {
                let gap = now.saturating_duration_since(inner.unaccepted_last);
                if self.unaccepted_in_a_row.load(Ordering::Relaxed) == 0 || gap > self.config.window {
                    // A new run: the first, or the old one went quiet for longer than the window.
                    self.unaccepted_in_a_row.store(1, Ordering::Relaxed);
                    inner.unaccepted_since = now;
                } else {
                    self.unaccepted_in_a_row.fetch_add(1, Ordering::Relaxed);
                }
                inner.unaccepted_last = inner.unaccepted_last.max(now);
            }
            if outcome == ThrottleOutcome::Accepted {
                // The next accepts of this bucket are counted without the lock.
                self.accepts_bucket.store(bucket, Ordering::Release);
            }
            self.settle_calm(inner, now);
        });
    }

    /// An overload answer at `now` said `Retry-After: retry_after` (at most [`DEFAULT_MAX_RETRY_AFTER`], the
    /// longest wait the retry decision accepts, is kept): if the upstream is refusing — the throttle's probability
    /// above 0, or the last five attempts to end all unaccepted (refused for load or unanswered), over at least
    /// half a second and with no gap longer than the window — every attempt is refused until that time, and told
    /// when to come back: the upstream said when it will take requests again, so the attempts the probability
    /// would let through would only be refused there (or wait out the same time). The hold's refusals are not
    /// counted as requests: when it ends, the window holds what the upstream answered, and the first attempt
    /// after it finds out whether the upstream is back.
    ///
    /// Why the run of refusals as well: the probability rises only as the accepts from before an outage age out
    /// of the window (about half a window, and at a few calls a second `min_requests` take seconds to come),
    /// while an upstream that has left five attempts in a row unaccepted, over half a second, and says "come
    /// back later" has said so already; at a flash sale's 10 % of scattered overload answers, five in a row come once in
    /// 100,000 answers, and the refusals of one instant (a burst meeting a full upstream) do not last.
    pub fn hold(&self, retry_after: Duration, now: Instant) {
        let until = now + retry_after.min(DEFAULT_MAX_RETRY_AFTER);
        self.with_inner(|inner| {
            let in_a_row = self.unaccepted_in_a_row.load(Ordering::Relaxed) >= HOLD_AFTER_UNACCEPTED_IN_A_ROW
                && now.saturating_duration_since(inner.unaccepted_since) >= HOLD_AFTER_UNACCEPTED_FOR
                && now.saturating_duration_since(inner.unaccepted_last) <= self.config.window;
            // Only an upstream judged to be refusing most attempts is held: a lone 429 with `Retry-After` (a flash
            // sale's random one) holds nothing.
            inner.window.advance(now);
            let (requests, not_accepted) = inner.window.totals();
            if in_a_row || self.config.probability(requests, requests - not_accepted) > 0.0 {
                inner.hold_until = Some(inner.hold_until.map_or(until, |held| held.max(until)));
            }
            self.settle_calm(inner, now);
        });
    }

    /// Forgets the window and any hold (the upstream's breaker closed after successful probes: what came before
    /// says nothing about the recovered upstream).
    pub fn restart(&self) {
        self.with_inner(|inner| {
            inner.window.clear();
            inner.hold_until = None;
            self.calm_until.store(u64::MAX, Ordering::Relaxed);
            self.unaccepted_in_a_row.store(0, Ordering::Relaxed);
        });
        // An accept counted after the fold above, racing the restart, is the recovered upstream's: kept.
    }

    /// The counts and the refusal probability at `now`.
    pub fn snapshot(&self, now: Instant) -> ThrottleSnapshot {
        self.with_inner(|inner| {
            inner.window.advance(now);
            let (requests, not_accepted) = inner.window.totals();
            let accepts = requests - not_accepted;
            ThrottleSnapshot {
                requests,
                accepts,
                probability: self.config.probability(requests, accepts),
                refused_total: inner.refused_total,
            }
        })
    }
}

impl<R: Rng> AdaptiveThrottle<R> {
    /// Asks to send one attempt at `now`: `Ok` to send it (record how it ended), or refused here — a refusal
    /// counts as a request, not an accept.
    pub fn try_admit(&self, now: Instant) -> Result<(), Throttled> {
        if now.as_nanos() < self.calm_until.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.with_inner(|inner| {
            inner.window.advance(now);
            let (requests, not_accepted) = inner.window.totals();
            let held = inner.hold_until.filter(|until| now < *until);
            if let Some(until) = held {
                // The upstream's own word, not a draw: refused, and not counted as a request (when the time comes
                // the window holds what the upstream answered, not this wait).
                inner.refused_total += 1;
                return Err(Throttled {
                    probability: 1.0,
                    retry_in: Some(until.saturating_duration_since(now)),
                });
            }
            let probability = self.config.probability(requests, requests - not_accepted);
            let refused = probability > 0.0 && inner.rng.random::<f64>() < probability;
            if refused {
                inner.window.record(now, true);
                inner.refused_total += 1;
            }
            self.settle_calm(inner, now);
            if refused {
                Err(Throttled {
                    probability,
                    retry_in: None,
                })
            } else {
                Ok(())
            }
        })
    }
}
