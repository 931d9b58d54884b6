//! The attempt-level service that charges a deployment's limits before each attempt (the module's docs).

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use tower::{Layer, Service};

use super::{AccountLimits, estimate_tokens};
use crate::{Body, CallContext, Error};

/// Puts [`LimitService`] over the attempt-level stack of a deployment with limits; passes through without.
#[derive(Clone, Debug, Default)]
pub(crate) struct LimitLayer {
    limits: Option<Arc<AccountLimits>>,
}

impl LimitLayer {
    /// The layer of `limits` (none: every attempt passes).
    pub(crate) fn new(limits: Option<Arc<AccountLimits>>) -> Self {
        LimitLayer { limits }
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = LimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LimitService {
            limits: self.limits.clone(),
            inner,
        }
    }
}

/// Charges each attempt against its deployment's limits, then sends it (module docs of `limit`).
#[derive(Clone, Debug)]
pub(crate) struct LimitService<S> {
    limits: Option<Arc<AccountLimits>>,
    inner: S,
}

impl<S> Service<Request<Bytes>> for LimitService<S>
where
    S: Service<Request<Bytes>, Response = Response<Body>, Error = Error> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Body>, Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let Some(limits) = self.limits.clone() else {
            return Box::pin(self.inner.call(request));
        };
        // The inner service was made ready for this request: take it, leave a fresh clone behind (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let Some(ctx) = request.extensions().get::<CallContext>().cloned() else {
                return inner.call(request).await;
            };
            let tokens = if limits.counts_tokens() {
                estimate_tokens(request.body())
            } else {
                0
            };
            let charged = limits
                .charge(tokens, &ctx.effective_deadline(), &ctx.cancel)
                .await?;
            let response = match inner.call(request).await {
                Ok(response) => response,
                Err(refused) => {
                    // Refused below (breaker, throttle, deadline) before anything was sent: the provider counted
                    // nothing, and neither do the limits.
                    if !refused.may_have_reached_upstream() {
                        limits.give_back(charged);
                    }
                    return Err(refused);
                }
            };
            if limits.counts_tokens()
                && let Some(used) = (response.body().as_bytes()).and_then(|body| limits.used(body))
            {
                limits.correct(charged, used);
            }
            Ok(response)
        })
    }
}
