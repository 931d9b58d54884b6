//! Admission parameters and their validation.

use std::time::Duration;

/// The parameters of one upstream's admission: how many calls run at once, how many may wait for a slot, and
/// the latency to assume before calls report their own.
///
/// Checked by [`AdmissionConfig::validate`], which [`Admission::new`](crate::Admission::new) calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AdmissionConfig {
    /// Calls that may run at once (`concurrency` in the configuration). At least 1.
    pub limit: usize,
    /// Calls that may wait for a slot (`queue` in the configuration). 0 means no queue: a call runs at once or
    /// is shed.
    pub queue: usize,
    /// The seed of the typical-latency estimate that the doomed-work rule uses. `None`: the rule stays off until
    /// a first call reports its latency. Must be greater than zero when given.
    pub typical_latency: Option<Duration>,
}

impl AdmissionConfig {
    /// `limit` calls at once, `queue` waiting, no latency seed.
    pub fn new(limit: usize, queue: usize) -> Self {
        AdmissionConfig {
            limit,
            queue,
            typical_latency: None,
        }
    }

    /// The same parameters, seeding the typical-latency estimate with `latency`.
    pub fn with_typical_latency(mut self, latency: Duration) -> Self {
        self.typical_latency = Some(latency);
        self
    }

    /// Whether these parameters can work.
    pub fn validate(&self) -> Result<(), InvalidAdmission> {
        if self.limit == 0 {
            return Err(InvalidAdmission::ZeroLimit);
        }
        if self.typical_latency == Some(Duration::ZERO) {
            return Err(InvalidAdmission::ZeroTypicalLatency);
        }
        Ok(())
    }
}

/// Admission parameters that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidAdmission {
    /// The concurrency limit is zero: no call could ever run.
    #[error("admission concurrency limit must be at least 1 (got 0)")]
    ZeroLimit,
    /// The typical latency is zero: every deadline would look long enough and no wait could be estimated.
    #[error("admission typical_latency must be greater than zero (got 0s)")]
    ZeroTypicalLatency,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_limit_is_refused_and_named() {
        let err = AdmissionConfig::new(0, 10).validate().unwrap_err();
        assert_eq!(err, InvalidAdmission::ZeroLimit);
        assert!(err.to_string().contains("concurrency limit"));
    }

    #[test]
    fn zero_typical_latency_is_refused_and_named() {
        let config = AdmissionConfig::new(1, 10).with_typical_latency(Duration::ZERO);
        let err = config.validate().unwrap_err();
        assert_eq!(err, InvalidAdmission::ZeroTypicalLatency);
        assert!(err.to_string().contains("typical_latency"));
    }

    #[test]
    fn no_queue_and_no_seed_are_valid() {
        assert_eq!(AdmissionConfig::new(1, 0).validate(), Ok(()));
        let seeded = AdmissionConfig::new(4, 0).with_typical_latency(Duration::from_millis(1));
        assert_eq!(seeded.validate(), Ok(()));
    }
}
