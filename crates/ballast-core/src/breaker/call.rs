//! What one attempt tells the breaker about the upstream's health.

/// One attempt's upstream outcome, as the breaker counts it (DESIGN.md, "Circuit breaker").
///
/// - [`Failure`](CallResult::Failure): a 5xx, a timeout, a transport error (connect refused, reset) — the
///   upstream is unwell or unreachable.
/// - [`Success`](CallResult::Success): a 2xx, and also a 4xx: a client's bad request says nothing about the
///   upstream's health (resilience4j's `ignoreExceptions`/`recordExceptions` split makes the same call).
/// - [`Overloaded`](CallResult::Overloaded): the upstream refused for load — a 429, a 529, a 503 with
///   `Retry-After`, a capacity refusal. It says "less, please", not "broken": the breaker does not count it (the
///   adaptive throttle does), so a crowd that fills an upstream never opens its breaker.
/// - [`Ignored`](CallResult::Ignored): cancellations (the client went away or the deadline fired on our side
///   before an answer), replays served from the idempotency store, gateway-local rejections. Nothing reached
///   or came back from the upstream, so nothing is learnt. A half-open probe recorded as ignored frees its slot
///   without counting, exactly like a dropped permit.
///
/// A success slower than the configured `slow_call` counts as a failure; that is decided by the breaker from
/// the latency passed with the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallResult {
    /// The upstream answered and is healthy (2xx, 3xx, 4xx).
    Success,
    /// The upstream failed (5xx, timeout, transport error).
    Failure,
    /// The upstream refused for load (429, 529, 503 with `Retry-After`): not a health signal, not counted.
    Overloaded,
    /// Not counted: cancelled, replayed or rejected before reaching the upstream.
    Ignored,
}

impl CallResult {
    /// The result for an HTTP status the upstream answered with: 5xx is a failure, 1xx-4xx a success.
    ///
    /// A status outside `100..=599` cannot come from a healthy HTTP server, so it is a failure.
    ///
    /// ```
    /// use ballast_core::CallResult;
    /// assert_eq!(CallResult::from_status(200), CallResult::Success);
    /// assert_eq!(CallResult::from_status(429), CallResult::Success); // the retry policy handles 429
    /// assert_eq!(CallResult::from_status(503), CallResult::Failure);
    /// ```
    pub fn from_status(status: u16) -> Self {
        match status {
            100..=499 => CallResult::Success,
            _ => CallResult::Failure,
        }
    }

    /// The result for an answer with `status`, which carried a `Retry-After` (or `retry-after-ms`) or not: an
    /// overload refusal — 429, 529 (Anthropic's "overloaded"), 503 with `Retry-After` (a capacity refusal, a
    /// maintenance page) — is [`Overloaded`](CallResult::Overloaded); anything else as [`from_status`](Self::from_status).
    /// A 503 without `Retry-After` is a failure: that is how many dead upstreams answer.
    ///
    /// ```
    /// use ballast_core::CallResult;
    /// assert_eq!(CallResult::from_answer(429, false), CallResult::Overloaded);
    /// assert_eq!(CallResult::from_answer(503, true), CallResult::Overloaded);
    /// assert_eq!(CallResult::from_answer(503, false), CallResult::Failure);
    /// assert_eq!(CallResult::from_answer(500, true), CallResult::Failure);
    /// ```
    pub fn from_answer(status: u16, retry_after: bool) -> Self {
        match status {
            429 | 529 => CallResult::Overloaded,
            503 if retry_after => CallResult::Overloaded,
            _ => CallResult::from_status(status),
        }
    }

    /// Whether the breaker counts this result at all.
    pub fn is_counted(self) -> bool {
        matches!(self, CallResult::Success | CallResult::Failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_as_the_design_says() {
        for s in [200, 201, 204, 301, 400, 401, 404, 409, 422, 429, 499] {
            assert_eq!(CallResult::from_status(s), CallResult::Success, "{s}");
        }
        for s in [500, 502, 503, 504, 599, 0, 99, 600, 999] {
            assert_eq!(CallResult::from_status(s), CallResult::Failure, "{s}");
        }
        assert!(!CallResult::Ignored.is_counted());
        assert!(!CallResult::Overloaded.is_counted());
        for (status, retry_after) in [(429, false), (429, true), (529, false), (503, true)] {
            assert_eq!(
                CallResult::from_answer(status, retry_after),
                CallResult::Overloaded,
                "{status}"
            );
        }
        for (status, result) in [
            (503, CallResult::Failure),
            (500, CallResult::Failure),
            (200, CallResult::Success),
        ] {
            assert_eq!(CallResult::from_answer(status, false), result, "{status}");
        }
        assert!(CallResult::Success.is_counted() && CallResult::Failure.is_counted());
    }
}
