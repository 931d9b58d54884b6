//! The retry decision: from one attempt's outcome to Retry(after) or Stop(reason).
//!
//! (Skeleton: the decision is being written; `UpstreamIdempotency` is final.)

use std::fmt;
use std::str::FromStr;

use crate::UnknownName;

/// What a retry of a side-effecting call may do, by what the upstream does with an `Idempotency-Key`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UpstreamIdempotency {
    /// The upstream does not deduplicate: only never-sent errors are retried; a timeout or reset after sending
    /// makes the outcome unknown. The default for side-effecting tools.
    #[default]
    None,
    /// The upstream deduplicates by key and stores only successes: timeouts, transport errors and 5xx are retried
    /// with the same key.
    Keyed,
    /// The upstream stores every answer per key (Stripe): a keyed 5xx is not retried, since the replay would be
    /// the same 5xx; timeouts and transport errors are retried with the same key.
    KeyedReplaysErrors,
}

impl UpstreamIdempotency {
    /// The name used in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamIdempotency::None => "none",
            UpstreamIdempotency::Keyed => "keyed",
            UpstreamIdempotency::KeyedReplaysErrors => "keyed_replays_errors",
        }
    }

    /// Whether the upstream deduplicates by key (`keyed` or `keyed_replays_errors`).
    pub fn deduplicates(self) -> bool {
        !matches!(self, UpstreamIdempotency::None)
    }
}

impl fmt::Display for UpstreamIdempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for UpstreamIdempotency {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(UpstreamIdempotency::None),
            "keyed" => Ok(UpstreamIdempotency::Keyed),
            "keyed_replays_errors" => Ok(UpstreamIdempotency::KeyedReplaysErrors),
            _ => Err(UnknownName::new(s, &["none", "keyed", "keyed_replays_errors"])),
        }
    }
}

#[cfg(test)]
mod upstream_idempotency_tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for u in [
            UpstreamIdempotency::None,
            UpstreamIdempotency::Keyed,
            UpstreamIdempotency::KeyedReplaysErrors,
        ] {
            assert_eq!(u.as_str().parse::<UpstreamIdempotency>(), Ok(u));
        }
        assert!(!UpstreamIdempotency::None.deduplicates());
        assert!(UpstreamIdempotency::Keyed.deduplicates());
    }
}
