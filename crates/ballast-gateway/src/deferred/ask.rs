//! What a tool call's caller asked about waiting, and whether a failure is one to defer.
//!
//! `Prefer: respond-async` (RFC 7240; among other preferences, in any case) says the caller can take a 202 and
//! poll. `ballast-defer-ttl` (whole seconds, or a duration such as `90s` or `10m`) shortens how long the
//! operation may wait; it never lengthens the tool's `defer.ttl`. A tool whose `defer` table is written defers
//! its calls without being asked.

use std::time::Duration;

use ballast::CallError;
use ballast::deferred::Defer;
use ballast::{Error, policy::Priority};
use ballast_config::ToolConfig;
use http::HeaderMap;

use crate::error::AppError;

/// `ballast-defer-ttl`: how long the caller's operation may wait at most.
pub(crate) const BALLAST_DEFER_TTL: &str = "ballast-defer-ttl";

/// The shortest `ballast-defer-ttl` (as `deferred.ttl`'s least): less leaves no time for a second attempt.
const MIN_TTL: Duration = Duration::from_secs(1);

/// What the caller asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ask {
    /// `Prefer: respond-async`.
    pub(crate) respond_async: bool,
    /// `ballast-defer-ttl`.
    pub(crate) ttl: Option<Duration>,
}

impl Ask {
    /// Reads the two headers for a call of a tool with `side_effects` (only those are deferred: for any other the
    /// headers are ignored); a `ballast-defer-ttl` that is not a duration of at least a second is a 400.
    pub(crate) fn read(headers: &HeaderMap, side_effects: bool) -> Result<Ask, AppError> {
        if !side_effects {
            return Ok(Ask::default());
        }
        let respond_async = (headers
            .get_all(http::header::HeaderName::from_static("prefer"))
            .iter())
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|preference| preference.split([';', '=']).next().unwrap_or("").trim())
        .any(|token| token.eq_ignore_ascii_case("respond-async"));
        let ttl = match headers.get(BALLAST_DEFER_TTL) {
            None => None,
            Some(value) => {
                let text = String::from_utf8_lossy(value.as_bytes()).trim().to_owned();
                let parsed = match text.parse::<u64>() {
                    Ok(seconds) => Ok(Duration::from_secs(seconds)),
                    Err(_) => ballast_config::parse_duration(&text).map_err(|_| ()),
                };
                match parsed {
                    Ok(ttl) if ttl >= MIN_TTL => Some(ttl),
                    _ => {
                        return Err(AppError::BadHeader {
                            header: BALLAST_DEFER_TTL,
                            value: text,
                            expected: "a duration of at least 1s: whole seconds, or such as 90s or 10m"
                                .to_owned(),
                        });
                    }
                }
            }
        };
        Ok(Ask { respond_async, ttl })
    }
}

/// The [`Defer`] marker for a call of `tool` (class `priority`) that ended with `error`, when the caller can
/// wait and the failure is one that a later attempt may not meet: nothing acted, and the call was refused for
/// room, by a throttle, a limit or an open breaker, by a spent budget or allowance, for lack of time, or by an
/// upstream's 429 or 503 — and, at an upstream that deduplicates by the key, any 5xx or lost answer (the key makes
/// a re-send safe). Never for an outcome that may have acted at an upstream that does not deduplicate, nor for a
/// request the upstream refused for good.
pub(crate) fn marker(tool: &ToolConfig, ask: Ask, priority: Priority, error: &CallError) -> Option<Defer> {
    let keyed = tool.upstream_idempotency == ballast_core::UpstreamIdempotency::Keyed;
    if !tool.side_effects || !(ask.respond_async || tool.defer.accepted) || !deferrable(error, keyed) {
        return None;
    }
    let ttl = ask.ttl.map_or(tool.defer.ttl, |asked| asked.min(tool.defer.ttl));
    let defer = Defer::new(tool.name.clone(), ttl)
        .priority(priority)
        .max_attempts(tool.defer.max_attempts)
        .after(error.retry_after().unwrap_or_default());
    Some(defer)
}

/// Whether `error` says the call could not be served now and nothing acted.
fn deferrable(error: &CallError, keyed: bool) -> bool {
    // An attempt that may have acted: never again at an upstream that does not deduplicate; at one that does,
    // the same key sent again is what deduplication is for.
    if error.outcome_unknown() {
        return keyed;
    }
    match error {
        // A 429, or a 503 that acted on nothing (on an upstream that does not deduplicate, a 5xx that may have is
        // `outcome_unknown` above); on an upstream that deduplicates by the key, any 5xx: re-sent with the key, it
        // cannot act twice. (One that replays its errors would answer the same 5xx again.)
        CallError::Upstream { status, .. } => *status == 429 || *status == 503 || (*status >= 500 && keyed),
        CallError::Failed { error, .. } => !matches!(error, Error::BodyTooLarge { .. } | Error::Cancelled),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn prefer_is_read_among_other_preferences_in_any_case() {
        assert!(!Ask::read(&headers(&[]), true).unwrap().respond_async);
        assert!(
            Ask::read(&headers(&[("prefer", "respond-async")]), true)
                .unwrap()
                .respond_async
        );
        assert!(
            Ask::read(
                &headers(&[("prefer", "return=minimal, Respond-Async; x=1")]),
                true
            )
            .unwrap()
            .respond_async
        );
        assert!(
            Ask::read(
                &headers(&[("prefer", "wait=5"), ("prefer", "respond-async")]),
                true
            )
            .unwrap()
            .respond_async
        );
        assert!(
            !Ask::read(&headers(&[("prefer", "respond-asyncx")]), true)
                .unwrap()
                .respond_async
        );
    }

    #[test]
    fn the_ttl_is_seconds_or_a_duration_and_never_zero() {
        let ttl = |value| Ask::read(&headers(&[(BALLAST_DEFER_TTL, value)]), true).map(|a| a.ttl);
        assert_eq!(ttl("90").unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(ttl("10m").unwrap(), Some(Duration::from_secs(600)));
        assert!(ttl("0").is_err());
        assert!(ttl("500ms").is_err(), "at least a second");
        let read_only = Ask::read(
            &headers(&[(BALLAST_DEFER_TTL, "soon"), ("prefer", "respond-async")]),
            false,
        );
        assert_eq!(
            read_only.unwrap(),
            Ask::default(),
            "ignored where nothing is deferred"
        );
        assert!(ttl("soon").is_err());
    }
}
