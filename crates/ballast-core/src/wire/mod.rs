//! Deadlines and retry hints on the wire: the header names, their value forms, and the inbound rule.
//!
//! Why durations and not timestamps: a deadline crosses machines whose clocks disagree, so it travels as "this
//! much time from now", as gRPC's `grpc-timeout` does (gRPC over HTTP/2, "Timeout"), and becomes an absolute
//! [`Deadline`](crate::Deadline) again on arrival against the receiver's own monotonic clock.
//!
//! Why read five headers: callers state their deadline in whatever their stack speaks — `ballast-timeout-ms`
//! from another Ballast, `grpc-timeout` from gRPC stacks, `x-envoy-expected-rq-timeout-ms` from an Envoy in front
//! (Envoy sets it to the timeout it will enforce), and the OpenAI SDKs' `x-stainless-timeout` (Node, whole
//! seconds truncated) and `x-stainless-read-timeout` (Python, decimal seconds). Each is a promise that some
//! layer will give up after that long, so the earliest is the one that counts: [`inbound_timeout`] takes the
//! **smallest** of all present, falls back to the route's default when there is none, and caps the result with
//! the route's maximum so no client can hold the gateway's resources longer than the operator allows.
//!
//! Why a malformed value is an error and not ignored: a deadline silently dropped is a client waiting for an
//! answer Ballast no longer tries to give in time. It is a 400 naming the header and the value (DESIGN.md,
//! "Deadline").
//!
//! Rounding always favours the stricter side: a deadline read or written is rounded **down** (a receiver never
//! gets more time than the sender had), except that a nonzero time is never written as `0`; a retry hint is
//! rounded **up** (never retry earlier than the server asked).
//!
//! Values are checked strictly: optional whitespace (spaces and tabs, RFC 9110 §5.6.3) around a value is
//! allowed, nothing else is. These headers are singletons, so a comma-joined `1S, 2S` is malformed.

mod error;
mod format;
mod number;
mod retry_hint;
mod timeout;
mod trace;

pub use trace::{InvalidTraceparent, TRACEPARENT, TraceContext, TraceId};

use std::fmt;
use std::time::Duration;

pub use error::{Malformation, WireError};
pub use format::{format_grpc_timeout, format_timeout_ms};
pub use retry_hint::{RetryAfter, parse_retry_after, parse_retry_after_ms, parse_should_retry};
pub use timeout::DeadlineHeader;

/// `ballast-timeout-ms`: the deadline in whole milliseconds; set on every outbound attempt to that attempt's
/// timeout.
pub const BALLAST_TIMEOUT_MS: &str = "ballast-timeout-ms";
/// `grpc-timeout`: the gRPC deadline, 1-8 digits and a unit (`2500m`).
pub const GRPC_TIMEOUT: &str = "grpc-timeout";
/// `x-envoy-expected-rq-timeout-ms`: Envoy's timeout for the request in whole milliseconds; Ballast also sets it
/// on outbound attempts.
pub const ENVOY_EXPECTED_RQ_TIMEOUT_MS: &str = "x-envoy-expected-rq-timeout-ms";
/// `x-stainless-timeout`: the OpenAI Node SDK's timeout, whole seconds truncated.
pub const STAINLESS_TIMEOUT: &str = "x-stainless-timeout";
/// `x-stainless-read-timeout`: the OpenAI Python SDK's read timeout, decimal seconds.
pub const STAINLESS_READ_TIMEOUT: &str = "x-stainless-read-timeout";
/// `ballast-attempt`: the attempt number of an outbound request, from 1.
pub const BALLAST_ATTEMPT: &str = "ballast-attempt";
/// `ballast-hop`: how many Ballasts the request has passed, this one included; a request that arrives with it
/// is not retried again (retries at exactly one layer).
pub const BALLAST_HOP: &str = "ballast-hop";
/// `ballast-outcome`: `unknown` on an answer after which nobody knows whether the side effect happened (an
/// idempotency layer's outcome-unknown and handler-panicked answers, another Ballast's `outcome_unknown`).
pub const BALLAST_OUTCOME: &str = "ballast-outcome";
/// `ballast-remaining-ms`: on every gateway response, the time left before the request's deadline.
pub const BALLAST_REMAINING_MS: &str = "ballast-remaining-ms";
/// `retry-after`: delta-seconds or an HTTP-date (RFC 9110 §10.2.3).
pub const RETRY_AFTER: &str = "retry-after";
/// `retry-after-ms`: milliseconds to wait, as OpenAI and Azure OpenAI send it.
pub const RETRY_AFTER_MS: &str = "retry-after-ms";
/// `x-should-retry`: `true` or `false`, whether a retry can help (read by the OpenAI SDKs; overrides the status).
pub const X_SHOULD_RETRY: &str = "x-should-retry";

/// Where an inbound request's timeout came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutSource {
    /// The smallest value among the deadline headers present was this header's.
    Header(DeadlineHeader),
    /// No deadline header was present: the route's default applied.
    Default,
}

impl fmt::Display for TimeoutSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeoutSource::Header(header) => f.write_str(header.name()),
            TimeoutSource::Default => f.write_str("default"),
        }
    }
}

/// The timeout an inbound request gets, and why — for the gateway's logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct InboundTimeout {
    /// The timeout to apply: `requested`, capped by the route's maximum.
    pub timeout: Duration,
    /// What the caller asked for (or the default), before the cap.
    pub requested: Duration,
    /// The header that gave the smallest value, or the default.
    pub source: TimeoutSource,
}

impl InboundTimeout {
    /// Whether the route's maximum cut the requested timeout.
    pub fn is_capped(&self) -> bool {
        self.requested > self.timeout
    }
}

/// The timeout of an inbound request: the smallest value of every deadline header present, `default` when there
/// is none, capped by `max`.
///
/// - Header names are matched case-insensitively; headers that are not deadline headers are ignored.
/// - A header sent more than once counts with each of its values: the smallest wins, as for different headers.
/// - Any malformed deadline header is an error, even when others are well-formed: the caller meant something
///   we cannot read, and guessing could give it more time than it has.
/// - When several headers give the same smallest value, the source reported is the first in
///   [`DeadlineHeader::ALL`] order (`ballast-timeout-ms` first), whatever the order they arrived in.
/// - The cap applies to the default too.
///
/// ```
/// use ballast_core::{DeadlineHeader, TimeoutSource, inbound_timeout};
/// use std::time::Duration;
///
/// let headers = [
///     ("content-type", "application/json"),
///     ("X-Stainless-Read-Timeout", "600.0"),
///     ("grpc-timeout", "20S"),
/// ];
/// let t = inbound_timeout(headers, Duration::from_secs(30), Duration::from_secs(300)).unwrap();
/// assert_eq!(t.timeout, Duration::from_secs(20));
/// assert_eq!(t.source, TimeoutSource::Header(DeadlineHeader::GrpcTimeout));
/// assert!(!t.is_capped());
///
/// // Only the Python SDK's 600 s: capped to the route's 300 s.
/// let t = inbound_timeout([("x-stainless-read-timeout", "600.0")], Duration::from_secs(30), Duration::from_secs(300))
///     .unwrap();
/// assert_eq!((t.timeout, t.requested, t.is_capped()), (Duration::from_secs(300), Duration::from_secs(600), true));
///
/// // A malformed value is an error naming the header and the value.
/// let err = inbound_timeout([("grpc-timeout", "12x")], Duration::from_secs(30), Duration::from_secs(300));
/// assert!(err.unwrap_err().to_string().starts_with(r#"grpc-timeout: "12x" is not a gRPC timeout"#));
/// ```
pub fn inbound_timeout<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    default: Duration,
    max: Duration,
) -> Result<InboundTimeout, WireError> {
    let mut smallest: Option<(Duration, DeadlineHeader)> = None;
    for (name, value) in headers {
        let Some(header) = DeadlineHeader::from_name(name) else {
            continue;
        };
        let timeout = header.parse(value)?;
        let wins = match smallest {
            None => true,
            Some((best, best_header)) => timeout < best || (timeout == best && header < best_header),
        };
        if wins {
            smallest = Some((timeout, header));
        }
    }
    let (requested, source) = match smallest {
        Some((timeout, header)) => (timeout, TimeoutSource::Header(header)),
        None => (default, TimeoutSource::Default),
    };
    Ok(InboundTimeout {
        timeout: requested.min(max),
        requested,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DEFAULT: Duration = Duration::from_secs(30);
    const MAX: Duration = Duration::from_secs(300);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn inbound(headers: &[(&str, &str)]) -> Result<InboundTimeout, WireError> {
        inbound_timeout(headers.iter().copied(), DEFAULT, MAX)
    }

    #[test]
    fn no_deadline_header_means_the_default() {
        let t = inbound(&[
            ("content-type", "application/json"),
            ("x-stainless-retry-count", "0"),
        ])
        .unwrap();
        assert_eq!(t.timeout, DEFAULT);
        assert_eq!(t.requested, DEFAULT);
        assert_eq!(t.source, TimeoutSource::Default);
        assert!(!t.is_capped());
        assert_eq!(t.source.to_string(), "default");
    }

    #[test]
    fn the_default_is_capped_too() {
        let t = inbound_timeout([], secs(600), MAX).unwrap();
        assert_eq!(
            (t.timeout, t.requested, t.source),
            (MAX, secs(600), TimeoutSource::Default)
        );
        assert!(t.is_capped());
    }

    #[test]
    fn the_smallest_of_all_headers_wins() {
        let t = inbound(&[
            ("ballast-timeout-ms", "20000"),
            ("grpc-timeout", "15S"),
            ("x-envoy-expected-rq-timeout-ms", "12000"),
            ("x-stainless-timeout", "600"),
            ("x-stainless-read-timeout", "8.5"),
        ])
        .unwrap();
        assert_eq!(t.timeout, Duration::from_millis(8500));
        assert_eq!(
            t.source,
            TimeoutSource::Header(DeadlineHeader::StainlessReadTimeout)
        );
        assert_eq!(t.source.to_string(), "x-stainless-read-timeout");
    }

    #[test]
    fn a_smaller_header_wins_over_the_default_and_a_larger_one_too() {
        assert_eq!(inbound(&[("grpc-timeout", "1S")]).unwrap().timeout, secs(1));
        // A caller may ask for more than the default, up to the cap.
        assert_eq!(
            inbound(&[("ballast-timeout-ms", "120000")]).unwrap().timeout,
            secs(120)
        );
    }

    #[test]
    fn a_repeated_header_counts_with_its_smallest_value() {
        let t = inbound(&[
            ("grpc-timeout", "9S"),
            ("grpc-timeout", "3S"),
            ("grpc-timeout", "5S"),
        ])
        .unwrap();
        assert_eq!(t.timeout, secs(3));
        assert_eq!(t.source, TimeoutSource::Header(DeadlineHeader::GrpcTimeout));
    }

    #[test]
    fn ties_report_the_first_header_in_fixed_order() {
        let t = inbound(&[
            ("x-stainless-timeout", "5"),
            ("grpc-timeout", "5S"),
            ("ballast-timeout-ms", "5000"),
        ])
        .unwrap();
        assert_eq!(t.source, TimeoutSource::Header(DeadlineHeader::BallastTimeoutMs));
        let t = inbound(&[("x-stainless-timeout", "5"), ("grpc-timeout", "5S")]).unwrap();
        assert_eq!(t.source, TimeoutSource::Header(DeadlineHeader::GrpcTimeout));
    }

    #[test]
    fn the_cap_cuts_a_large_request_and_says_so() {
        let t = inbound(&[("x-stainless-read-timeout", "600.0")]).unwrap();
        assert_eq!(t.timeout, MAX);
        assert_eq!(t.requested, secs(600));
        assert!(t.is_capped());
        assert_eq!(
            t.source,
            TimeoutSource::Header(DeadlineHeader::StainlessReadTimeout)
        );
        let t = inbound(&[("ballast-timeout-ms", "300000")]).unwrap();
        assert!(!t.is_capped());
    }

    #[test]
    fn header_names_match_in_any_case() {
        let t = inbound(&[("GRPC-TIMEOUT", "2S"), ("X-Stainless-Timeout", "1")]).unwrap();
        assert_eq!(t.timeout, secs(1));
        assert_eq!(t.source, TimeoutSource::Header(DeadlineHeader::StainlessTimeout));
        assert_eq!(
            inbound(&[("Ballast-Timeout-Ms", "250")]).unwrap().timeout,
            Duration::from_millis(250)
        );
    }

    #[test]
    fn any_malformed_deadline_header_is_an_error_even_beside_good_ones() {
        let err = inbound(&[("ballast-timeout-ms", "100"), ("grpc-timeout", "123456789S")]).unwrap_err();
        assert_eq!(
            err,
            WireError::Malformed {
                header: GRPC_TIMEOUT,
                value: "123456789S".to_owned(),
                why: Malformation::TooManyDigits
            }
        );
        let err = inbound(&[("X-Stainless-Read-Timeout", "-1"), ("grpc-timeout", "1S")]).unwrap_err();
        assert_eq!(err.header(), STAINLESS_READ_TIMEOUT);
    }

    #[test]
    fn unrelated_headers_are_never_parsed() {
        let t = inbound(&[
            ("retry-after", "soon"),
            ("x-grpc-timeout", "nope"),
            ("grpc-timeoutx", "?"),
        ])
        .unwrap();
        assert_eq!(t.source, TimeoutSource::Default);
    }

    #[test]
    fn a_zero_deadline_is_kept_zero() {
        let t = inbound(&[("ballast-timeout-ms", "0"), ("grpc-timeout", "5S")]).unwrap();
        assert_eq!(t.timeout, Duration::ZERO);
    }

    #[test]
    fn header_constants_are_lowercase_wire_names() {
        let all = [
            BALLAST_TIMEOUT_MS,
            GRPC_TIMEOUT,
            ENVOY_EXPECTED_RQ_TIMEOUT_MS,
            STAINLESS_TIMEOUT,
            STAINLESS_READ_TIMEOUT,
            BALLAST_ATTEMPT,
            BALLAST_HOP,
            BALLAST_REMAINING_MS,
            RETRY_AFTER,
            RETRY_AFTER_MS,
            X_SHOULD_RETRY,
        ];
        for name in all {
            assert!(
                name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{name}"
            );
        }
        let unique: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len());
    }

    proptest! {
        #[test]
        fn the_result_is_the_capped_minimum_of_what_was_sent(
            millis in proptest::collection::vec(0_u64..1_000_000, 0..6),
            grpc_secs in proptest::option::of(0_u64..1_000),
        ) {
            let values: Vec<String> = millis.iter().map(u64::to_string).collect();
            let grpc = grpc_secs.map(|s| format!("{s}S"));
            let mut headers: Vec<(&str, &str)> = values.iter().map(|v| (BALLAST_TIMEOUT_MS, v.as_str())).collect();
            if let Some(g) = &grpc {
                headers.push((GRPC_TIMEOUT, g));
            }
            let t = inbound_timeout(headers, DEFAULT, MAX).unwrap();
            let expected = millis
                .iter()
                .map(|&ms| Duration::from_millis(ms))
                .chain(grpc_secs.map(Duration::from_secs))
                .min()
                .unwrap_or(DEFAULT);
            prop_assert_eq!(t.requested, expected);
            prop_assert_eq!(t.timeout, expected.min(MAX));
            prop_assert!(t.timeout <= MAX);
        }

        #[test]
        fn never_panics_on_arbitrary_headers(
            headers in proptest::collection::vec((any::<String>(), any::<String>()), 0..4),
            index in 0_usize..5,
            value in any::<String>(),
        ) {
            let mut pairs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            pairs.push((DeadlineHeader::ALL[index].name(), value.as_str()));
            if let Ok(t) = inbound_timeout(pairs, DEFAULT, MAX) {
                prop_assert!(t.timeout <= MAX);
            }
        }
    }
}
