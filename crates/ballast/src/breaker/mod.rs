//! The breaker layer: each attempt asks the upstream's circuit breaker first, and tells it how it went. What
//! it does and why is documented on [`BreakerLayer`], the public face of this private module.

mod attempt;
mod layer;
mod stream;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::task::{Context, Poll};

use ballast_core::{AdaptiveThrottle, CircuitBreaker};
use bytes::Bytes;
use futures::future::BoxFuture;
use tower::Service;

use crate::{Body, CallContext, Error};

pub use layer::BreakerLayer;
#[cfg(test)]
pub(crate) use stream::StreamPermit;

/// A service whose attempts go through one upstream's circuit breaker; see [`BreakerLayer`].
#[derive(Clone, Debug)]
pub struct BreakerService<S> {
    inner: S,
    breaker: Arc<CircuitBreaker>,
    throttle: Option<Arc<AdaptiveThrottle>>,
}

impl<S> BreakerService<S> {
    /// `inner` behind `breaker` (shared with every other service of the same upstream).
    pub fn new(inner: S, breaker: Arc<CircuitBreaker>) -> Self {
        BreakerService {
            inner,
            breaker,
            throttle: None,
        }
    }

    /// The same service, with the upstream's adaptive throttle asked before the breaker.
    pub fn with_throttle(mut self, throttle: Option<Arc<AdaptiveThrottle>>) -> Self {
        self.throttle = throttle;
        self
    }

    /// The upstream's breaker, for `/status` and metrics.
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.breaker
    }
}

impl<S, B> Service<http::Request<Bytes>> for BreakerService<S>
where
    S: Service<http::Request<Bytes>, Response = http::Response<B>, Error = Error> + Clone + Send + 'static,
    S::Future: Send,
    B: Into<Body> + 'static,
{
    type Response = http::Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<http::Response<Body>, Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Bytes>) -> Self::Future {
        // The service that was polled ready goes into the future; a fresh clone stays for the next call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let report = request
            .extensions()
            .get::<CallContext>()
            .map(|ctx| ctx.report.clone());
        Box::pin(attempt::gated(
            Arc::clone(&self.breaker),
            self.throttle.clone(),
            inner,
            request,
            report,
        ))
    }
}
