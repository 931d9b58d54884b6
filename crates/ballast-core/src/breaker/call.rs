//! What one attempt tells the breaker about the upstream's health.

/// One attempt's upstream outcome, as the breaker counts it (DESIGN.md, "Circuit breaker").
///
/// - [`Failure`](CallResult::Failure): a 5xx, a timeout, a transport error (connect refused, reset) — the
///   upstream is unwell or unreachable.
/// - [`Success`](CallResult::Success): a 2xx, and also a 4xx: a client's bad request says nothing about the
///   upstream's health (resilience4j's `ignoreExceptions`/`recordExceptions` split makes the same call).
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

    /// Whether the breaker counts this result at all.
    pub fn is_counted(self) -> bool {
        !matches!(self, CallResult::Ignored)
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
        assert!(CallResult::Success.is_counted() && CallResult::Failure.is_counted());
    }
}
