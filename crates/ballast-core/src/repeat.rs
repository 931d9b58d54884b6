//! Repeats of a final failure: retries at one layer even for a client that retries on status alone
//! (DESIGN.md, "Retries").
//!
//! Every error answer says `x-should-retry`, and the OpenAI SDKs obey it; the Vercel AI SDK and many hand-written
//! loops do not, and retry every 5xx (and 408, 409, 429) whatever the header says — each retry a full round of
//! upstream attempts on top of the gateway's own. [`RecentFailures`] keeps the gateway's final failures (an
//! answer that says `x-should-retry: false`, with a status such a client retries: [`is_final_failure`]) for a
//! short window, by the request's [`RepeatKey`]; a request with the same key inside it is answered from the
//! failure, nothing sent.
//!
//! The rule, chosen so that a new request is never taken for a retry:
//! - **The same request**: the key covers the principal, the method and path, the run, step and call ordinal, the
//!   `Idempotency-Key`, the deadline headers and the body, byte for byte ([`RepeatKey::of`]). An agent's next
//!   request differs in its body (the conversation grew) or its run; a caller that sends a longer deadline, a new
//!   key or a new step is asking something new.
//! - **Within the window** (default 10 s): the AI SDK retries after 2 s and 4 s, the OpenAI SDKs within
//!   0.5-8 s, a hand-written loop of 1, 2 and 4 s inside 7 s. The window counts from the failure, not from its
//!   last repeat, so a client that keeps retrying reaches the upstream again once it has passed — in case it
//!   recovered. A failure that said `Retry-After` is kept exactly that long instead: a client that waits as told
//!   is served, one that comes back early gets the failure again (never sooner than the server asked).
//! - **The exact signal wins**: a request that says `x-stainless-retry-count: 0` is an SDK's first try — a new
//!   request, always served ([`Repeat::FirstTry`]).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::Instant;

/// Domain separation: a repeat key is never the hash of something else.
const DOMAIN: &[u8] = b"ballast.repeat.v1";

/// What identifies a request among its repeats: SHA-256 over its parts ([`RepeatKey::of`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepeatKey([u8; 32]);

impl RepeatKey {
    /// The key of a request made of `parts` (the principal, method, path, headers that matter and body, in an
    /// order the caller keeps fixed). Each part is framed by its length, so no two different lists of parts share
    /// a key: `["ab", ""]` and `["a", "b"]` differ.
    pub fn of<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> RepeatKey {
        let mut hasher = Sha256::new();
        hasher.update(DOMAIN);
        for part in parts {
            hasher.update((part.len() as u64).to_be_bytes());
            hasher.update(part);
        }
        RepeatKey(hasher.finalize().into())
    }
}

impl std::fmt::Debug for RepeatKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c, d, ..] = self.0;
        write!(f, "RepeatKey({a:02x}{b:02x}{c:02x}{d:02x}…)")
    }
}

/// Whether an answer is a final failure whose repeats are answered from it: one that says `x-should-retry:
/// false` (the gateway spent its retries, the deadline passed, the breaker is open — a retry cannot help), with a
/// status a client that ignores the header would retry anyway (408, 409, 429, 5xx). An answer that invites a
/// retry (a shed, a throttle, a key in progress) is never kept: its retry is served in full.
pub fn is_final_failure(status: u16, should_retry: Option<bool>) -> bool {
    should_retry == Some(false) && (matches!(status, 408 | 409 | 429) || (500..600).contains(&status))
}

/// What a request says about being a retry: `x-stainless-retry-count` where the client sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeat {
    /// `x-stainless-retry-count: 0`: an SDK's first try, never a repeat.
    FirstTry,
    /// `x-stainless-retry-count` above 0: an SDK's own retry.
    SdkRetry,
    /// No such header: a repeat if it matches a failure kept.
    Unsaid,
}

impl Repeat {
    /// From the request's `x-stainless-retry-count`, if it sent one.
    pub fn from_retry_count(count: Option<u32>) -> Repeat {
        match count {
            Some(0) => Repeat::FirstTry,
            Some(_) => Repeat::SdkRetry,
            None => Repeat::Unsaid,
        }
    }
}

/// A failure kept, and until when.
#[derive(Debug)]
struct Kept<A> {
    answer: A,
    until: Instant,
    cost: usize,
    /// Which [`RecentFailures::order`] entry is this one's (a key kept again has a newer one).
    generation: u64,
}

/// The final failures answered in the last window, by key, within a cost bound (module docs).
///
/// Pure: every method takes `now`. The oldest failures are forgotten first when the bound is reached — their
/// repeats are then served in full, as without this.
#[derive(Debug)]
pub struct RecentFailures<A> {
    window: Duration,
    max_cost: usize,
    cost: usize,
    next_generation: u64,
    kept: HashMap<RepeatKey, Kept<A>>,
    /// Keys in the order they were kept, oldest first, with their generation.
    order: VecDeque<(RepeatKey, u64)>,
}

impl<A: Clone> RecentFailures<A> {
    /// Failures kept for `window` (zero: none is), at most `max_cost` of them in all (each costs what
    /// [`remember`](Self::remember) is told).
    pub fn new(window: Duration, max_cost: usize) -> Self {
        RecentFailures {
            window,
            max_cost,
            cost: 0,
            next_generation: 0,
            kept: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Whether any failure is kept at `now` (forgetting the oldest ones that have expired): when none is, a
    /// request need not compute its key to know it repeats nothing.
    pub fn any(&mut self, now: Instant) -> bool {
        self.forget_expired(now);
        !self.kept.is_empty()
    }

    /// Keeps `answer`, the final failure of the request `key`, answered at `now`: for the window, or for `wait`
    /// when the answer said `Retry-After` (module docs). `cost` counts against the bound; an answer that alone
    /// exceeds it is not kept. A key kept before is replaced: the window starts again from this failure.
    pub fn remember(&mut self, key: RepeatKey, answer: A, cost: usize, wait: Option<Duration>, now: Instant) {
        let life = wait.unwrap_or(self.window);
        if self.window.is_zero() || life.is_zero() || cost > self.max_cost {
            return;
        }
        self.forget(&key);
        self.forget_expired(now);
        while self.cost + cost > self.max_cost {
            if !self.forget_oldest() {
                break;
            }
        }
        let generation = self.next_generation;
        self.next_generation += 1;
        self.cost += cost;
        self.order.push_back((key, generation));
        let until = now + life;
        self.kept.insert(
            key,
            Kept {
                answer,
                until,
                cost,
                generation,
            },
        );
    }

    /// The failure a request `key` repeats, with how much longer it is kept, if it is one at `now`: a failure of
    /// the same key kept and not expired, and a request that is not an SDK's first try ([`Repeat::FirstTry`]).
    pub fn repeat_of(&mut self, key: &RepeatKey, repeat: Repeat, now: Instant) -> Option<(A, Duration)> {
        if repeat == Repeat::FirstTry {
            return None;
        }
        let kept = self.kept.get(key)?;
        if now >= kept.until {
            self.forget(key);
            return None;
        }
        Some((kept.answer.clone(), kept.until.saturating_duration_since(now)))
    }

    /// Failures kept now (expired ones not yet forgotten included).
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    fn forget(&mut self, key: &RepeatKey) {
        if let Some(kept) = self.kept.remove(key) {
            self.cost -= kept.cost;
        }
    }

    /// Forgets the oldest entry of `order` (stale ones skipped); false when none is left.
    fn forget_oldest(&mut self) -> bool {
        while let Some((key, generation)) = self.order.pop_front() {
            if self.kept.get(&key).is_some_and(|k| k.generation == generation) {
                self.forget(&key);
                return true;
            }
        }
        false
    }

    /// Forgets, oldest first, the kept failures that expired by `now`, up to the first that has not (a longer
    /// `Retry-After` may keep a younger one behind it a little longer: the cost bound still holds).
    fn forget_expired(&mut self, now: Instant) {
        while let Some((key, generation)) = self.order.front().copied() {
            match self.kept.get(&key) {
                Some(kept) if kept.generation == generation => {
                    if now < kept.until {
                        return;
                    }
                    self.forget(&key);
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(10);

    fn key(body: &str) -> RepeatKey {
        RepeatKey::of([
            b"alice".as_slice(),
            b"POST",
            b"/v1/chat/completions",
            body.as_bytes(),
        ])
    }

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn keys_frame_their_parts() {
        assert_ne!(
            RepeatKey::of([b"ab".as_slice(), b""]),
            RepeatKey::of([b"a".as_slice(), b"b"])
        );
        assert_eq!(key("{}"), key("{}"));
        assert_ne!(key("{}"), key("{ }"));
    }

    #[test]
    fn final_failures_are_the_statuses_a_status_only_client_retries_with_no_retry_invited() {
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(is_final_failure(status, Some(false)), "{status}");
            assert!(
                !is_final_failure(status, Some(true)),
                "{status}: a retry invited is served"
            );
            assert!(!is_final_failure(status, None), "{status}: unsaid");
        }
        for status in [200, 400, 401, 404, 422] {
            assert!(!is_final_failure(status, Some(false)), "{status}");
        }
    }

    #[test]
    fn a_repeat_inside_the_window_is_answered_from_the_failure_and_a_later_one_is_not() {
        let mut failures = RecentFailures::new(WINDOW, 1 << 20);
        assert!(!failures.any(at(0)));
        failures.remember(key("a"), "502", 10, None, at(0));
        assert!(failures.any(at(1)));
        // The AI SDK's two retries: 2 s after the failure, then 4 s after the first one's answer.
        assert_eq!(
            failures.repeat_of(&key("a"), Repeat::Unsaid, at(2_000)),
            Some(("502", Duration::from_secs(8)))
        );
        assert!(
            failures
                .repeat_of(&key("a"), Repeat::SdkRetry, at(6_000))
                .is_some()
        );
        // A different request in the same window is not a repeat.
        assert_eq!(failures.repeat_of(&key("b"), Repeat::Unsaid, at(2_000)), None);
        // The window counts from the failure, not from its repeats: past it, the request is served again.
        assert_eq!(failures.repeat_of(&key("a"), Repeat::Unsaid, at(10_000)), None);
        assert!(failures.is_empty());
    }

    #[test]
    fn an_sdks_first_try_is_never_a_repeat() {
        let mut failures = RecentFailures::new(WINDOW, 1 << 20);
        failures.remember(key("a"), "502", 10, None, at(0));
        assert_eq!(failures.repeat_of(&key("a"), Repeat::FirstTry, at(1)), None);
        assert!(failures.repeat_of(&key("a"), Repeat::Unsaid, at(1)).is_some());
    }

    #[test]
    fn a_failure_that_said_retry_after_is_kept_exactly_that_long() {
        let mut failures = RecentFailures::new(WINDOW, 1 << 20);
        failures.remember(key("a"), "429", 10, Some(Duration::from_secs(3)), at(0));
        assert_eq!(
            failures.repeat_of(&key("a"), Repeat::Unsaid, at(1_000)),
            Some(("429", Duration::from_secs(2)))
        );
        assert_eq!(failures.repeat_of(&key("a"), Repeat::Unsaid, at(3_000)), None);
        failures.remember(key("b"), "503", 10, Some(Duration::from_secs(30)), at(0));
        assert!(
            failures
                .repeat_of(&key("b"), Repeat::Unsaid, at(20_000))
                .is_some()
        );
    }

    #[test]
    fn a_zero_window_keeps_nothing() {
        let mut failures = RecentFailures::new(Duration::ZERO, 1 << 20);
        failures.remember(key("a"), "502", 10, None, at(0));
        failures.remember(key("b"), "429", 10, Some(Duration::from_secs(3)), at(0));
        assert!(failures.is_empty());
    }

    #[test]
    fn a_failure_kept_again_starts_its_window_again() {
        let mut failures = RecentFailures::new(WINDOW, 1 << 20);
        failures.remember(key("a"), "first", 10, None, at(0));
        failures.remember(key("a"), "second", 10, None, at(9_000));
        assert_eq!(failures.len(), 1);
        assert_eq!(
            failures.repeat_of(&key("a"), Repeat::Unsaid, at(12_000)),
            Some(("second", Duration::from_secs(7)))
        );
        // The first one's place in the order is stale: forgetting by age skips it.
        assert!(failures.any(at(12_000)));
    }

    #[test]
    fn the_cost_bound_forgets_the_oldest_first() {
        let mut failures = RecentFailures::new(WINDOW, 30);
        for (i, body) in ["a", "b", "c", "d"].into_iter().enumerate() {
            failures.remember(key(body), body, 10, None, at(i as u64));
        }
        assert_eq!(failures.len(), 3);
        assert_eq!(failures.repeat_of(&key("a"), Repeat::Unsaid, at(5)), None);
        for body in ["b", "c", "d"] {
            assert!(
                failures.repeat_of(&key(body), Repeat::Unsaid, at(5)).is_some(),
                "{body}"
            );
        }
        // Too big alone: not kept, nothing else forgotten for it.
        failures.remember(key("e"), "e", 31, None, at(6));
        assert_eq!(failures.len(), 3);
    }

    #[test]
    fn expired_failures_are_forgotten_as_time_passes() {
        let mut failures = RecentFailures::new(WINDOW, 1 << 20);
        for i in 0..100 {
            failures.remember(key(&i.to_string()), i, 10, None, at(i));
        }
        assert!(failures.any(at(10_050)));
        assert_eq!(failures.len(), 49);
        assert!(!failures.any(at(10_100)));
    }
}
