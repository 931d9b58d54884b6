//! The flash-sale bench's short run (issue 12), on a clock twenty times real time: the trap is really there — the
//! naive agent refunds twice after a lost answer — and Ballast never does, and never ends a conversation past
//! its deadline. A scripted commit-then-lose makes the trap certain whatever the seed draws.

use std::time::Duration;

use ballast_bench::flash_sale::{Naive, NaiveMcp, Options, Scenario, Strategy, Summary, WithBallast, run};
use ballast_chaos::{Script, ScriptStep};

/// The short run: 40 agents at once, 30 s deadlines at a twentieth of real time.
fn options() -> Options {
    // The refund of agent 0 and the payment of agent 2: their first try executes and its answer is lost.
    let lost = |endpoint: &str, op: &str| Script {
        endpoint: endpoint.into(),
        op: op.into(),
        steps: vec![ScriptStep::CommitThenLose],
    };
    Options {
        scenario: Scenario::FlashSale,
        agents: 40,
        seed: 3,
        time_scale: 0.05,
        scripts: vec![lost("create_refund", "fs-3-0"), lost("process_payment", "fs-3-2")],
        ..Options::default()
    }
}

async fn summary(strategy: &dyn Strategy) -> Summary {
    let finished = run(&options(), strategy, &|| {}).await.expect("the run");
    assert_eq!(finished.records.len(), 40);
    Summary::of(&[finished])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ballast_never_doubles_a_side_effect_nor_overruns_and_naive_does_double() {
    let ballast = summary(&WithBallast).await;
    let naive = summary(&Naive).await;
    println!(
        "{}",
        ballast_bench::flash_sale::table(&[naive.clone(), ballast.clone()])
    );
    assert_eq!(ballast.duplicates, 0, "{ballast:#?}");
    assert_eq!(ballast.overruns, 0, "{ballast:#?}");
    assert!(naive.duplicates >= 1, "the trap is there: {naive:#?}");
    // Reported in real time: within the 30 s deadline and its slack (50 ms at a twentieth of real time).
    assert!(
        ballast.max <= options().deadline + Duration::from_millis(50).div_f64(0.05),
        "{ballast:#?}"
    );
}

/// The naive agents with their tools on the upstream's MCP server (issue 32): they hold their conversations over
/// MCP, and a call re-issued after its answer was lost — a new JSON-RPC request, no key — refunds twice, as over
/// HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_naive_mcp_client_converses_over_mcp_and_doubles_a_lost_refund() {
    let naive_mcp = summary(&NaiveMcp).await;
    println!(
        "{}",
        ballast_bench::flash_sale::table(std::slice::from_ref(&naive_mcp))
    );
    assert!(
        naive_mcp.succeeded >= 30,
        "the conversations go through over MCP: {naive_mcp:#?}"
    );
    assert!(
        naive_mcp.duplicates >= 1,
        "the trap is there over MCP too: {naive_mcp:#?}"
    );
}
