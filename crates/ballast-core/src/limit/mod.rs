//! Account limits (requests and tokens per minute), as a provider counts them: GCRA, the generic cell rate
//! algorithm, with reservations.
//!
//! Why GCRA and not a token bucket or a window: a limit shared by many gateway instances must be decided in one
//! atomic step where the state lives (a Redis script, one PostgreSQL statement), on that store's clock. GCRA keeps
//! **one number per limit** — the theoretical arrival time (TAT): when the limit would be idle again if nothing
//! more were sent — so that step reads one value and writes one value, with no refill timer and no window edges
//! (a fixed window lets twice the limit through across its boundary; a sliding log keeps every request). A token
//! bucket is the same algorithm written with two numbers (tokens and the last refill); GCRA is its one-number
//! form, and a weighted cost (a call's tokens) is just a longer step of the TAT.
//!
//! - A limit of `R` units per minute spaces units `T = 60 s / R` apart (the emission interval), with a
//!   tolerance `tau` (a burst: about `tau / T + 1` units may go at once after a quiet spell). The default
//!   tolerance is one second: providers enforce a per-minute limit over shorter spans (OpenAI: "60,000 requests
//!   per minute may be enforced as 1,000 requests per second"), so a burst of a whole minute's worth would earn
//!   the 429 the limit exists to avoid.
//! - A charge of `c` units at `now` may be sent at `max(now, TAT - tau)`: at once when the limit has room, later
//!   otherwise. A caller that can wait that long ([`Gcra::reserve`]'s `max_wait`, what its deadline allows) books
//!   the slot — the TAT moves to `max(TAT, send) + c T` — and sleeps until it; one that cannot is told when it
//!   could ([`Grant::Refused`]) and nothing is booked. A charge larger than the tolerance is admitted when the
//!   limit is idle and pushes the TAT ahead (the debt is paid by the calls after it), so a large request is
//!   never refused forever.
//! - Several limits (requests and tokens) are charged together or not at all ([`reserve_all`]): the send time is
//!   the latest any of them needs.
//! - A token charge is an estimate made before the call; [`Gcra::correct`] moves the TAT by the difference once
//!   the answer says what was used (a refund never moves it into the past).
//!
//! Times are microseconds as `f64` on the deciding clock (a Redis script's `TIME`, PostgreSQL's
//! `clock_timestamp()`): exact for integers below 2^53 µs (285 years of Unix time), the same arithmetic in Rust,
//! Lua and SQL.

use std::time::Duration;

/// A limit of some units per minute: its emission interval and tolerance, in microseconds (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gcra {
    interval_us: f64,
    tolerance_us: f64,
}

/// What [`Gcra::reserve`] decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Grant {
    /// Booked: send after `wait_us` (0: at once); the limit's TAT is now `tat`.
    Granted {
        /// How long to wait before sending, in microseconds.
        wait_us: f64,
        /// The limit's new TAT.
        tat: f64,
    },
    /// Not booked: the charge could go `retry_after_us` from now, longer than the caller may wait.
    Refused {
        /// When the charge could go, from now, in microseconds.
        retry_after_us: f64,
    },
}

/// The default tolerance of a limit: one second's worth of it may go at once (module docs).
pub const DEFAULT_LIMIT_BURST: Duration = Duration::from_secs(1);

impl Gcra {
    /// A limit of `per_minute` units per minute (at least 1) whose bursts may reach `burst`'s worth of it.
    pub fn per_minute(per_minute: u64, burst: Duration) -> Gcra {
        let interval_us = 60e6 / per_minute.max(1) as f64;
        Gcra {
            interval_us,
            tolerance_us: burst.as_secs_f64() * 1e6,
        }
    }

    /// A limit from its raw parts (as a store reads them back): `interval_us` per unit (positive), `tolerance_us`
    /// (at least 0).
    pub fn from_parts(interval_us: f64, tolerance_us: f64) -> Gcra {
        Gcra {
            interval_us: if interval_us > 0.0 { interval_us } else { 1.0 },
            tolerance_us: tolerance_us.max(0.0),
        }
    }

    /// Microseconds between two units.
    pub fn interval_us(&self) -> f64 {
        self.interval_us
    }

    /// How far ahead of now the TAT may be while a charge still goes at once, in microseconds.
    pub fn tolerance_us(&self) -> f64 {
        self.tolerance_us
    }

    /// When a charge may go, from `now`, given the limit's `tat`: 0 when it has room.
    pub fn wait_us(&self, tat: f64, now: f64) -> f64 {
        (tat - self.tolerance_us - now).max(0.0)
    }

    /// Reserves `cost` units at `now` for a caller that may wait at most `max_wait_us` (module docs).
    pub fn reserve(&self, tat: f64, now: f64, cost: f64, max_wait_us: f64) -> Grant {
        match reserve_all(&[(*self, tat, cost)], now, max_wait_us) {
            Ok((wait_us, tats)) => Grant::Granted {
                wait_us,
                tat: tats[0],
            },
            Err(retry_after_us) => Grant::Refused { retry_after_us },
        }
    }

    /// The TAT after a charge turned out `delta` units larger (negative: smaller) than it was booked for, at
    /// `now`: a refund never moves the TAT before `now` (the time already passed is not given back), nor before
    /// where it was when that was already past.
    pub fn correct(&self, tat: f64, now: f64, delta: f64) -> f64 {
        let moved = tat + delta * self.interval_us;
        if delta < 0.0 {
            moved.max(tat.min(now))
        } else {
            moved
        }
    }
}

/// Reserves every `(limit, tat, cost)` together at `now`, or none: `Ok((wait, new TATs))` when the latest send
/// time any of them needs is within `max_wait_us`, else `Err(that wait)`.
pub fn reserve_all(charges: &[(Gcra, f64, f64)], now: f64, max_wait_us: f64) -> Result<(f64, Vec<f64>), f64> {
    let wait = charges
        .iter()
        .map(|(limit, tat, _)| limit.wait_us(*tat, now))
        .fold(0.0, f64::max);
    if wait > max_wait_us.max(0.0) {
        return Err(wait);
    }
    let send = now + wait;
    let tats = charges
        .iter()
        .map(|(limit, tat, cost)| tat.max(send) + cost.max(0.0) * limit.interval_us)
        .collect();
    Ok((wait, tats))
}

#[cfg(test)]
mod tests;
