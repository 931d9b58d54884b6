//! Calling the service below at once when it is ready now.
//!
//! Why: a layer's future that must first await the readiness of the service below holds the request until
//! then, and so does every future wrapping it — copies of a 256-byte request and of the wrappers, moved and
//! boxed on every call. The services of a Ballast stack are always ready, and so are reqwest and most transports:
//! asked once, without a waker, they say so, and the layer calls them right away and holds only their future.
//! A service not ready yet is asked again by the layer's future with the task's waker (the later waker is the
//! one a service keeps), so nothing changes for it.

use std::task::{Context, Poll, Waker};

use tower::Service;

/// What asking `inner` once gave.
pub(crate) enum CallNow<S: Service<R>, R> {
    /// It was ready: this is its call.
    Called(S::Future),
    /// It failed to become ready.
    Failed(S::Error),
    /// Not ready yet: the request, to send once it is.
    NotReady(R),
}

/// `inner.call(request)` when `inner` is ready now; else why not, with the request back.
pub(crate) fn call_now<S: Service<R>, R>(inner: &mut S, request: R) -> CallNow<S, R> {
    match inner.poll_ready(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(())) => CallNow::Called(inner.call(request)),
        Poll::Ready(Err(error)) => CallNow::Failed(error),
        Poll::Pending => CallNow::NotReady(request),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// Ready after `pending` asks; counts its calls.
    #[derive(Clone)]
    struct Slow {
        pending: Arc<AtomicU32>,
        calls: Arc<AtomicU32>,
    }

    impl Service<u32> for Slow {
        type Response = u32;
        type Error = &'static str;
        type Future = std::future::Ready<Result<u32, &'static str>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            match self.pending.load(Ordering::SeqCst) {
                u32::MAX => Poll::Ready(Err("broken")),
                0 => Poll::Ready(Ok(())),
                n => {
                    self.pending.store(n - 1, Ordering::SeqCst);
                    Poll::Pending
                }
            }
        }

        fn call(&mut self, request: u32) -> Self::Future {
            self.calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(request * 2))
        }
    }

    #[tokio::test]
    async fn a_ready_service_is_called_at_once_and_the_others_give_the_request_back() {
        let calls = Arc::new(AtomicU32::new(0));
        let mut ready = Slow {
            pending: Arc::new(AtomicU32::new(0)),
            calls: Arc::clone(&calls),
        };
        let CallNow::Called(answer) = call_now(&mut ready, 21) else {
            panic!("ready: called")
        };
        assert_eq!(answer.await, Ok(42));
        let mut slow = Slow {
            pending: Arc::new(AtomicU32::new(1)),
            calls: Arc::clone(&calls),
        };
        assert!(matches!(call_now(&mut slow, 7), CallNow::NotReady(7)));
        let mut broken = Slow {
            pending: Arc::new(AtomicU32::new(u32::MAX)),
            calls: Arc::clone(&calls),
        };
        assert!(matches!(call_now(&mut broken, 7), CallNow::Failed("broken")));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "only the ready one was called");
    }
}
