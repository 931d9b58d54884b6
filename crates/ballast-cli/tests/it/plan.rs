//! `ballast plan` as a user runs it: the real binary, its output and its exit code.

use crate::support;

use std::path::{Path, PathBuf};

use support::{ballast, text};

fn repo_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(name)
}

#[test]
fn the_readme_run_command_plans_the_example_without_warnings() {
    let example = repo_file("examples/ballast.toml");
    let out = ballast(&["plan", example.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    for target in [
        "model gpt-4.1",
        "tool lookup_order",
        "tool create_refund",
        "tool process_payment",
    ] {
        assert!(stdout.contains(target), "{target} missing from:\n{stdout}");
    }
    assert!(stdout.contains("No warnings."), "{stdout}");
}

#[test]
fn warnings_are_printed_and_still_exit_zero() {
    let naive = repo_file("examples/naive.toml");
    let out = ballast(&["plan", naive.to_str().unwrap(), "--layers", "5"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("Warnings (6):"), "{stdout}");
    assert!(stdout.contains("if 5 layers each retry like this"), "{stdout}");
    assert!(
        stdout.contains("243"),
        "3 tries over 5 layers is 243 calls:\n{stdout}"
    );
}

#[test]
fn json_output_is_machine_readable() {
    let naive = repo_file("examples/naive.toml");
    let out = ballast(&["plan", naive.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(plan["layers"], 3);
    assert_eq!(plan["rows"][1]["name"], "crm_lookup");
    assert_eq!(plan["rows"][1]["naive_worst_case_ms"], 90_300);
    assert_eq!(plan["rows"][1]["ballast_bound_ms"], 30_000);
    assert_eq!(plan["warnings"].as_array().map(Vec::len), Some(6));
}

#[test]
fn an_invalid_config_exits_one_naming_every_bad_field() {
    let dir = std::env::temp_dir().join(format!("ballast-plan-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        r#"
version = 1
[[tools]]
name = "create_refund"
upstream = { method = "POST", url = "http://127.0.0.1:9000/tools/create_refund" }
per_try_timeout = "12x"
retry = { max_attempts = 0 }
priority = "urgent"
"#,
    )
    .unwrap();
    let out = ballast(&["plan", bad.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing is planned from an invalid config");
    for expected in [
        r#"tools[0].per_try_timeout: "12x" is not a duration"#,
        "tools[0].retry.max_attempts: 0 must be at least 1",
        r#"tools[0].priority: "urgent" is not one of critical_plus, critical, sheddable_plus, sheddable"#,
    ] {
        assert!(stderr.contains(expected), "{expected:?} missing from:\n{stderr}");
    }
}

#[test]
fn a_missing_file_exits_one_and_says_so() {
    let out = ballast(&["plan", "/nonexistent/ballast.toml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot read /nonexistent/ballast.toml"),
        "{}",
        text(&out.stderr)
    );
}
