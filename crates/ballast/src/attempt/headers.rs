//! The headers every attempt carries: its own timeout, its number and the hop count (DESIGN.md, "Deadline").

use std::time::Duration;

use ballast_core::format_timeout_ms;

use crate::headers::{BALLAST_ATTEMPT, BALLAST_HOP, BALLAST_TIMEOUT_MS, ENVOY_EXPECTED_RQ_TIMEOUT_MS};
use http::{HeaderMap, HeaderValue};

/// Sets (replacing any value already there) `ballast-timeout-ms` and `x-envoy-expected-rq-timeout-ms` to the
/// attempt's `timeout`, `ballast-attempt` to its `number` and `ballast-hop` to `hop + 1`.
///
/// The timeout travels as a duration, never a timestamp (clock skew), and it is **this attempt's**: the upstream
/// can stop working on a request its caller has already given up on.
pub(super) fn set_attempt_headers(headers: &mut HeaderMap, timeout: Duration, number: u32, hop: u32) {
    let timeout = HeaderValue::try_from(format_timeout_ms(timeout))
        .unwrap_or_else(|_digits_are_always_valid| HeaderValue::from_static("0"));
    // Room for the four at once (a copied map has none to spare): one growth, not one per insert.
    headers.reserve(4);
    headers.insert(BALLAST_TIMEOUT_MS, timeout.clone());
    headers.insert(ENVOY_EXPECTED_RQ_TIMEOUT_MS, timeout);
    headers.insert(BALLAST_ATTEMPT, HeaderValue::from(number));
    headers.insert(BALLAST_HOP, HeaderValue::from(hop.saturating_add(1)));
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
        set_attempt_headers(&mut headers, Duration::from_micros(1_200_700), 2, 3);
        assert_eq!(headers[BALLAST_TIMEOUT_MS], "1200");
        assert_eq!(headers[ENVOY_EXPECTED_RQ_TIMEOUT_MS], "1200");
        assert_eq!(headers[BALLAST_ATTEMPT], "2");
        assert_eq!(headers.get_all(BALLAST_HOP).iter().collect::<Vec<_>>(), ["4"]);
        assert_eq!(headers.get_all(BALLAST_TIMEOUT_MS).iter().count(), 1);
    }

    #[test]
    fn a_timeout_under_a_millisecond_is_never_zero() {
        let mut headers = HeaderMap::new();
        set_attempt_headers(&mut headers, Duration::from_micros(300), 1, 0);
        assert_eq!(headers[BALLAST_TIMEOUT_MS], "1");
        assert_eq!(headers[BALLAST_HOP], "1");
    }
}
