//! The [`tower::Layer`] holding one upstream's admission state.

use std::sync::Arc;

use ballast_core::{Admission, AdmissionConfig, InvalidAdmission};
use tower::Layer;

use super::AdmissionService;
use super::slot::Shared;

/// One upstream's concurrency limit and priority queue; every service it wraps, and every clone, shares them.
/// See the [module docs](super).
#[derive(Clone, Debug)]
pub struct AdmissionLayer {
    shared: Arc<Shared>,
}

impl AdmissionLayer {
    /// A layer admitting `config.limit` calls at once with `config.queue` waiting; refuses a configuration
    /// that cannot work (a zero limit, a zero typical latency).
    pub fn new(config: AdmissionConfig) -> Result<Self, InvalidAdmission> {
        Ok(AdmissionLayer {
            shared: Arc::new(Shared::new(Admission::new(config)?)),
        })
    }

    /// Calls running now (holding a slot), for `/status` and metrics.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().in_flight()
    }

    /// Calls waiting for a slot.
    pub fn queued(&self) -> usize {
        self.shared.lock().queued()
    }

    /// Calls waiting per class, lowest class first (the order of [`Priority::ALL`](ballast_core::Priority::ALL)).
    pub fn queued_by_class(&self) -> [usize; 4] {
        self.shared.lock().queued_by_class()
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = AdmissionService<S>;

    fn layer(&self, inner: S) -> AdmissionService<S> {
        AdmissionService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}
