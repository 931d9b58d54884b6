//! Two "instances" — two sets of clients, each on its own registry of runs — on one shared store (in memory, the
//! `SharedState` semantics on the paused clock): a run's allowance spent on one is spent on the other, its
//! deadline holds on both, a deployment's limit is one limit; and with the store lost, each instance falls back
//! as declared (runs to its own view, limits to its share) and shares again once a heartbeat reaches the store.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use ballast::sharing::Sharing;
use ballast::tool::ToolClients;
use ballast::{
    Clients, LimitMode, Runs, clock, model::ModelClient, tool::ToolCall, transport::ServiceTransport,
};
use ballast_config::{Config, ServerConfig};
use ballast_core::{Deadline, StopReason};
use serde_json::json;
use support::BODY_LIMIT;
use support::chat::{Upstreams, call, first_turn, profile};
use support::shared::MemoryShared;

const CONFIG: &str = r#"
version = 1
[server]
default_timeout = "10s"
[run]
retry_allowance = 2
retry_allowance_per_call = 0.0
[[models]]
name = "agent"
deployments = [ { base_url = "http://primary/v1", model = "mock", limits = { requests_per_minute = 60, burst = "0s" } } ]
retry = { max_attempts = 3, base = "100ms", cap = "1s" }
[[tools]]
name = "lookup_order"
upstream = { method = "POST", url = "http://tools/tools/lookup_order" }
retry = { max_attempts = 3, base = "100ms", cap = "1s" }
"#;

/// One instance: its runs on `store`, its tools (upstream with `tool_faults`) and the `agent` route.
struct Instance {
    runs: Arc<Runs>,
    sharing: Arc<Sharing>,
    tools: ToolClients,
    model: ModelClient,
}

fn instance(store: &MemoryShared, tool_faults: &str, upstreams: &Upstreams) -> Instance {
    let config = Config::from_toml_str(CONFIG).expect("a valid config");
    let sharing = Arc::new(Sharing::new(Arc::new(store.clone())));
    let runs = Arc::new(Runs::of(&config.run).with_sharing(Arc::clone(&sharing)));
    let tools = (Clients::from_config(&config).runs(Arc::clone(&runs)))
        .build(ServiceTransport::new(ballast_chaos::router(profile(tool_faults))).with_body_limit(BODY_LIMIT))
        .expect("the tools build")
        .tools;
    let models = (Clients::from_config(&config).runs(Arc::clone(&runs)))
        .build(upstreams.transport())
        .expect("the route builds")
        .models;
    let model = models.get("agent").expect("the route").clone();
    Instance {
        runs,
        sharing,
        tools,
        model,
    }
}

fn lookup(op: &str) -> ToolCall {
    ToolCall::new(json!({"order_id": "1234", "op": op}))
}

const FAILING: &str = "[endpoints.lookup_order]\nerrors = { 503 = 1.0 }";

#[tokio::test(start_paused = true)]
async fn a_runs_allowance_spent_on_one_instance_is_spent_on_the_other() {
    let store = MemoryShared::default();
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let (a, b) = (
        instance(&store, FAILING, &upstreams),
        instance(&store, FAILING, &upstreams),
    );
    let error = (a.tools.get("lookup_order").unwrap())
        .call(lookup("op-a").run("run-1"))
        .await
        .expect_err("the tool fails");
    assert_eq!(error.report().attempts.len(), 3, "the run's two retries, on A");
    let error = (b.tools.get("lookup_order").unwrap())
        .call(lookup("op-b").run("run-1"))
        .await
        .expect_err("the tool fails");
    let report = error.report();
    assert_eq!(report.attempts.len(), 1, "none left for B: {report}");
    assert_eq!(report.stop, Some(StopReason::RunAllowanceExhausted), "{report}");
    assert_eq!(report.run_allowance_left, Some(0));
    // Another run on B has its own.
    let error = (b.tools.get("lookup_order").unwrap())
        .call(lookup("op-c").run("run-2"))
        .await
        .expect_err("the tool fails");
    assert_eq!(error.report().attempts.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_runs_deadline_given_on_one_instance_holds_on_the_other() {
    let store = MemoryShared::default();
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let (a, b) = (instance(&store, "", &upstreams), instance(&store, "", &upstreams));
    let server = ServerConfig::default();
    let now = clock::now();
    let given = Deadline::after(now, Duration::from_secs(2));
    a.runs.visit(None, "run-1", Some(given), &server, now).await;
    let (run, _) = b.runs.visit(None, "run-1", None, &server, now).await;
    assert_eq!(run.deadline().map(|d| d.instant()), Some(given.instant()));
    // A later deadline offered on B changes nothing for A's next visitor; an earlier one reaches A.
    let earlier = Deadline::after(now, Duration::from_secs(1));
    b.runs.visit(None, "run-1", Some(earlier), &server, now).await;
    let c = instance(&store, "", &upstreams);
    let (run, _) = c.runs.visit(None, "run-1", None, &server, now).await;
    assert_eq!(run.deadline().map(|d| d.instant()), Some(earlier.instant()));
    // B's call without a deadline of its own ends with the run's.
    tokio::time::advance(Duration::from_millis(1500)).await;
    let error = (b.tools.get("lookup_order").unwrap())
        .call(lookup("late").run("run-1"))
        .await
        .expect_err("past the run's deadline");
    assert_eq!(
        error.report().code,
        Some(ballast_core::ErrorCode::DeadlineExceeded),
        "{}",
        error.report()
    );
}

/// Through the clients alone (no gateway visiting the run first): a tool call's own deadline on A becomes the
/// run's in the store, and B's call of the run, with none of its own, ends with it.
#[tokio::test(start_paused = true)]
async fn a_deadline_a_client_call_gives_its_run_holds_for_the_runs_calls_on_another_instance() {
    let store = MemoryShared::default();
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let (a, b) = (instance(&store, "", &upstreams), instance(&store, "", &upstreams));
    let given = Deadline::after(clock::now(), Duration::from_secs(2));
    (a.tools.get("lookup_order").unwrap())
        .call(lookup("first").run("run-9").deadline(given))
        .await
        .expect("A's call");
    tokio::time::advance(Duration::from_millis(2500)).await;
    let error = (b.tools.get("lookup_order").unwrap())
        .call(lookup("second").run("run-9"))
        .await
        .expect_err("past the run's deadline, though B's own default is 10 s");
    assert_eq!(
        error.report().code,
        Some(ballast_core::ErrorCode::DeadlineExceeded),
        "{}",
        error.report()
    );
    assert!(
        error.report().attempts.is_empty(),
        "nothing sent: {}",
        error.report()
    );
}

#[tokio::test(start_paused = true)]
async fn a_deployment_limit_is_one_limit_for_both_instances() {
    let store = MemoryShared::default();
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let (a, b) = (instance(&store, "", &upstreams), instance(&store, "", &upstreams));
    // 60 a minute, no burst: A's call takes this second's slot; B's, with 500 ms to live, cannot wait for the next.
    a.model
        .complete(call(&first_turn("op-1")))
        .await
        .expect("A's call");
    let error = b
        .model
        .complete(
            call(&first_turn("op-2")).deadline(Deadline::after(clock::now(), Duration::from_millis(500))),
        )
        .await
        .expect_err("no slot in time");
    assert_eq!(
        error.report().code,
        Some(ballast_core::ErrorCode::Overloaded),
        "{}",
        error.report()
    );
    // With 3 s to live, B waits for its slot and is served.
    let started = clock::now();
    b.model
        .complete(call(&first_turn("op-3")).deadline(Deadline::after(started, Duration::from_secs(3))))
        .await
        .expect("served after its wait");
    assert!(clock::now().saturating_duration_since(started) >= Duration::from_millis(900));
    assert_eq!(upstreams.seen().len(), 2, "the refused call sent nothing");
    assert_eq!(b.model.limits(0).unwrap().mode(), LimitMode::Shared);
}

#[tokio::test(start_paused = true)]
async fn with_the_store_lost_an_instance_takes_its_share_and_shares_again_after_a_heartbeat() {
    let store = MemoryShared::default();
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let (a, b) = (
        instance(&store, FAILING, &upstreams),
        instance(&store, FAILING, &upstreams),
    );
    a.sharing.heartbeat().await;
    b.sharing.heartbeat().await;
    assert_eq!(b.sharing.instances(), 2);
    store.lose(true);
    // A run's call on B falls back to B's own view: its local allowance, no error for being unshared.
    let error = (b.tools.get("lookup_order").unwrap())
        .call(lookup("op-b").run("run-1"))
        .await
        .expect_err("the tool fails");
    assert_eq!(
        error.report().attempts.len(),
        3,
        "B's local allowance: {}",
        error.report()
    );
    assert!(!b.sharing.is_reachable());
    let limits = b.model.limits(0).unwrap();
    assert_eq!(limits.mode(), LimitMode::Share);
    // Its share: 30 a minute, one every 2 s; B's first call goes, a second within 1.5 s does not.
    b.model
        .complete(call(&first_turn("op-1")))
        .await
        .expect("the first");
    let error = b
        .model
        .complete(
            call(&first_turn("op-2")).deadline(Deadline::after(clock::now(), Duration::from_millis(1500))),
        )
        .await
        .expect_err("beyond the share");
    assert_eq!(error.report().code, Some(ballast_core::ErrorCode::Overloaded));
    store.lose(false);
    b.sharing.heartbeat().await;
    assert!(b.sharing.is_reachable());
    assert_eq!(limits.mode(), LimitMode::Shared);
    // Without the gateway's heartbeat (a library user's clients), a call finds the store again itself, a second
    // or more after the last try.
    store.lose(true);
    let _ = a.model.complete(call(&first_turn("op-4"))).await;
    assert!(!a.sharing.is_reachable());
    store.lose(false);
    tokio::time::advance(Duration::from_secs(2)).await;
    let _ = a.model.complete(call(&first_turn("op-5"))).await;
    assert!(a.sharing.is_reachable(), "found again by a call");
    let _ = &a.runs;
}

/// A store answer slower than the patience decides that attempt on the instance's share without losing the store
/// (a busy PostgreSQL must not flip every instance's mode), and the decision is counted: each may send beyond what
/// the store counts, and an operator sees how often.
#[test]
fn a_slow_store_answer_is_decided_on_the_share_and_counted() {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let store = MemoryShared::default();
            let upstreams = Upstreams::new(&[("primary", profile(""))]);
            let a = instance(&store, "", &upstreams);
            store.slow(true);
            a.model
                .complete(call(&first_turn("op-1")))
                .await
                .expect("sent on the share");
            assert!(a.sharing.is_reachable(), "slow is not lost");
            store.slow(false);
            a.model
                .complete(
                    call(&first_turn("op-2")).deadline(Deadline::after(clock::now(), Duration::from_secs(3))),
                )
                .await
                .expect("decided in the store again");
            assert_eq!(a.model.limits(0).unwrap().mode(), LimitMode::Shared);
            assert_eq!(upstreams.seen().len(), 2);
        });
    });
    let unshared: Vec<_> = (snapshotter.snapshot().into_vec().into_iter())
        .filter(|(key, ..)| key.key().name() == "ballast_limit_unshared_total")
        .map(|(key, _, _, value)| {
            (
                key.key()
                    .labels()
                    .map(|l| l.value().to_owned())
                    .collect::<Vec<_>>(),
                value,
            )
        })
        .collect();
    assert_eq!(unshared.len(), 1, "{unshared:?}");
    assert!(unshared[0].0.contains(&"share".to_owned()), "{unshared:?}");
    assert_eq!(
        unshared[0].1,
        metrics_util::debugging::DebugValue::Counter(1),
        "{unshared:?}"
    );
}
