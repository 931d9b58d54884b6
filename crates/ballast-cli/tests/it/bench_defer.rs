//! `ballast bench flash-sale --defer`: the gateway's agents let their side effects wait, and the bench drains what
//! the gateway deferred. Once as a user runs it (the real command, its JSON), and once on a scripted fault that
//! makes a deferral certain — the bench's library driving the real `ballast serve`.

use ballast_bench::flash_sale::{
    Arrivals, Dead, DeferredState, ModelApi, Options, Scenario, Summary, ThroughGateway, run,
};
use ballast_chaos::{Script, ScriptStep};
use serde_json::Value;

use crate::bench::one_bench_at_a_time;
use crate::support::{ballast, text};

/// Every deferred side effect ends in exactly one way, and every conversation is a success, a failure or
/// deferred.
fn accounts_for_everything(summary: &Value) {
    let deferred = &summary["deferred"];
    let count = |key: &str| {
        deferred[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {summary}"))
    };
    assert_eq!(
        count("deferred"),
        count("completed")
            + count("expired")
            + count("failed")
            + count("outcome_unknown")
            + count("unfinished"),
        "{summary}"
    );
    let failures: u64 = summary["failures"]
        .as_object()
        .expect("failures")
        .values()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(
        summary["conversations"].as_u64(),
        Some(summary["succeeded"].as_u64().unwrap_or_default() + failures + count("deferred")),
        "{summary}"
    );
    assert_eq!(summary["duplicates"], 0, "{summary}");
    assert_eq!(count("acknowledged_lost"), 0, "{summary}");
}

/// A short flash sale with `--defer` (24 agents, two seeds, a twentieth of real time), its deadline cut to 5 s so
/// that some refunds and payments meet a gateway with no time left for them: what it defers is drained, every
/// deferred one ends in exactly one way, and nothing is paid twice.
#[test]
fn a_short_flash_sale_with_defer_accounts_for_every_deferred_side_effect() {
    let _bench = one_bench_at_a_time();
    let out = ballast(&[
        "bench",
        "flash-sale",
        "--strategies",
        "gateway",
        "--defer",
        "--agents",
        "24",
        "--time-scale",
        "0.05",
        "--seed",
        "5..6",
        "--deadline",
        "5s",
        "--json",
    ]);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let reports: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let pooled = &reports[0]["pooled"][0];
    assert_eq!(pooled["strategy"], "gateway (defer)", "{pooled}");
    assert_eq!(pooled["conversations"], 48, "{pooled}");
    accounts_for_everything(pooled);
    for seed in reports[0]["per_seed"].as_array().expect("per seed") {
        accounts_for_everything(&seed["summaries"][0]);
    }
}

/// One refund certain to be deferred, by the run's retry allowance: its lookup takes three retries and its refund
/// needs three more (each answered 503 three times, then done), which the allowance of a four-call run (3 + 2)
/// does not hold — so the gateway answers `202 Accepted` after the refund's third try. Its deferred attempt runs
/// outside the run, under the tool's own `max_attempts`, and goes through on its fourth try (the upstream counts
/// tries by `ballast-attempt`, which starts again at 1 there). The conversation counts as deferred — neither a
/// success nor a failure —, the drain reads the operation completed with its time, and the upstream executed the
/// refund once.
#[test]
fn a_deferred_refund_is_drained_completed_and_paid_once() {
    let _bench = one_bench_at_a_time();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let strategy = ThroughGateway::new(env!("CARGO_BIN_EXE_ballast").into(), ModelApi::Mixed).defer(true);
    let unavailable_then_ok = |endpoint: &str| Script {
        endpoint: endpoint.into(),
        op: "fs-7-0".into(),
        steps: vec![
            ScriptStep::Status(503),
            ScriptStep::Status(503),
            ScriptStep::Status(503),
            ScriptStep::Ok,
        ],
    };
    // A healthy upstream (its outage comes 10 s in, after these conversations), every agent at once.
    let options = Options {
        scenario: Scenario::DeadUpstream(Dead::Unavailable),
        arrivals: Some(Arrivals::Burst),
        agents: 3,
        seed: 7,
        time_scale: 0.1,
        scripts: vec![
            unavailable_then_ok("lookup_order"),
            unavailable_then_ok("create_refund"),
        ],
        ..Options::default()
    };
    let finished = runtime
        .block_on(run(&options, &strategy, &|| {}))
        .expect("the run");
    assert_eq!(finished.strategy, "gateway (defer)");
    let outcome = &finished.records[0].outcome;
    assert!(
        outcome.deferred.is_some() && !outcome.succeeded && outcome.failure.is_none(),
        "{outcome:?}"
    );
    for record in &finished.records[1..] {
        assert!(record.outcome.succeeded, "{record:?}");
    }
    let drained = finished.deferred.as_ref().expect("drained");
    let [end] = &drained.ends[..] else {
        panic!("one deferred operation: {drained:?}")
    };
    assert_eq!(Some(&end.key), outcome.deferred.as_ref());
    assert_eq!(end.state, DeferredState::Completed, "{end:?}");
    assert_eq!(end.op.as_deref(), Some("fs-7-0"));
    assert!(end.took.is_some(), "{end:?}");
    assert_eq!(finished.duplicates, 0);
    assert_eq!(drained.acknowledged_lost, 0, "the ledger holds it");
    let summary = Summary::of(std::slice::from_ref(&finished));
    let deferred = summary.deferred.expect("the summary's deferred");
    assert_eq!((deferred.deferred, deferred.completed), (1, 1));
    assert_eq!((summary.succeeded, summary.failures.len()), (2, 0));
}

/// `--defer` shapes the gateway's agents: refused, saying why, where they do not run or cannot ask.
#[test]
fn defer_is_refused_without_the_gateway_or_with_tools_over_mcp() {
    for (args, expected) in [
        (
            &["--defer", "--strategies", "naive,ballast"][..],
            "--defer asks Ballast's gateway to defer the agents' side effects: it needs the gateway strategy",
        ),
        (&["--defer", "--tools", "mcp"][..], "--defer needs --tools http"),
    ] {
        let mut all = vec!["bench", "flash-sale"];
        all.extend_from_slice(args);
        let out = ballast(&all);
        assert!(!out.status.success(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
