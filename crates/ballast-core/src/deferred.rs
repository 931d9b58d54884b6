//! What a deferred operation's worker does next (DESIGN.md, "Deferred operations"): the policy, without I/O. The
//! worker in the `ballast` crate reads one attempt's answer into a [`Tried`] and acts on the [`Next`] this gives.
//!
//! The rules, in order:
//! - an attempt that may have acted (its answer lost) is never sent again unless the upstream deduplicates by
//!   the key — then the same key is re-sent, which is what deduplication is for;
//! - success and a final refusal by the upstream end the operation with that answer;
//! - an attempt refused before it acted (shed, throttled, breaker open, a 429 or 503) is tried again after the
//!   longer of the refusal's `Retry-After` and a jittered backoff — unless its attempts are spent (only attempts
//!   that reached the upstream count: an open breaker alone never uses them up) or its ttl ends first.

use std::time::Duration;

use rand::Rng;

use crate::Backoff;

/// One attempt's result, as the worker read the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tried {
    /// The upstream answered with success.
    Succeeded,
    /// The upstream refused it for good (a 4xx it produced): trying again cannot help.
    Rejected,
    /// Refused before anything acted.
    Refused {
        /// Whether the attempt reached the upstream (a 429 or 503 it answered) — else the gateway's own
        /// policy refused it before it left (shed, throttled, breaker open, no time).
        attempted: bool,
        /// When the refusal said to come back.
        retry_after: Option<Duration>,
    },
    /// It may have acted and nobody knows (sent, answer lost).
    Unknown,
}

/// What the worker does with the operation after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// End it `completed` with the answer.
    Complete,
    /// End it `failed` with the upstream's final answer, which the key replays.
    Reject,
    /// End it `failed`: its attempts are spent and none acted; the key is released.
    GiveUp,
    /// End it `expired`: its ttl ends before another attempt could; the key is released.
    Expire,
    /// End it `outcome_unknown`: never sent again.
    OutcomeUnknown,
    /// Queue it again, due `after` from now.
    Retry {
        /// The wait before the next attempt.
        after: Duration,
    },
}

/// What an operation's next step is after `tried`: `attempts` is the count before this attempt, `expires_in`
/// the time left of its ttl, `deduplicates` whether its upstream deduplicates by the key. `backoff` draws the
/// wait (the `attempts`-th retry's window), honouring `retry_after` when it is longer.
pub fn next<R: Rng + ?Sized>(
    tried: Tried,
    attempts: u32,
    max_attempts: u32,
    expires_in: Duration,
    deduplicates: bool,
    backoff: &Backoff,
    rng: &mut R,
) -> Next {
    let (attempted, retry_after) = match tried {
        Tried::Succeeded => return Next::Complete,
        Tried::Rejected => return Next::Reject,
        Tried::Unknown if !deduplicates => return Next::OutcomeUnknown,
        Tried::Unknown => (true, None),
        Tried::Refused {
            attempted,
            retry_after,
        } => (attempted, retry_after),
    };
    let made = attempts.saturating_add(u32::from(attempted));
    if made >= max_attempts {
        return Next::GiveUp;
    }
    let drawn = backoff.delay(made, Duration::ZERO, rng);
    let after = drawn.max(retry_after.unwrap_or_default());
    if after >= expires_in {
        return Next::Expire;
    }
    Next::Retry { after }
}

/// What a worker does with an operation it just took, before any attempt: end it if its ttl passed or its
/// last attempt was interrupted on an upstream that does not deduplicate (`None`: send an attempt).
pub fn on_take(
    interrupted: bool,
    expires_in: Duration,
    attempts: u32,
    max_attempts: u32,
    deduplicates: bool,
) -> Option<Next> {
    if interrupted && !deduplicates {
        return Some(Next::OutcomeUnknown);
    }
    if expires_in.is_zero() {
        return Some(Next::Expire);
    }
    (attempts >= max_attempts).then_some(Next::GiveUp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::default_rng;

    fn backoff() -> Backoff {
        Backoff::full_jitter(Duration::from_secs(1), Duration::from_secs(60)).unwrap()
    }

    fn after(tried: Tried, attempts: u32, max: u32, expires_in: Duration, dedup: bool) -> Next {
        next(
            tried,
            attempts,
            max,
            expires_in,
            dedup,
            &backoff(),
            &mut default_rng(Some(7)),
        )
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn answers_end_the_operation() {
        assert_eq!(after(Tried::Succeeded, 4, 5, HOUR, false), Next::Complete);
        assert_eq!(after(Tried::Rejected, 0, 5, HOUR, true), Next::Reject);
    }

    #[test]
    fn a_lost_answer_is_re_sent_only_where_the_upstream_deduplicates() {
        assert_eq!(after(Tried::Unknown, 0, 5, HOUR, false), Next::OutcomeUnknown);
        assert!(matches!(
            after(Tried::Unknown, 0, 5, HOUR, true),
            Next::Retry { .. }
        ));
        assert_eq!(after(Tried::Unknown, 4, 5, HOUR, true), Next::GiveUp);
        assert_eq!(on_take(true, HOUR, 1, 5, false), Some(Next::OutcomeUnknown));
        assert_eq!(on_take(true, HOUR, 1, 5, true), None);
    }

    #[test]
    fn only_attempts_that_reached_the_upstream_use_up_the_budget() {
        let refused = |attempted| Tried::Refused {
            attempted,
            retry_after: None,
        };
        assert_eq!(after(refused(true), 4, 5, HOUR, false), Next::GiveUp);
        assert!(matches!(
            after(refused(false), 4, 5, HOUR, false),
            Next::Retry { .. }
        ));
        assert_eq!(on_take(false, HOUR, 5, 5, false), Some(Next::GiveUp));
    }

    #[test]
    fn waits_honour_retry_after_and_never_outlive_the_ttl() {
        let refused = Tried::Refused {
            attempted: false,
            retry_after: Some(Duration::from_secs(90)),
        };
        assert_eq!(
            after(refused, 0, 5, HOUR, false),
            Next::Retry {
                after: Duration::from_secs(90)
            }
        );
        assert_eq!(after(refused, 0, 5, Duration::from_secs(60), false), Next::Expire);
        assert_eq!(on_take(false, Duration::ZERO, 0, 5, false), Some(Next::Expire));
        for attempts in 0..4 {
            let Next::Retry { after: wait } = after(
                Tried::Refused {
                    attempted: true,
                    retry_after: None,
                },
                attempts,
                50,
                HOUR,
                false,
            ) else {
                panic!("a retry");
            };
            assert!(wait <= backoff().max_delay(attempts + 1));
        }
    }
}
