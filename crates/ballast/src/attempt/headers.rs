//! The headers every attempt carries: its own timeout, its number and the hop count (DESIGN.md, "Deadline").

use std::time::Duration;

use ballast_core::{TraceContext, format_timeout_ms};

use crate::headers::{
    BALLAST_ATTEMPT, BALLAST_HOP, BALLAST_TIMEOUT_MS, ENVOY_EXPECTED_RQ_TIMEOUT_MS, TRACEPARENT,
};
use http::{HeaderMap, HeaderValue};

/// The per-try timeout and its header value, formatted once: most attempts get exactly `per_try` (the deadline
/// leaves more), and a cloned value is a reference count where a formatted one is two allocations.
#[derive(Clone, Debug)]
pub(super) struct PerTry {
    pub(super) timeout: Duration,
    value: HeaderValue,
}

impl PerTry {
    pub(super) fn new(timeout: Duration) -> Self {
        PerTry {
            timeout,
            value: timeout_value(timeout),
        }
    }

    /// The header value of an attempt's `timeout`: the one formatted once when it is `per_try`.
    fn value_for(&self, timeout: Duration) -> HeaderValue {
        if timeout == self.timeout {
            self.value.clone()
        } else {
            timeout_value(timeout)
        }
    }
}

/// `timeout` as `ballast-timeout-ms` writes it.
fn timeout_value(timeout: Duration) -> HeaderValue {
    HeaderValue::try_from(format_timeout_ms(timeout))
        .unwrap_or_else(|_digits_are_always_valid| HeaderValue::from_static("0"))
}

/// The values of the numbers an attempt almost always carries (attempt numbers and hops are small): static,
/// so a header costs no allocation.
static SMALL_NUMBERS: [HeaderValue; 10] = [
    HeaderValue::from_static("0"),
    HeaderValue::from_static("1"),
    HeaderValue::from_static("2"),
    HeaderValue::from_static("3"),
    HeaderValue::from_static("4"),
    HeaderValue::from_static("5"),
    HeaderValue::from_static("6"),
    HeaderValue::from_static("7"),
    HeaderValue::from_static("8"),
    HeaderValue::from_static("9"),
];

/// `number` as a header value.
fn number_value(number: u32) -> HeaderValue {
    usize::try_from(number)
        .ok()
        .and_then(|n| SMALL_NUMBERS.get(n).cloned())
        .unwrap_or_else(|| HeaderValue::from(number))
}

/// Sets (replacing any value already there) `ballast-timeout-ms` and `x-envoy-expected-rq-timeout-ms` to the
/// attempt's `timeout`, `ballast-attempt` to its `number` and `ballast-hop` to `hop + 1`; with a `trace`,
/// `traceparent` with a parent id of the attempt's own, which it returns (the attempt's span id in a trace).
///
/// The timeout travels as a duration, never a timestamp (clock skew), and it is **this attempt's**: the upstream
/// can stop working on a request its caller has already given up on.
pub(super) fn set_attempt_headers(
    headers: &mut HeaderMap,
    per_try: &PerTry,
    timeout: Duration,
    number: u32,
    hop: u32,
    trace: Option<TraceContext>,
) -> Option<u64> {
    let timeout = per_try.value_for(timeout);
    headers.reserve(5);
    headers.insert(BALLAST_TIMEOUT_MS, timeout.clone());
    headers.insert(ENVOY_EXPECTED_RQ_TIMEOUT_MS, timeout);
    headers.insert(BALLAST_ATTEMPT, number_value(number));
    headers.insert(BALLAST_HOP, number_value(hop.saturating_add(1)));
    // Each attempt is the parent of what the upstream does with it.
    let trace = trace?;
    let child = trace.child(crate::trace::span_id());
    let value = HeaderValue::from_bytes(&child.header_bytes()).ok()?;
    headers.insert(TRACEPARENT, value);
    Some(child.parent_id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headers_replace_what_the_request_carried() {
        let mut headers = HeaderMap::new();
        headers.insert(BALLAST_TIMEOUT_MS, HeaderValue::from_static("99999"));
        headers.append(BALLAST_HOP, HeaderValue::from_static("7"));
        headers.append(BALLAST_HOP, HeaderValue::from_static("8"));
        let per_try = PerTry::new(Duration::from_secs(2));
        set_attempt_headers(
            &mut headers,
            &per_try,
            Duration::from_micros(1_200_700),
            2,
            3,
            None,
        );
        assert_eq!(headers[BALLAST_TIMEOUT_MS], "1200");
        assert_eq!(headers[ENVOY_EXPECTED_RQ_TIMEOUT_MS], "1200");
        assert_eq!(headers[BALLAST_ATTEMPT], "2");
        assert_eq!(headers.get_all(BALLAST_HOP).iter().collect::<Vec<_>>(), ["4"]);
        assert_eq!(headers.get_all(BALLAST_TIMEOUT_MS).iter().count(), 1);
    }

    #[test]
    fn the_span_id_returned_is_the_parent_id_sent() {
        let mut headers = HeaderMap::new();
        let trace = TraceContext::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        let per_try = PerTry::new(Duration::from_secs(2));
        let span_id = set_attempt_headers(&mut headers, &per_try, Duration::from_secs(1), 1, 0, Some(trace));
        let sent = TraceContext::parse(headers[TRACEPARENT].to_str().unwrap()).unwrap();
        assert_eq!(span_id, Some(sent.parent_id()));
        assert_eq!(sent.trace_id(), trace.trace_id());
        assert_eq!(sent.flags(), 1);
        let mut headers = HeaderMap::new();
        assert_eq!(
            set_attempt_headers(&mut headers, &per_try, Duration::from_secs(1), 1, 0, None),
            None
        );
        assert!(!headers.contains_key(TRACEPARENT));
    }

    #[test]
    fn a_timeout_under_a_millisecond_is_never_zero() {
        let mut headers = HeaderMap::new();
        set_attempt_headers(
            &mut headers,
            &PerTry::new(Duration::from_secs(2)),
            Duration::from_micros(300),
            1,
            0,
            None,
        );
        assert_eq!(headers[BALLAST_TIMEOUT_MS], "1");
        assert_eq!(headers[BALLAST_HOP], "1");
    }

    #[test]
    fn the_per_try_value_and_numbers_past_nine_read_as_formatted() {
        let per_try = PerTry::new(Duration::from_millis(2_500));
        let mut headers = HeaderMap::new();
        set_attempt_headers(&mut headers, &per_try, Duration::from_millis(2_500), 12, 41, None);
        assert_eq!(headers[BALLAST_TIMEOUT_MS], "2500");
        assert_eq!(headers[ENVOY_EXPECTED_RQ_TIMEOUT_MS], "2500");
        assert_eq!(headers[BALLAST_ATTEMPT], "12");
        assert_eq!(headers[BALLAST_HOP], "42");
        for number in 0..=10 {
            assert_eq!(number_value(number), number.to_string().as_str());
        }
        assert_eq!(number_value(u32::MAX), u32::MAX.to_string().as_str());
    }
}
