//! Issue 4, test 5: the breaker layer in front of the chaos upstream (in process, paused time, seeded).
//!
//! The breaker opens at its consecutive-failure threshold, sends nothing while open, lets at most the probe
//! limit through half-open, closes after the success threshold; 4xx answers never open it; a dropped probe frees
//! its permit.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use ballast::{
    Error, clock,
    layer::{BreakerLayer, BreakerService},
    transport::ServiceTransport,
};
use ballast_chaos::ScriptStep;
use ballast_core::{BreakerConfig, BreakerState, CircuitBreaker};
use serde_json::json;
use support::{BODY_LIMIT, requests, scripted, slow, tool_request};
use tower::{Layer, ServiceExt};

/// Every chaos answer of these tests takes this long (scripted steps answer at once).
const LATENCY: Duration = Duration::from_secs(1);

/// `lookup_order` answers after `LATENCY`, except operation `down`, scripted to answer 503 five times.
fn router() -> Router {
    let down = [ScriptStep::Status(503); 5];
    ballast_chaos::router(scripted("lookup_order", slow(LATENCY), &[("down", &down)]))
}

struct Fixture {
    breaker: Arc<CircuitBreaker>,
    service: BreakerService<ServiceTransport<Router>>,
    router: Router,
}

impl Fixture {
    /// A breaker opening on 5 failures in a row, `probes` at once half-open, closing after `successes`.
    fn new(probes: u32, successes: u32) -> Self {
        let config = BreakerConfig::builder()
            .consecutive_failures(5)
            .consecutive_spread(Duration::ZERO)
            .half_open_probes(probes)
            .success_threshold(successes)
            .build()
            .unwrap();
        let breaker = Arc::new(CircuitBreaker::seeded(config, Some(42)));
        let router = router();
        let transport = ServiceTransport::new(router.clone()).with_body_limit(BODY_LIMIT);
        let service = BreakerLayer::new(Arc::clone(&breaker)).layer(transport);
        Fixture {
            breaker,
            service,
            router,
        }
    }

    /// `POST /tools/lookup_order` for operation `op` (with no `order_id` when `valid` is false: a 400).
    async fn call(&self, op: &str, valid: bool) -> Result<http::Response<ballast::Body>, Error> {
        let args = if valid {
            json!({"op": op, "order_id": "A-1001"})
        } else {
            json!({"op": op})
        };
        self.service
            .clone()
            .oneshot(tool_request("lookup_order", &args))
            .await
    }

    /// The requests that reached the upstream, by its own count.
    async fn sent(&self) -> u64 {
        requests(&self.router, "lookup_order").await
    }

    fn state(&self) -> BreakerState {
        self.breaker.state(clock::now())
    }

    /// Five 503s in a row: the breaker opens on the fifth.
    async fn open(&self) {
        for n in 1..=5 {
            assert_eq!(
                self.state(),
                BreakerState::Closed,
                "still closed before failure {n}"
            );
            let answer = self.call("down", true).await.unwrap();
            assert_eq!(answer.status(), 503);
        }
        assert_eq!(self.state(), BreakerState::Open);
    }

    /// Waits out the open time (jittered by the seeded breaker): the next look finds it half-open.
    async fn wait_out_open_time(&self) {
        let left = self.breaker.open_remaining(clock::now()).expect("open");
        tokio::time::advance(left).await;
        assert_eq!(self.state(), BreakerState::HalfOpen);
    }

    /// Starts a probe in its own task and lets it take its permit.
    async fn spawn_probe(
        &self,
        op: &str,
    ) -> tokio::task::JoinHandle<Result<http::Response<ballast::Body>, Error>> {
        let before = self.breaker.snapshot(clock::now()).probes_in_flight;
        let service = self.service.clone();
        let request = tool_request("lookup_order", &json!({"op": op, "order_id": "A-1001"}));
        let probe = tokio::spawn(service.oneshot(request));
        for _ in 0..100 {
            if self.breaker.snapshot(clock::now()).probes_in_flight > before {
                return probe;
            }
            tokio::task::yield_now().await;
        }
        panic!("the probe never took a permit");
    }
}

#[tokio::test(start_paused = true)]
async fn opens_at_the_threshold_and_sends_nothing_while_open() {
    let chaos = Fixture::new(3, 3);
    chaos.open().await;
    assert_eq!(chaos.sent().await, 5);

    let (shortest, longest) = chaos.breaker.config().open_time_bounds();
    for _ in 0..10 {
        match chaos.call("after-open", true).await {
            Err(Error::CircuitOpen {
                retry_in: Some(retry_in),
            }) => {
                assert!(retry_in >= shortest && retry_in <= longest, "{retry_in:?}");
            }
            other => panic!("expected a fail-fast CircuitOpen with the time left, got {other:?}"),
        }
    }
    let left = chaos.breaker.open_remaining(clock::now()).unwrap();
    tokio::time::advance(left - Duration::from_millis(1)).await;
    match chaos.call("almost", true).await {
        Err(Error::CircuitOpen { retry_in }) => assert_eq!(retry_in, Some(Duration::from_millis(1))),
        other => panic!("still open 1 ms before the end, got {other:?}"),
    }
    assert_eq!(chaos.sent().await, 5, "nothing reached the upstream while open");
}

#[tokio::test(start_paused = true)]
async fn half_open_lets_at_most_the_probe_limit_through_and_closes_after_the_success_threshold() {
    // Two probes at once, three successes to close: the probes go through in waves.
    let chaos = Fixture::new(2, 3);
    chaos.open().await;
    chaos.wait_out_open_time().await;

    let first = chaos.spawn_probe("probe-1").await;
    let second = chaos.spawn_probe("probe-2").await;
    match chaos.call("probe-3", true).await {
        Err(Error::CircuitOpen { retry_in: None }) => {}
        other => panic!("a third probe while two are in flight must be refused, got {other:?}"),
    }
    assert_eq!(chaos.sent().await, 7, "five failures and two probes");

    tokio::time::advance(LATENCY).await;
    for probe in [first, second] {
        assert_eq!(probe.await.unwrap().unwrap().status(), 200);
    }
    assert_eq!(
        chaos.state(),
        BreakerState::HalfOpen,
        "two successes are not three"
    );
    assert_eq!(chaos.breaker.snapshot(clock::now()).probe_successes, 2);

    let third = chaos.call("probe-3", true).await.unwrap();
    assert_eq!(third.status(), 200);
    assert_eq!(chaos.state(), BreakerState::Closed);
    assert_eq!(chaos.sent().await, 8);
}

#[tokio::test(start_paused = true)]
async fn client_errors_never_open_it() {
    let chaos = Fixture::new(3, 3);
    for n in 0..20 {
        let answer = chaos.call(&format!("bad-{n}"), false).await.unwrap();
        assert_eq!(answer.status(), 400, "no order_id: the tool refuses the request");
    }
    let snapshot = chaos.breaker.snapshot(clock::now());
    assert_eq!(snapshot.state, BreakerState::Closed);
    assert_eq!((snapshot.consecutive_failures, snapshot.window_failures), (0, 0));
    assert!(snapshot.window_calls > 0, "counted, as successes");
    assert_eq!(chaos.sent().await, 20);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_frees_its_permit() {
    let chaos = Fixture::new(1, 1);
    chaos.open().await;
    chaos.wait_out_open_time().await;

    let abandoned = chaos.spawn_probe("abandoned").await;
    assert!(matches!(
        chaos.call("refused", true).await,
        Err(Error::CircuitOpen { retry_in: None })
    ));
    // The caller goes away mid-call: its future (and its permit) is dropped before the upstream answers.
    tokio::time::advance(LATENCY / 2).await;
    abandoned.abort();
    assert!(abandoned.await.unwrap_err().is_cancelled());
    assert_eq!(chaos.breaker.snapshot(clock::now()).probes_in_flight, 0);
    assert_eq!(
        chaos.state(),
        BreakerState::HalfOpen,
        "the dropped probe counted nothing"
    );

    let next = chaos.call("next-probe", true).await.unwrap();
    assert_eq!(next.status(), 200);
    assert_eq!(chaos.state(), BreakerState::Closed);
    assert_eq!(
        chaos.sent().await,
        7,
        "five failures, the abandoned probe and the next one"
    );
}
