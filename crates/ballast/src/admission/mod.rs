//! The admission layer: a concurrency limit and a bounded priority queue per upstream, with shedding. What it
//! does and why is documented on [`AdmissionLayer`], the public face of this private module.

mod call;
mod layer;
mod slot;
mod wait;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http::Response;
use tower::{Service, ServiceExt as _};

use crate::{Body, CallContext, Error};
use call::Call;
use slot::Shared;
use wait::Admit;

pub use layer::AdmissionLayer;
pub(crate) use slot::Slot;

/// A service whose calls are admitted by one upstream's concurrency limit and priority queue; see
/// [`AdmissionLayer`]. Clones share the limit and the queue.
#[derive(Clone, Debug)]
pub struct AdmissionService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> AdmissionService<S> {
    /// Calls running now (holding a slot).
    pub fn in_flight(&self) -> usize {
        self.shared.lock().in_flight()
    }

    /// Calls waiting for a slot.
    pub fn queued(&self) -> usize {
        self.shared.lock().queued()
    }
}

impl<S, B> Service<http::Request<Bytes>> for AdmissionService<S>
where
    S: Service<http::Request<Bytes>, Response = Response<B>, Error = Error> + Clone + Send + 'static,
    S::Future: Send,
    B: Into<Body> + 'static,
{
    type Response = Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Body>, Error>>;

    /// Always ready: admission is decided per call (it needs the call's class and deadline), and the service
    /// below is polled ready only once the call holds a slot.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    /// The call asks for its slot when it is called (as tower's `ConcurrencyLimit` takes its permit before the
    /// call); the future waits for one if it was queued, then runs the call holding it.
    fn call(&mut self, request: http::Request<Bytes>) -> Self::Future {
        let call = Call::of(&request);
        let admit = wait::offer(&self.shared, &call);
        let inner = self.inner.clone();
        Box::pin(async move {
            match admit.until_admitted(&call).await {
                Ok(slot) => {
                    holding(slot, async move {
                        let response = inner.oneshot(request).await?;
                        Ok(response.map(Into::into))
                    })
                    .await
                }
                Err(refused) => {
                    call.record(&refused);
                    Err(refused)
                }
            }
        })
    }
}

impl AdmissionLayer {
    /// A slot for the call of `ctx` — at once, after a wait in the queue, or the refusal (shed, evicted, its
    /// deadline too close, cancelled): for a client that runs what the slot admits itself ([`holding`]).
    pub(crate) async fn admit(&self, ctx: &CallContext) -> Result<Slot, Error> {
        let call = Call::of_context(ctx);
        wait::offer(self.shared(), &call).until_admitted(&call).await
    }
}

/// Runs `work` holding `slot` until its result; the slot is freed before the result is handed on (the next waiter
/// starts now), having told the core how long it was held when the result says the work reached the upstream —
/// unless the result is a stream that started answering ([`ReachedUpstream::keep_slot`]): a stream occupies the
/// upstream until it ends, so it carries the slot in its body and frees it then (the core is told the time to
/// its first event, what a queued call waits for a stream to start).
pub(crate) async fn holding<F, T>(mut slot: Slot, work: F) -> T
where
    F: Future<Output = T>,
    T: ReachedUpstream,
{
    let mut result = work.await;
    if result.reached_upstream() {
        slot.report_latency();
    }
    if let Some(unkept) = result.keep_slot(slot) {
        drop(unkept);
    }
    result
}

/// Whether a call's result says how long the upstream takes: an answer, an attempt's error, or the retry
/// decision stopping after attempts. Local refusals (breaker open, a deadline that could not hold an attempt)
/// and cancellations say nothing.
pub(crate) trait ReachedUpstream {
    /// Whether it reached the upstream.
    fn reached_upstream(&self) -> bool;

    /// Keeps `slot` inside a streamed answer, freed when the stream ends; gives it back otherwise.
    fn keep_slot(&mut self, slot: Slot) -> Option<Slot> {
        Some(slot)
    }
}

impl ReachedUpstream for Result<Response<Body>, Error> {
    fn reached_upstream(&self) -> bool {
        match self {
            Ok(_) => true,
            Err(error) => error.attempt_outcome().is_some() || matches!(error, Error::Stopped(_)),
        }
    }
}

impl Admit {
    /// The slot: at once, or once the queue hands one over.
    async fn until_admitted(self, call: &Call) -> Result<Slot, Error> {
        match self {
            Admit::Run(slot) => Ok(slot),
            Admit::Refused(refused) => Err(refused),
            // Boxed: the rare wait (a timer, a channel, the token) would otherwise size every call's future.
            Admit::Queued(waiting) => Box::pin(waiting.until_woken(call)).await,
        }
    }
}
