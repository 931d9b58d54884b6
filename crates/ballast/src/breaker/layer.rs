//! The [`tower::Layer`] that puts a circuit breaker in front of a service.

use std::sync::Arc;

use ballast_core::CircuitBreaker;
use tower::Layer;

use super::BreakerService;

/// Gates every attempt on one upstream's [`CircuitBreaker`]; clones share the breaker. See the
/// [module docs](super).
#[derive(Clone, Debug)]
pub struct BreakerLayer {
    breaker: Arc<CircuitBreaker>,
}

impl BreakerLayer {
    /// A layer over `breaker`, the one breaker of its upstream.
    pub fn new(breaker: Arc<CircuitBreaker>) -> Self {
        BreakerLayer { breaker }
    }

    /// The upstream's breaker, for `/status` and metrics.
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.breaker
    }
}

impl<S> Layer<S> for BreakerLayer {
    type Service = BreakerService<S>;

    fn layer(&self, inner: S) -> BreakerService<S> {
        BreakerService::new(inner, Arc::clone(&self.breaker))
    }
}
