//! `ballast demo` as a newcomer runs it: the real binary, what it prints, the printed snippets run as printed
//! against the gateway it serves, and a signal that stops it and everything it started.

use crate::support;

use std::process::Command;
use std::time::Duration;

use support::process::{Running, alive, children, within};

/// The longest any bounded wait of these tests lasts (a snippet that meets a hang waits out a 5 s try).
const PATIENCE: Duration = Duration::from_secs(30);

/// The demo's output up to the end of its instructions.
fn instructions(demo: &mut Running) -> Vec<String> {
    demo.lines_until(PATIENCE, |line| {
        line.starts_with("Each prints the model's last answer")
    })
}

/// The snippet printed after the line starting with `intro`: the lines between its fences.
fn snippet(lines: &[String], intro: &str) -> String {
    let start = lines
        .iter()
        .position(|line| line.starts_with(intro))
        .unwrap_or_else(|| panic!("no {intro:?} in:\n{}", lines.join("\n")));
    let open = start + 2;
    assert!(
        lines[open].starts_with("```"),
        "a fence after {intro:?}: {:?}",
        lines[open]
    );
    lines[open + 1..]
        .iter()
        .take_while(|line| *line != "```")
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs a shell command as printed; its stdout.
fn shell(command: &str) -> String {
    let output = Command::new("bash")
        .args(["-c", command])
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "{command}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `--no-bench`: the gateway is up at once; the printed curl refunds once and replays the second time, the
/// printed status URL answers, the printed Python and TypeScript agents finish their refund (with the SDKs
/// installed), and a Ctrl-C stops the demo, its gateway and its upstream.
#[test]
fn the_demo_serves_what_it_prints_until_interrupted() {
    let mut demo = Running::start(&["demo", "--no-bench"]);
    let lines = instructions(&mut demo);
    let text = lines.join("\n");
    let started: Vec<(u32, String)> = children(demo.pid());
    assert_eq!(started.len(), 2, "the upstream and the gateway: {started:?}");
    let curl = snippet(&lines, "A refund with curl");
    assert!(curl.starts_with("curl -s -i http://127.0.0.1:"), "{curl}");
    let first = shell(&curl);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(!first.to_lowercase().contains("idempotent-replayed"), "{first}");
    let again = shell(&curl);
    assert!(
        again.starts_with("HTTP/1.1 200") && again.to_lowercase().contains("idempotent-replayed: true"),
        "{again}"
    );
    let status = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("status    "))
        .expect("a status line");
    let answer = shell(status);
    assert!(answer.contains("\"breaker\""), "{answer}");
    if support::sdk::installed() {
        // As a newcomer runs them: in a new directory (TypeScript in the CommonJS project `npm install openai` makes).
        for (language, title, op) in [
            ("python", "An agent in Python", "demo-py"),
            ("typescript", "The same agent in TypeScript", "demo-ts"),
        ] {
            let output = support::sdk::run_snippet(language, &snippet(&lines, title));
            let printed = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success()
                    && printed.contains(&format!("Done: the refund of order 1234 went through (op {op})")),
                "{language}: {printed}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
    demo.signal("-INT");
    assert_eq!(demo.wait_for_exit(PATIENCE), Some(0), "{}", demo.stderr());
    assert!(
        demo.stderr().contains("ballast demo stopped"),
        "{}",
        demo.stderr()
    );
    for (pid, command) in started {
        assert!(!alive(pid), "{command} ({pid}) outlived the demo");
    }
}

/// A short flash sale first: the table with the three strategies side by side and the chart's path, then the
/// gateway serving; SIGTERM stops it all.
#[test]
fn the_demo_runs_a_short_flash_sale_first() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let chart = dir.path().join("demo.svg");
    let mut demo = Running::start(&[
        "demo",
        "--agents",
        "6",
        "--time-scale",
        "0.05",
        "--seed",
        "5",
        "--chart",
        chart.to_str().expect("a UTF-8 path"),
    ]);
    let lines = instructions(&mut demo);
    let text = lines.join("\n");
    let header = lines
        .iter()
        .find(|line| line.starts_with("|  ") && line.contains("naive"))
        .unwrap_or_else(|| panic!("no table in:\n{text}"));
    let columns: Vec<&str> = header
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(columns, ["naive", "ballast", "gateway"], "{text}");
    assert!(
        text.contains(&format!(
            "The chart (conversations ended so far, succeeded and failed, over time): {}",
            chart.display()
        )),
        "{text}"
    );
    let svg = std::fs::read_to_string(&chart).expect("the chart was drawn");
    assert!(svg.contains("gateway: succeeded"));
    assert!(text.contains("gateway   http://127.0.0.1:"), "{text}");
    let started: Vec<u32> = children(demo.pid()).into_iter().map(|(pid, _)| pid).collect();
    assert_eq!(
        started.len(),
        2,
        "only the served upstream and gateway are left running"
    );
    demo.signal("-TERM");
    assert_eq!(demo.wait_for_exit(PATIENCE), Some(0), "{}", demo.stderr());
    assert!(within(PATIENCE, || started.iter().all(|&pid| !alive(pid))));
}
