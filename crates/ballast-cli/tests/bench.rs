//! `ballast bench flash-sale` and `ballast bench overhead` as a user runs them: the real binary, short runs, their
//! JSON (and the flash sale's chart).

mod support;

use serde_json::Value;
use support::{ballast, text};

#[test]
fn a_short_flash_sale_prints_json_per_seed_and_pooled_and_draws_its_chart() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let chart = dir.path().join("flash-sale.svg");
    let out = ballast(&[
        "bench",
        "flash-sale",
        "--agents",
        "12",
        "--time-scale",
        "0.02",
        "--seed",
        "1..2",
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
    assert_eq!(strategies, ["naive", "ballast"]);
    assert_eq!(pooled[1]["conversations"], 24);
    assert_eq!(pooled[1]["duplicates"], 0, "{}", pooled[1]);
    let svg = std::fs::read_to_string(&chart).expect("the chart was written");
    assert!(svg.starts_with("<svg") && svg.contains("ballast: succeeded"));
}

#[test]
fn bad_arguments_say_what_is_accepted() {
    for (args, expected) in [
        (&["--scenario", "dead-upstream:gone"][..], "dead-upstream:refused"),
        (&["--seed", "5..1"][..], "ends before it starts"),
        (&["--strategies", "magic"][..], "naive, ballast"),
        (&["--time-scale", "0"][..], "positive"),
        (&["--arrivals", "flood"][..], "burst, ramp, poisson, steady"),
    ] {
        let mut all = vec!["bench", "flash-sale"];
        all.extend_from_slice(args);
        let out = ballast(&all);
        assert!(!out.status.success(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_short_overhead_run_measures_every_target_without_errors() {
    let out = ballast(&[
        "bench",
        "overhead",
        "--rounds",
        "1",
        "--seconds",
        "0.2",
        "--connections",
        "4",
        "--json",
    ]);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let targets = report["targets"].as_array().expect("targets");
    let names: Vec<&str> = targets.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names[..4], ["direct", "floor", "gateway", "gateway, idempotent"]);
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
