//! The slot hand-over under the races a parked call can lose, and the layer without a call context. The
//! issue's admission scenarios are in `tests/it/admission_priority.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast_core::{Admission, AdmissionConfig, CallKind, Deadline, Instant, Offer, Priority};
use bytes::Bytes;
use tokio::sync::oneshot;
use tower::{Layer, ServiceExt, service_fn};

use super::slot::{Shared, Slot, Wake, hand_over};
use super::{AdmissionLayer, ReachedUpstream as _};
use crate::Body;
use crate::{CallContext, Error, clock};

const MS: Duration = Duration::from_millis(1);

/// Queues a waiter directly in the core, returning its wake-up.
fn park(shared: &Shared, now: Instant) -> oneshot::Receiver<Wake> {
    let (waiter, wake) = oneshot::channel();
    let offer = shared.lock().offer(Priority::Critical, Instant::MAX, waiter, now);
    assert!(matches!(offer, Offer::Queued { evicted: None, .. }));
    wake
}

#[tokio::test(start_paused = true)]
async fn a_slot_sent_to_a_waiter_that_left_goes_to_the_next() {
    let shared = Arc::new(Shared::new(Admission::new(AdmissionConfig::new(1, 4)).unwrap()));
    let now = clock::now();
    let offer = shared
        .lock()
        .offer(Priority::Critical, Instant::MAX, oneshot::channel().0, now);
    assert!(matches!(offer, Offer::Run(_)));
    let running = Slot::new(Arc::clone(&shared), now);
    let gone = park(&shared, now);
    let mut next = park(&shared, now);

    // The first waiter's receiver is gone but its ticket was never cancelled (it is being dropped right now).
    drop(gone);
    drop(running);
    let Ok(Wake::Run(slot)) = next.try_recv() else {
        panic!("the slot should have gone on to the next waiter");
    };
    let state = shared.lock();
    assert_eq!((state.in_flight(), state.queued()), (1, 0));
    drop(state);
    drop(slot);
    assert_eq!(shared.lock().in_flight(), 0);
    hand_over(&shared, None, None);
    assert_eq!(shared.lock().in_flight(), 0, "a stray release changes nothing");
}

#[tokio::test(start_paused = true)]
async fn a_call_woken_but_dropped_before_it_runs_hands_its_slot_on() {
    let admission = AdmissionLayer::new(AdmissionConfig::new(1, 4)).unwrap();
    let started = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&started);
    let service = admission.layer(service_fn(move |request: http::Request<Bytes>| {
        seen.lock()
            .unwrap()
            .push(String::from_utf8(request.body().to_vec()).unwrap());
        async move {
            tokio::time::sleep(100 * MS).await;
            Ok::<_, Error>(http::Response::new(Bytes::new()))
        }
    }));
    let call = |name: &'static str| service.clone().oneshot(http::Request::new(Bytes::from(name)));

    let first = tokio::spawn(call("first"));
    tokio::task::yield_now().await;
    let mut woken = Box::pin(call("woken"));
    assert!(futures::poll!(&mut woken).is_pending());
    let last = tokio::spawn(call("last"));
    tokio::task::yield_now().await;
    assert_eq!(admission.queued(), 2);

    // `first` ends: its slot is sent to `woken`, which is never polled again and is then dropped.
    assert!(first.await.unwrap().is_ok());
    assert_eq!((admission.in_flight(), admission.queued()), (1, 1));
    drop(woken);
    assert!(last.await.unwrap().is_ok());
    assert_eq!(*started.lock().unwrap(), ["first", "last"]);
    assert_eq!((admission.in_flight(), admission.queued()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn without_a_context_a_call_waits_for_a_slot_however_long() {
    let admission = AdmissionLayer::new(AdmissionConfig::new(1, 1)).unwrap();
    let service = admission.layer(service_fn(|_request: http::Request<Bytes>| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, Error>(http::Response::new(Bytes::new()))
    }));
    let start = clock::now();
    let first = tokio::spawn(service.clone().oneshot(http::Request::new(Bytes::new())));
    tokio::task::yield_now().await;
    let second = service.oneshot(http::Request::new(Bytes::new())).await;
    assert!(second.is_ok());
    assert_eq!(
        clock::now().saturating_duration_since(start),
        Duration::from_secs(7200)
    );
    assert!(first.await.unwrap().is_ok());
}

/// Regression: the admission layer ignored an enclosing scope's deadline earlier than the context's, and queued a
/// call for as long as its context allowed.
#[tokio::test(start_paused = true)]
async fn a_queued_call_stops_waiting_at_the_scope_deadline() {
    let admission = AdmissionLayer::new(AdmissionConfig::new(1, 4)).unwrap();
    let service = admission.layer(service_fn(|_request: http::Request<Bytes>| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, Error>(http::Response::new(Bytes::new()))
    }));
    let busy = tokio::spawn(service.clone().oneshot(http::Request::new(Bytes::new())));
    tokio::task::yield_now().await;
    assert_eq!(admission.in_flight(), 1);

    let ctx = CallContext::new(
        CallKind::Model,
        Deadline::after(clock::now(), Duration::from_secs(30)),
    );
    let mut with_context = http::Request::new(Bytes::new());
    with_context.extensions_mut().insert(ctx);
    let without_context = http::Request::new(Bytes::new());
    for request in [with_context, without_context] {
        let start = clock::now();
        let scoped = Deadline::after(start, Duration::from_secs(1));
        let result = crate::context::scope(scoped, service.clone().oneshot(request)).await;
        assert!(matches!(result, Err(Error::DeadlineExceeded(_))), "{result:?}");
        let waited = clock::now().saturating_duration_since(start);
        assert!(
            waited < Duration::from_secs(1),
            "waited {waited:?}, past the 1 s scope"
        );
    }
    assert_eq!(admission.queued(), 0);
    busy.abort();
}

#[tokio::test(start_paused = true)]
async fn a_call_already_cancelled_is_refused_without_a_slot() {
    let admission = AdmissionLayer::new(AdmissionConfig::new(1, 1)).unwrap();
    let service = admission.layer(service_fn(|_request: http::Request<Bytes>| async {
        Ok::<_, Error>(http::Response::new(Bytes::new()))
    }));
    let ctx = CallContext::new(
        CallKind::Model,
        Deadline::after(clock::now(), Duration::from_secs(5)),
    );
    ctx.cancel.cancel();
    let mut request = http::Request::new(Bytes::new());
    request.extensions_mut().insert(ctx);
    assert!(matches!(service.oneshot(request).await, Err(Error::Cancelled)));
    assert_eq!(admission.in_flight(), 0);
}

#[test]
fn only_calls_that_reached_the_upstream_report_their_latency() {
    type Result = std::result::Result<http::Response<Body>, Error>;
    let ok: Result = Ok(http::Response::new(Body::empty()));
    assert!(ok.reached_upstream());
    assert!(Result::Err(Error::timeout(MS)).reached_upstream());
    assert!(Result::Err(Error::transport(true, "reset")).reached_upstream());
    assert!(!Result::Err(Error::CircuitOpen { retry_in: None }).reached_upstream());
    assert!(!Result::Err(Error::Cancelled).reached_upstream());
}
