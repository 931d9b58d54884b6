//! `bench flash-sale`'s arguments: seeds, strategies and what shapes the gateway's, refused where they cannot apply.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: FlashSale,
}

fn names(argv: &[&str]) -> anyhow::Result<Vec<String>> {
    let cli = Cli::try_parse_from(std::iter::once("bench").chain(argv.iter().copied()))?;
    let tools: ToolApi = cli.args.tools.parse().map_err(anyhow::Error::msg)?;
    let strategies = strategies(&cli.args, Path::new("ballast"), ModelApi::Mixed, tools)?;
    Ok(strategies.iter().map(|s| s.name().to_owned()).collect())
}

#[test]
fn seeds_are_one_or_an_inclusive_range() {
    assert_eq!(seeds("3").unwrap(), [3]);
    assert_eq!(seeds("1..5").unwrap(), [1, 2, 3, 4, 5]);
    assert_eq!(seeds("1..=2").unwrap(), [1, 2]);
    assert!(seeds("5..1").is_err());
    assert!(seeds("x").unwrap_err().to_string().contains("whole number"));
}

#[test]
fn strategies_default_to_the_three_and_against_joins_with_its_url() {
    assert_eq!(names(&[]).unwrap(), ["naive", "ballast", "gateway"]);
    assert_eq!(
        names(&["--strategies", "naive, ballast"]).unwrap(),
        ["naive", "ballast"]
    );
    assert_eq!(
        names(&["--against", "http://127.0.0.1:4000/v1"]).unwrap(),
        ["naive", "ballast", "gateway", "against"]
    );
    assert!(names(&["--strategies", "against"]).is_err());
    let cli = Cli::try_parse_from([
        "bench",
        "--api",
        "messages",
        "--against",
        "http://127.0.0.1:4000/v1",
    ])
    .unwrap();
    let api: ModelApi = cli.args.api.parse().unwrap();
    let named: Vec<String> = strategies(&cli.args, Path::new("ballast"), api, ToolApi::Http)
        .unwrap()
        .iter()
        .map(|s| s.name().to_owned())
        .collect();
    assert_eq!(
        named,
        ["naive", "ballast", "gateway (messages)", "against (messages)"]
    );
    assert!(names(&["--strategies", "magic"]).is_err());
}

#[test]
fn tools_over_mcp_name_the_gateway_so_and_add_the_naive_mcp_client() {
    assert_eq!(
        names(&["--tools", "mcp"]).unwrap(),
        ["naive", "ballast", "gateway (mcp)", "naive-mcp"]
    );
    assert_eq!(
        names(&["--tools", "mcp", "--strategies", "gateway"]).unwrap(),
        ["gateway (mcp)"]
    );
    assert_eq!(names(&["--strategies", "naive-mcp"]).unwrap(), ["naive-mcp"]);
    assert!(names(&["--tools", "grpc"]).is_err());
}

#[test]
fn instances_name_the_gateway_and_are_refused_without_a_shared_store_or_a_gateway() {
    let redis = ["--store", "redis://127.0.0.1:6379"];
    let mut three = vec!["--strategies", "naive,gateway", "--instances", "3"];
    three.extend(redis);
    assert_eq!(names(&three).unwrap(), ["naive", "gateway (3 instances, redis)"]);
    let mcp = [&three[..], &["--tools", "mcp", "--kill-one-at", "2.5"]].concat();
    assert_eq!(
        names(&mcp).unwrap(),
        ["naive", "gateway (mcp, 3 instances, redis)"]
    );
    let error = |argv: &[&str]| names(argv).unwrap_err().to_string();
    assert!(error(&["--instances", "2"]).contains("needs --store"));
    assert!(error(&["--instances", "2", "--store", "sqlite://x.db"]).contains("SQLite is one process"));
    let kill = [&redis[..], &["--kill-one-at", "5"]].concat();
    assert!(error(&kill).contains("--instances 2 or more"));
    let negative = [&three[..], &["--kill-one-at=-1"]].concat();
    assert!(error(&negative).contains("0 or more"));
    let left_out = [&["--strategies", "naive", "--instances", "2"][..], &redis[..]].concat();
    assert!(error(&left_out).contains("leaves out"), "{}", error(&left_out));
    assert_eq!(
        names(&["--strategies", "gateway"]).unwrap(),
        ["gateway"],
        "as ever"
    );
}

#[test]
fn defer_names_the_gateway_and_is_refused_without_it_or_over_mcp() {
    assert_eq!(
        names(&["--defer"]).unwrap(),
        ["naive", "ballast", "gateway (defer)"]
    );
    assert_eq!(
        names(&["--defer", "--strategies", "gateway"]).unwrap(),
        ["gateway (defer)"]
    );
    let redis = ["--store", "redis://127.0.0.1:6379", "--instances", "2"];
    let shared = [&["--defer", "--strategies", "gateway"][..], &redis[..]].concat();
    assert_eq!(names(&shared).unwrap(), ["gateway (defer, 2 instances, redis)"]);
    let error = |argv: &[&str]| names(argv).unwrap_err().to_string();
    let left_out = error(&["--defer", "--strategies", "naive,ballast"]);
    assert!(left_out.contains("needs the gateway strategy"), "{left_out}");
    let mcp = error(&["--defer", "--tools", "mcp"]);
    assert!(mcp.contains("--defer needs --tools http"), "{mcp}");
    assert_eq!(
        names(&["--strategies", "gateway"]).unwrap(),
        ["gateway"],
        "no deferral unless asked"
    );
}
