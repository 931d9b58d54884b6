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
use tower::Service;

use crate::Error;
use crate::transport::{CallNow, call_now};
use call::Call;
use slot::{Shared, Slot};
use wait::Admit;

pub use layer::AdmissionLayer;

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

impl<S> Service<http::Request<Bytes>> for AdmissionService<S>
where
    S: Service<http::Request<Bytes>, Response = http::Response<Bytes>, Error = Error>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    type Response = http::Response<Bytes>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<http::Response<Bytes>, Error>>;

    /// Always ready: admission is decided per call (it needs the call's class and deadline), and the service
    /// below is polled ready only once the call holds a slot.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    /// The call asks for its slot when it is called (as tower's `ConcurrencyLimit` takes its permit before the
    /// call): a call that gets one at once, the common case, runs in a small future with no queue in it.
    fn call(&mut self, request: http::Request<Bytes>) -> Self::Future {
        let call = Call::of(&request);
        let inner = self.inner.clone();
        match wait::offer(&self.shared, &call) {
            // The layers below are always ready: called now, the future holds their future, not the request.
            Admit::Run(slot) => {
                let mut inner = inner;
                match call_now(&mut inner, request) {
                    CallNow::Called(call) => Box::pin(release_after(slot, call)),
                    CallNow::Failed(error) => Box::pin(std::future::ready(Err(error))),
                    CallNow::NotReady(request) => Box::pin(run(slot, inner, request)),
                }
            }
            Admit::Refused(refused) => {
                call.record(&refused);
                Box::pin(std::future::ready(Err(refused)))
            }
            Admit::Queued(waiting) => Box::pin(async move {
                match waiting.until_woken(&call).await {
                    Ok(slot) => run(slot, inner, request).await,
                    Err(refused) => {
                        call.record(&refused);
                        Err(refused)
                    }
                }
            }),
        }
    }
}

/// Runs `request` through `inner` holding `slot` until the answer (or the drop).
async fn run<S>(
    slot: Slot,
    mut inner: S,
    request: http::Request<Bytes>,
) -> Result<http::Response<Bytes>, Error>
where
    S: Service<http::Request<Bytes>, Response = http::Response<Bytes>, Error = Error>,
{
    std::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
    release_after(slot, inner.call(request)).await
}

/// Awaits `call`, holding `slot` until its answer (or the drop).
async fn release_after<F>(mut slot: Slot, call: F) -> Result<http::Response<Bytes>, Error>
where
    F: Future<Output = Result<http::Response<Bytes>, Error>>,
{
    let result = call.await;
    if reached_upstream(&result) {
        slot.report_latency();
    }
    // Free the slot before answering: the next waiter starts now.
    drop(slot);
    result
}

/// Whether the call's result says how long the upstream takes: an answer, an attempt's error, or the retry
/// decision stopping after attempts. Local refusals (breaker open, a deadline that could not hold an attempt)
/// and cancellations say nothing.
fn reached_upstream(result: &Result<http::Response<Bytes>, Error>) -> bool {
    match result {
        Ok(_) => true,
        Err(error) => error.attempt_outcome().is_some() || matches!(error, Error::Stopped(_)),
    }
}
