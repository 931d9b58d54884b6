//! Issue 4, test 8: the admission layer at capacity (in process, paused time, a `service_fn` upstream).
//!
//! A `critical_plus` call is served before queued `sheddable` ones and evicts the lowest when the queue is full;
//! a call whose deadline cannot cover the expected wait is shed at once; a queued call whose deadline passes
//! never runs; a dropped or cancelled queued call leaves no waiter behind; the limit is never exceeded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast::{
    Error, clock,
    context::CallContext,
    layer::{AdmissionLayer, AdmissionService},
};
use ballast_core::{AdmissionConfig, CallKind, Deadline, ErrorCode, Priority};
use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt, service_fn};

const MS: Duration = Duration::from_millis(1);
type Answer = Result<http::Response<ballast::Body>, Error>;
type Upstream = BoxCloneService<http::Request<Bytes>, http::Response<Bytes>, Error>;

/// What the upstream double saw: the calls in the order they started, and how many ran at once.
#[derive(Clone, Default)]
struct Seen {
    started: Arc<Mutex<Vec<String>>>,
    running: Arc<AtomicUsize>,
    most_at_once: Arc<AtomicUsize>,
}

impl Seen {
    fn started(&self) -> Vec<String> {
        self.started.lock().unwrap().clone()
    }
}

/// The upstream double: each call (named by `x-call`) takes the time its `x-latency-ms` says.
fn upstream(seen: &Seen) -> Upstream {
    let seen = seen.clone();
    BoxCloneService::new(service_fn(move |request: http::Request<Bytes>| {
        let seen = seen.clone();
        let call: BoxFuture<'static, Result<http::Response<Bytes>, Error>> = Box::pin(async move {
            let header = |name: &str| request.headers()[name].to_str().unwrap().to_owned();
            let name = header("x-call");
            let latency = Duration::from_millis(header("x-latency-ms").parse().unwrap());
            seen.started.lock().unwrap().push(name.clone());
            let now_running = seen.running.fetch_add(1, Ordering::SeqCst) + 1;
            seen.most_at_once.fetch_max(now_running, Ordering::SeqCst);
            tokio::time::sleep(latency).await;
            seen.running.fetch_sub(1, Ordering::SeqCst);
            Ok(http::Response::new(Bytes::from(name)))
        });
        call
    }))
}

struct Fixture {
    admission: AdmissionLayer,
    service: AdmissionService<Upstream>,
    seen: Seen,
}

impl Fixture {
    fn new(config: AdmissionConfig) -> Self {
        let admission = AdmissionLayer::new(config).unwrap();
        let seen = Seen::default();
        let service = admission.layer(upstream(&seen));
        Fixture {
            admission,
            service,
            seen,
        }
    }

    /// A call named `name` of class `priority`, with `deadline` from now, taking `latency` upstream.
    fn request(
        name: &str,
        priority: Priority,
        deadline: Duration,
        latency: Duration,
    ) -> (http::Request<Bytes>, CallContext) {
        let mut ctx = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), deadline));
        ctx.priority = priority;
        let mut request = http::Request::builder()
            .header("x-call", name)
            .header("x-latency-ms", latency.as_millis().to_string())
            .body(Bytes::new())
            .unwrap();
        request.extensions_mut().insert(ctx.clone());
        (request, ctx)
    }

    /// Starts a call in its own task; returns once admission has run it or queued it.
    async fn spawn(
        &self,
        name: &str,
        priority: Priority,
        latency: Duration,
    ) -> (JoinHandle<Answer>, CallContext) {
        let (request, ctx) = Self::request(name, priority, Duration::from_secs(60), latency);
        let class = priority as usize;
        let (running, waiting) = (
            self.admission.in_flight(),
            self.admission.queued_by_class()[class],
        );
        let task = tokio::spawn(self.service.clone().oneshot(request));
        self.settle(|a| a.in_flight() > running || a.queued_by_class()[class] > waiting)
            .await;
        (task, ctx)
    }

    /// A call that is answered without waiting (shed), awaited here.
    async fn call(&self, name: &str, priority: Priority, deadline: Duration) -> (Answer, CallContext) {
        let (request, ctx) = Self::request(name, priority, deadline, 10 * MS);
        (self.service.clone().oneshot(request).await, ctx)
    }

    /// Yields until `done` holds of the admission state (spawned tasks reach the queue without time passing).
    async fn settle(&self, done: impl Fn(&AdmissionLayer) -> bool) {
        for _ in 0..1000 {
            if done(&self.admission) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!(
            "admission never settled: {} running, {} queued",
            self.admission.in_flight(),
            self.admission.queued()
        );
    }
}

fn assert_overloaded(answer: &Answer, reason: &str) {
    match answer {
        Err(Error::Overloaded {
            reason: got,
            retry_after,
        }) => {
            assert_eq!(got.as_str(), reason);
            assert!(
                retry_after.is_some_and(|r| r >= Duration::from_secs(1)),
                "{retry_after:?}"
            );
        }
        other => panic!("expected overloaded ({reason}), got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn critical_plus_is_served_first_and_evicts_the_lowest_from_a_full_queue() {
    let chaos = Fixture::new(AdmissionConfig::new(1, 2));
    let (running, _) = chaos.spawn("running", Priority::Critical, 100 * MS).await;
    let (search_1, _) = chaos.spawn("search-1", Priority::Sheddable, 100 * MS).await;
    let (search_2, search_2_ctx) = chaos.spawn("search-2", Priority::Sheddable, 100 * MS).await;
    assert_eq!(chaos.admission.queued(), 2, "the queue is full of sheddable work");

    let (payment, _) = chaos.spawn("payment", Priority::CriticalPlus, 100 * MS).await;
    let evicted = search_2.await.unwrap();
    assert_overloaded(&evicted, "evicted");
    assert_eq!(search_2_ctx.report.snapshot().code, Some(ErrorCode::Overloaded));
    assert_eq!(chaos.admission.queued_by_class(), [1, 0, 0, 1]);

    for call in [running, payment, search_1] {
        assert!(call.await.unwrap().is_ok());
    }
    assert_eq!(
        chaos.seen.started(),
        ["running", "payment", "search-1"],
        "the payment was queued last and served first; the evicted search never ran"
    );
}

#[tokio::test(start_paused = true)]
async fn the_queue_serves_higher_classes_first_and_evicts_the_lowest_class() {
    let chaos = Fixture::new(AdmissionConfig::new(1, 3));
    let (running, _) = chaos.spawn("running", Priority::Critical, 100 * MS).await;
    let (plus, _) = chaos
        .spawn("sheddable-plus", Priority::SheddablePlus, 100 * MS)
        .await;
    let (lowest, _) = chaos.spawn("sheddable", Priority::Sheddable, 100 * MS).await;
    let (critical, _) = chaos.spawn("critical", Priority::Critical, 100 * MS).await;
    let (payment, _) = chaos.spawn("payment", Priority::CriticalPlus, 100 * MS).await;
    assert_overloaded(&lowest.await.unwrap(), "evicted");

    // A full queue with nothing below the newcomer refuses the newcomer.
    let (refused, ctx) = chaos
        .call("late-search", Priority::Sheddable, Duration::from_secs(60))
        .await;
    assert_overloaded(&refused, "queue_full");
    assert_eq!(ctx.report.snapshot().code, Some(ErrorCode::Overloaded));

    for call in [running, plus, critical, payment] {
        assert!(call.await.unwrap().is_ok());
    }
    assert_eq!(
        chaos.seen.started(),
        ["running", "payment", "critical", "sheddable-plus"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadline_that_cannot_cover_the_expected_wait_is_shed_at_once() {
    let config = AdmissionConfig::new(1, 10).with_typical_latency(100 * MS);
    let chaos = Fixture::new(config);
    let (running, _) = chaos.spawn("running", Priority::Critical, 100 * MS).await;
    let mut waiting = Vec::new();
    for n in 0..3 {
        let name = format!("payment-{n}");
        waiting.push(chaos.spawn(&name, Priority::CriticalPlus, 100 * MS).await.0);
    }

    // Three of a higher class ahead, one slot, 100 ms per call: a slot in about 400 ms, done in about 500 ms.
    let asked = clock::now();
    let (shed, ctx) = chaos.call("hurried", Priority::Critical, 300 * MS).await;
    assert_overloaded(&shed, "deadline_too_short");
    assert_eq!(clock::now(), asked, "shed at once, without waiting");
    assert_eq!(ctx.report.snapshot().code, Some(ErrorCode::Overloaded));
    assert_eq!(chaos.admission.queued(), 3);

    // The same call with time enough waits its turn and runs.
    let (request, _) = Fixture::request("patient", Priority::Critical, 600 * MS, 100 * MS);
    let patient = chaos.service.clone().oneshot(request).await.unwrap();
    assert_eq!(patient.body(), "patient");
    assert!(running.await.unwrap().is_ok());
    for call in waiting {
        assert!(call.await.unwrap().is_ok());
    }
    assert!(!chaos.seen.started().contains(&"hurried".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_queued_call_whose_deadline_passes_is_answered_and_never_runs() {
    let chaos = Fixture::new(AdmissionConfig::new(1, 2));
    let (running, _) = chaos
        .spawn("running", Priority::Critical, Duration::from_secs(10))
        .await;
    let start = clock::now();
    let (request, ctx) = Fixture::request(
        "too-late",
        Priority::CriticalPlus,
        Duration::from_secs(1),
        10 * MS,
    );
    let answer = chaos.service.clone().oneshot(request).await;
    let waited = clock::now().saturating_duration_since(start);

    let Err(Error::DeadlineExceeded(exceeded)) = answer else {
        panic!("expected deadline_exceeded, got {answer:?}");
    };
    // It stops waiting once what is left cannot hold an attempt: 1 s - 50 ms reserve - 50 ms minimum attempt.
    assert!(waited > 900 * MS && waited <= 901 * MS, "{waited:?}");
    assert!(
        exceeded.remaining < exceeded.reserve + exceeded.min_attempt,
        "{exceeded}"
    );
    assert_eq!(ctx.report.snapshot().code, Some(ErrorCode::DeadlineExceeded));
    assert_eq!(chaos.admission.queued(), 0, "its waiter left the queue");

    assert!(running.await.unwrap().is_ok());
    assert_eq!(chaos.seen.started(), ["running"], "the late call never ran");
    assert_eq!(chaos.admission.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_queued_call_removes_its_waiter() {
    let chaos = Fixture::new(AdmissionConfig::new(1, 2));
    let (running, _) = chaos.spawn("running", Priority::Critical, 100 * MS).await;
    let (dropped, _) = chaos.spawn("dropped", Priority::CriticalPlus, 100 * MS).await;
    let (next, _) = chaos.spawn("next", Priority::Sheddable, 100 * MS).await;

    dropped.abort();
    assert!(dropped.await.unwrap_err().is_cancelled());
    assert_eq!(
        chaos.admission.queued_by_class(),
        [1, 0, 0, 0],
        "only `next` waits"
    );

    assert!(running.await.unwrap().is_ok());
    assert_eq!(next.await.unwrap().unwrap().body(), "next");
    assert_eq!(
        chaos.seen.started(),
        ["running", "next"],
        "the freed slot went to the next waiter"
    );
    assert_eq!((chaos.admission.in_flight(), chaos.admission.queued()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_queued_call_abandons_its_wait_at_once() {
    let chaos = Fixture::new(AdmissionConfig::new(1, 2));
    let (running, _) = chaos
        .spawn("running", Priority::Critical, Duration::from_secs(5))
        .await;
    let (waiting, ctx) = chaos.spawn("cancelled", Priority::Critical, 100 * MS).await;
    let at = clock::now();
    ctx.cancel.cancel();
    assert!(matches!(waiting.await.unwrap(), Err(Error::Cancelled)));
    assert_eq!(clock::now(), at);
    assert_eq!(
        ctx.report.snapshot().code,
        None,
        "the caller's own cancellation is no refusal"
    );
    assert_eq!(chaos.admission.queued(), 0);
    assert!(running.await.unwrap().is_ok());
    assert_eq!(chaos.seen.started(), ["running"]);
}

/// A seeded xorshift: the latencies and classes of the load test.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[tokio::test(start_paused = true)]
async fn the_concurrency_limit_is_never_exceeded() {
    const LIMIT: usize = 4;
    let chaos = Fixture::new(AdmissionConfig::new(LIMIT, 100));
    let mut seed = 0x5eed_u64;
    let mut calls = Vec::new();
    for n in 0..100 {
        let priority = Priority::ALL[(xorshift(&mut seed) % 4) as usize];
        let latency = Duration::from_millis(1 + xorshift(&mut seed) % 50);
        let (request, _) =
            Fixture::request(&format!("call-{n}"), priority, Duration::from_secs(600), latency);
        calls.push(tokio::spawn(chaos.service.clone().oneshot(request)));
        if n % 7 == 0 {
            tokio::time::advance(3 * MS).await;
        }
    }
    for call in calls {
        assert!(call.await.unwrap().is_ok());
    }
    assert_eq!(chaos.seen.started().len(), 100);
    assert_eq!(
        chaos.seen.most_at_once.load(Ordering::SeqCst),
        LIMIT,
        "full, never over"
    );
    assert_eq!((chaos.admission.in_flight(), chaos.admission.queued()), (0, 0));
}
