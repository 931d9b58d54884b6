//! `ballast bench flash-sale` and `ballast bench overhead` as a user runs them: the real binary, short runs, their
//! JSON (and the flash sale's chart).

use crate::support;

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::Value;
use support::process::{Running, alive, children, within};
use support::{ballast, text};

/// The longest any bounded wait of these tests lasts.
const PATIENCE: Duration = Duration::from_secs(20);

/// One bench at a time: each times what it measures — a flash sale at a twentieth of real time, an overhead load of
/// 0.2 s with its processes pinned to the CPUs — and two at once on a two-CPU machine starve each other's gateways
/// into missed deadlines and empty loads. Held for the whole of a test that runs a bench.
pub(crate) fn one_bench_at_a_time() -> MutexGuard<'static, ()> {
    static BENCH: Mutex<()> = Mutex::new(());
    BENCH.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A port nobody listens on now (the system's choice, released at once).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("an address").port()
}

/// The flash sale as CI runs it: short (24 agents, two seeds, a twentieth of real time: a gateway built for tests
/// and a busy machine still have the time they need) and every default strategy —
/// naive code, the `ballast` crate in process, agents through `ballast serve` — on the same faults. Seeds 5 and 6
/// each hold a refund whose answer is lost after it committed: the naive code refunds it again, Ballast never.
#[test]
fn a_short_flash_sale_runs_every_strategy_and_only_the_naive_code_pays_twice() {
    let _bench = one_bench_at_a_time();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let chart = dir.path().join("flash-sale.svg");
    let out = ballast(&[
        "bench",
        "flash-sale",
        "--agents",
        "24",
        "--time-scale",
        "0.05",
        "--seed",
        "5..6",
        "--json",
        "--chart",
        chart.to_str().expect("a UTF-8 path"),
    ]);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let reports: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let report = &reports[0];
    assert_eq!(report["scenario"], "flash-sale");
    assert_eq!(report["per_seed"].as_array().map(Vec::len), Some(2));
    let pooled = report["pooled"].as_array().expect("pooled over the two seeds");
    let strategies: Vec<&str> = pooled.iter().filter_map(|s| s["strategy"].as_str()).collect();
    assert_eq!(strategies, ["naive", "ballast", "gateway"]);
    for summary in &pooled[1..] {
        assert_eq!(summary["conversations"], 48, "{summary}");
        assert_eq!(summary["duplicates"], 0, "{summary}");
        assert_eq!(summary["overruns"], 0, "{summary}");
    }
    assert!(pooled[0]["duplicates"].as_u64() >= Some(1), "{}", pooled[0]);
    assert!(
        pooled[2]["succeeded"].as_u64() >= Some(44),
        "through the gateway as in process: {}",
        pooled[2]
    );
    let svg = std::fs::read_to_string(&chart).expect("the chart was written");
    assert!(svg.starts_with("<svg") && svg.contains("gateway: succeeded"));
}

/// The flash sale over MCP (issue 32), short as above but at a tenth of real time (a gateway built for tests does
/// more work per call over MCP, and the tests share the machine): the gateway's agents call `tools/call` at its
/// `/mcp` in front of the upstream's MCP server, and the naive agents call that MCP server directly as tutorials
/// do. Both hold their conversations over MCP; the gateway never pays twice, and the naive MCP client re-issues the
/// refunds of seeds 5 and 6 whose answers are lost after they committed.
#[test]
fn a_short_flash_sale_over_mcp_runs_the_gateways_agents_and_the_naive_mcp_client() {
    let _bench = one_bench_at_a_time();
    let out = ballast(&[
        "bench",
        "flash-sale",
        "--agents",
        "24",
        "--time-scale",
        "0.1",
        "--seed",
        "5..6",
        "--tools",
        "mcp",
        "--strategies",
        "gateway,naive-mcp",
        "--json",
    ]);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let reports: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let pooled = reports[0]["pooled"]
        .as_array()
        .expect("pooled over the two seeds");
    let strategies: Vec<&str> = pooled.iter().filter_map(|s| s["strategy"].as_str()).collect();
    assert_eq!(strategies, ["gateway (mcp)", "naive-mcp"]);
    let (gateway, naive_mcp) = (&pooled[0], &pooled[1]);
    for summary in [gateway, naive_mcp] {
        assert_eq!(summary["conversations"], 48, "{summary}");
        assert!(
            summary["succeeded"].as_u64() >= Some(24),
            "conversations go through over MCP: {summary}"
        );
    }
    assert_eq!(gateway["duplicates"], 0, "{gateway}");
    assert!(naive_mcp["duplicates"].as_u64() >= Some(1), "{naive_mcp}");
}

/// `--against` with something real: a second `ballast serve`, configured as a user configures the gateway they
/// already run (the model `agent` to the bench's upstream, at the address `--upstream-listen` fixes), and the chaos
/// upstream itself (agents with no gateway at all).
#[test]
fn against_runs_the_agents_through_another_gateway_on_the_same_faults() {
    let _bench = one_bench_at_a_time();
    let port = free_port();
    let upstream = format!("127.0.0.1:{port}");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("other.toml");
    std::fs::write(
        &config,
        format!(
            "version = 1\n[store]\nurl = \"sqlite://{}/other.db\"\n[[models]]\nname = \"agent\"\n\
             deployments = [ {{ base_url = \"http://{upstream}/v1\", model = \"mock\" }} ]\n",
            dir.path().display()
        ),
    )
    .expect("the config is written");
    let mut other = Running::start(&[
        "serve",
        "--config",
        config.to_str().expect("a UTF-8 path"),
        "--listen",
        "127.0.0.1:0",
    ]);
    let first = other.lines_until(PATIENCE, |line| line.contains("http://"));
    let other_url = first[0]
        .rsplit("http://")
        .next()
        .expect("an address")
        .trim()
        .to_owned();
    for (url, name) in [
        (format!("http://{other_url}/v1"), "a second ballast serve"),
        (format!("http://{upstream}/v1"), "the upstream itself"),
    ] {
        let out = ballast(&[
            "bench",
            "flash-sale",
            "--agents",
            "12",
            "--time-scale",
            "0.05",
            "--seed",
            "5",
            "--strategies",
            "against",
            "--against",
            &url,
            "--upstream-listen",
            &upstream,
            "--json",
        ]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains("\"agent\"") && stderr.contains(&format!("http://{upstream}/v1")),
            "it says what the other gateway must route where: {stderr}"
        );
        let reports: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        let summaries = reports[0]["per_seed"][0]["summaries"]
            .as_array()
            .expect("summaries");
        let against = &summaries[0];
        assert_eq!(against["strategy"], "against", "{name}");
        assert_eq!(against["conversations"], 12, "{name}: {against}");
        assert!(against["succeeded"].as_u64() >= Some(10), "{name}: {against}");
        assert_eq!(
            against["duplicates"], 0,
            "{name}: a side effect's key is kept across the SDK's retries: {against}"
        );
    }
    other.signal("-TERM");
    assert_eq!(other.wait_for_exit(PATIENCE), Some(0));
}

/// An interrupted bench leaves nothing behind: the gateway it started is stopped before it exits.
#[test]
fn an_interrupted_bench_stops_the_gateway_it_started() {
    let _bench = one_bench_at_a_time();
    let mut bench = Running::start(&[
        "bench",
        "flash-sale",
        "--strategies",
        "gateway",
        "--agents",
        "10",
        "--time-scale",
        "2",
    ]);
    let mut gateways = Vec::new();
    let started = within(PATIENCE, || {
        gateways = children(bench.pid())
            .into_iter()
            .filter(|(_, command)| command.contains(" serve "))
            .map(|(pid, _)| pid)
            .collect();
        !gateways.is_empty()
    });
    assert!(
        started,
        "the bench started no gateway; stderr:\n{}",
        bench.stderr()
    );
    bench.signal("-INT");
    assert_eq!(bench.wait_for_exit(PATIENCE), Some(1), "{}", bench.stderr());
    assert!(bench.stderr().contains("stopped by SIGINT"), "{}", bench.stderr());
    for pid in gateways {
        assert!(!alive(pid), "the gateway {pid} outlived the bench");
    }
}

#[test]
fn bad_arguments_say_what_is_accepted() {
    for (args, expected) in [
        (&["--scenario", "dead-upstream:gone"][..], "dead-upstream:refused"),
        (&["--seed", "5..1"][..], "ends before it starts"),
        (
            &["--strategies", "magic"][..],
            "naive, ballast, gateway, naive-mcp, against",
        ),
        (&["--tools", "grpc"][..], "http, mcp"),
        (&["--strategies", "against"][..], "needs --against URL"),
        (&["--api", "soap"][..], "mixed, responses, chat"),
        (&["--time-scale", "0"][..], "positive"),
        (&["--arrivals", "flood"][..], "burst, ramp, poisson, steady"),
        (
            &["--instances", "2"][..],
            "needs --store redis://… or postgres://…",
        ),
        (
            &["--instances", "2", "--store", "sqlite://ballast.db"][..],
            "SQLite is one process",
        ),
        (
            &["--kill-one-at", "5"][..],
            "--kill-one-at needs --instances 2 or more",
        ),
        (
            &[
                "--instances",
                "2",
                "--store",
                "redis://127.0.0.1:6379",
                "--strategies",
                "naive",
            ][..],
            "which --strategies leaves out",
        ),
    ] {
        let mut all = vec!["bench", "flash-sale"];
        all.extend_from_slice(args);
        let out = ballast(&all);
        assert!(!out.status.success(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// The Redis the tests use (`BALLAST_TEST_REDIS_URL`, default the local one), or `None` — the test skipped, the
/// reason printed — when it is unreachable and the run allows skipping (`BALLAST_REQUIRE_SERVICES=1` fails).
fn redis() -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime
        .block_on(support::raw::service(
            "Redis",
            "BALLAST_TEST_REDIS_URL",
            "redis://127.0.0.1:6379",
        ))
        .map(|(url, _)| url)
}

/// A short flash sale through two `ballast serve` instances on one Redis (12 agents, a twentieth of real time): each
/// request goes to either instance, both serve their share, and the refund whose answer seed 5 loses after it
/// committed is still paid once — the instance a retry lands on finds the first one's record in the shared store.
#[test]
fn two_gateway_instances_on_one_redis_share_the_load_and_pay_once() {
    let Some(redis) = redis() else { return };
    let _bench = one_bench_at_a_time();
    let out = ballast(&[
        "bench",
        "flash-sale",
        "--strategies",
        "gateway",
        "--instances",
        "2",
        "--store",
        &redis,
        "--agents",
        "12",
        "--time-scale",
        "0.05",
        "--seed",
        "5",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let row = |label: &str| {
        stdout
            .lines()
            .find(|line| line.starts_with(&format!("| {label} ")))
            .and_then(|line| line.split('|').nth(2))
            .map(str::trim)
            .unwrap_or_else(|| panic!("a row {label:?}:\n{stdout}"))
    };
    assert_eq!(row(""), "gateway (2 instances, redis)", "{stdout}");
    assert_eq!(row("conversations"), "12", "{stdout}");
    assert_eq!(row("duplicate side effects"), "0", "{stdout}");
    let load = stdout
        .lines()
        .find(|line| line.contains("gateway (2 instances, redis) per instance:"))
        .unwrap_or_else(|| panic!("a line of per-instance load:\n{stdout}"));
    for instance in ["0", "1"] {
        let answered = load
            .split_once(&format!(" {instance} answered "))
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("instance {instance}'s requests: {load}"));
        assert!(answered > 0, "instance {instance} served its share: {load}");
    }
    assert!(load.ends_with("acknowledged lost 0"), "{load}");
}

/// Two instances on one Redis, instance 0 killed with SIGKILL 2 s into the sale (a tenth of a second in real time,
/// the burst's conversations under way) and restarted on its port: the report says when it went and came back, no
/// side effect ran twice, and none the agents were told was done is missing from the upstream's ledger.
#[test]
fn an_instance_killed_mid_sale_comes_back_on_its_port_and_nothing_is_paid_twice_or_lost() {
    let Some(redis) = redis() else { return };
    let _bench = one_bench_at_a_time();
    let out = ballast(&[
        "bench",
        "flash-sale",
        "--strategies",
        "gateway",
        "--instances",
        "2",
        "--store",
        &redis,
        "--kill-one-at",
        "2",
        "--agents",
        "16",
        "--time-scale",
        "0.05",
        "--seed",
        "5",
        "--json",
    ]);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let reports: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let summary = &reports[0]["per_seed"][0]["summaries"][0];
    assert_eq!(summary["strategy"], "gateway (2 instances, redis)");
    assert_eq!(summary["conversations"], 16, "{summary}");
    assert_eq!(summary["duplicates"], 0, "{summary}");
    let instances = &summary["instances"];
    assert_eq!(instances["acknowledged_lost"], 0, "{instances}");
    assert_eq!(
        instances["instances"].as_array().map(Vec::len),
        Some(2),
        "{instances}"
    );
    let kill = &instances["kills"][0];
    assert_eq!(kill["instance"], 0, "{kill}");
    let killed = kill["killed_at"].as_f64().expect("killed during the run");
    let back = kill["back_at"].as_f64().expect("back on its port");
    assert!(killed >= 2000.0 && back > killed, "{kill}");
    assert!(kill["down_real"].as_f64() > Some(0.0), "{kill}");
    assert_eq!(kill["failure"], Value::Null, "{kill}");
}

/// `bench overhead` for one short round at 4 connections with `extra` arguments: its JSON report.
fn short_overhead_run(extra: &[&str]) -> Value {
    let mut args = vec![
        "bench",
        "overhead",
        "--rounds",
        "1",
        "--seconds",
        "0.2",
        "--connections",
        "4",
        "--json",
    ];
    args.extend_from_slice(extra);
    let _bench = one_bench_at_a_time();
    let out = ballast(&args);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn a_short_overhead_run_measures_every_target_without_errors() {
    let report = short_overhead_run(&[]);
    let targets = report["targets"].as_array().expect("targets");
    let names: Vec<&str> = targets.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names[..6],
        [
            "direct",
            "floor",
            "gateway",
            "gateway, run",
            "gateway, idempotent",
            "gateway, mcp"
        ]
    );
    for group in ["chat", "chat streamed", "responses", "responses streamed"] {
        for who in ["direct", "floor", "gateway"] {
            assert!(
                names.contains(&format!("{who}, {group}").as_str()),
                "{who}, {group}: {names:?}"
            );
        }
    }
    for target in targets {
        assert_eq!(target["errors"], 0, "{target}");
        assert!(target["requests_per_second"].as_f64() > Some(0.0), "{target}");
    }
    assert!(
        targets[2]["peak_rss_mib"].as_f64() > Some(0.0),
        "the gateway's memory is read"
    );
}

/// `--store`: the gateway's rows on a shared Redis, the tool call in runs too, without errors.
#[test]
fn an_overhead_run_on_a_shared_redis_measures_the_gateway_there() {
    let Some(redis) = redis() else { return };
    let report = short_overhead_run(&["--groups", "tools", "--store", &redis]);
    assert_eq!(report["store"], "redis");
    let targets = report["targets"].as_array().expect("targets");
    let names: Vec<&str> = targets.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"gateway, run"), "{names:?}");
    for target in targets {
        assert_eq!(target["errors"], 0, "{target}");
        assert!(target["requests_per_second"].as_f64() > Some(0.0), "{target}");
    }
}

/// `--unpaced`: the upstream streams without pausing between events, every stream still read to its end through
/// each target, and the report says so.
#[test]
fn an_unpaced_overhead_run_streams_through_every_target() {
    let report = short_overhead_run(&["--groups", "chat streamed,responses streamed", "--unpaced"]);
    assert_eq!(report["unpaced"], true);
    let targets = report["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 6, "{targets:?}");
    for target in targets {
        assert_eq!(target["errors"], 0, "{target}");
        assert!(target["requests_per_second"].as_f64() > Some(0.0), "{target}");
    }
}
