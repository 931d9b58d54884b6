//! deploy/prometheus's alert rules and deploy/grafana's dashboard, as an operator loads them: `promtool check
//! rules` and `promtool test rules` pass (and the unit tests hold, for each alert, a case where it fires and one
//! where it does not), the dashboard's queries parse as PromQL, and every metric and label the rules and the
//! dashboard's queries name is one the gateway exports — read from its code (`support::promql`), cross-checked
//! with a live `ballast serve`'s `/metrics` — and so is every value they match `outcome`, `priority`, `result`
//! and `reason` against: the live gateway registers those series at zero, and its values are the code's lists.
//!
//! The machine's `promtool` (`BALLAST_TEST_PROMTOOL`, else `promtool` on the `PATH`; Debian's `prometheus`
//! package, which `scripts/services` installs): where it is missing the test says so and skips, unless
//! `BALLAST_REQUIRE_SERVICES=1`, where it fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ballast::policy::{ErrorCode, Priority, ShedReason};
use ballast_testkit::{ConfigText, Samples, deployment};
use serde_json::Value;

use crate::support::gateway::{Gateway, chaos, client};
use crate::support::promql::{Exported, exported, label_values, matchers, problems};
use crate::support::text;

const RULES: &str = "deploy/prometheus/ballast-alerts.yml";
const RULE_TESTS: &str = "deploy/prometheus/tests/ballast-alerts.test.yml";
const DASHBOARD: &str = "deploy/grafana/ballast-dashboard.json";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The metrics of the gateway's code.
fn gateway_metrics() -> BTreeMap<String, Exported> {
    let root = root();
    exported(&[
        &root.join("crates/ballast/src"),
        &root.join("crates/ballast-gateway/src"),
    ])
}

#[test]
fn promtool_checks_the_rules_and_passes_a_firing_and_a_quiet_case_of_each_alert() {
    let Some(promtool) = promtool() else { return };
    for args in [["check", "rules", RULES], ["test", "rules", RULE_TESTS]] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(root())
            .output()
            .expect("promtool runs");
        let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "promtool {}:\n{printed}", args.join(" "));
        assert!(printed.contains("SUCCESS"), "{printed}");
    }
    let alerts: BTreeSet<String> = (read(RULES).lines())
        .filter_map(|line| line.trim().strip_prefix("- alert: "))
        .map(str::to_owned)
        .collect();
    assert_eq!(alerts.len(), 7, "{alerts:?}");
    let (firing, quiet) = alert_cases(&read(RULE_TESTS));
    for alert in &alerts {
        assert!(firing.contains(alert), "no unit test where {alert} fires");
        assert!(quiet.contains(alert), "no unit test where {alert} does not fire");
    }
}

/// The dashboard's queries are PromQL Prometheus reads, once Grafana has put its variables in: each as a
/// recording rule that `promtool check rules` parses.
#[test]
fn the_dashboards_queries_parse_as_promql() {
    let Some(promtool) = promtool() else { return };
    let dashboard = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in dashboard_exprs(&dashboard).iter().enumerate() {
        let expr = (expr.replace("$__rate_interval", "5m"))
            .replace("$target", ".*")
            .replace("$route", ".*");
        let quoted = serde_json::to_string(&expr).expect("a JSON string is a YAML string");
        rules.push_str(&format!(
            "      - record: ballast:dashboard_{i}\n        expr: {quoted}\n"
        ));
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("dashboard.yml");
    std::fs::write(&path, &rules).expect("written");
    let out = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .expect("promtool runs");
    let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{printed}\n{rules}");
}

/// The alerts the unit tests expect to fire at some time, and those they expect not to (`exp_alerts: []`).
fn alert_cases(tests: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut firing, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    let mut lines = tests.lines().map(str::trim).peekable();
    while let Some(line) = lines.next() {
        if let Some(alert) = line.strip_prefix("alertname: ") {
            match lines.peek() {
                Some(&"exp_alerts: []") => quiet.insert(alert.to_owned()),
                Some(&"exp_alerts:") => firing.insert(alert.to_owned()),
                other => panic!("{alert}: expected exp_alerts, found {other:?}"),
            };
        }
    }
    (firing, quiet)
}

#[test]
fn the_rules_and_the_dashboard_name_only_exported_metrics_and_their_labels() {
    let metrics = gateway_metrics();
    // The scanner finds what the code emits (a metric of each kind, with its labels).
    assert_eq!(
        metrics["ballast_requests_total"].labels,
        BTreeSet::from(["route", "target", "outcome"].map(str::to_owned))
    );
    assert!(metrics["ballast_overhead_seconds"].histogram);
    assert!(metrics["ballast_breaker_open_seconds"].labels.contains("target"));
    // And the checker finds what is wrong.
    let wrong = "sum by (tenant) (rate(ballast_requests_total{team=\"a\"}[5m])) / ballast_nothing_total";
    assert_eq!(
        problems(wrong, &metrics).len(),
        3,
        "{:?}",
        problems(wrong, &metrics)
    );

    let rules = rule_exprs(&read(RULES));
    assert_eq!(rules.len(), 7);
    let dashboard = dashboard_exprs(&serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON"));
    assert!(dashboard.len() >= 30, "{}", dashboard.len());
    let mut named = BTreeSet::new();
    for (place, expr) in rules
        .iter()
        .map(|e| ("rule", e))
        .chain(dashboard.iter().map(|e| ("panel", e)))
    {
        let found = problems(expr, &metrics);
        assert!(found.is_empty(), "{place} `{expr}`: {found:?}");
        named.extend(
            expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| w.starts_with("ballast_"))
                .map(str::to_owned),
        );
    }
    for needed in [
        "ballast_retries_total",
        "ballast_breaker_open_seconds",
        "ballast_breaker_open_for_seconds",
    ] {
        assert!(named.contains(needed), "{needed} is used");
    }
}

/// Each rule's `expr` (a `|` block, or on its line).
fn rule_exprs(rules: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let lines: Vec<&str> = rules.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(expr) = line.trim().strip_prefix("expr:") else {
            continue;
        };
        if expr.trim() != "|" {
            exprs.push(expr.trim().to_owned());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let block = lines[i + 1..]
            .iter()
            .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent);
        exprs.push(block.copied().collect::<Vec<_>>().join("\n"));
    }
    exprs
}

/// Every panel's queries and the variables' (`label_values(metric, label)` as an expression grouping `metric`
/// by `label`), at any depth.
fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut stack = vec![dashboard];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(fields) => {
                if let Some(Value::String(expr)) = fields.get("expr") {
                    exprs.push(expr.clone());
                }
                if let Some(Value::String(query)) = fields.get("query")
                    && let Some(args) = query
                        .strip_prefix("label_values(")
                        .and_then(|q| q.strip_suffix(')'))
                {
                    let (metric, label) = args.split_once(',').expect("label_values(metric, label)");
                    exprs.push(format!("max by ({label}) ({metric})"));
                }
                stack.extend(fields.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    exprs
}

/// What a live gateway shows at `/metrics` is what the code says: every series a metric of the code's, with only
/// the code's labels; and the breaker gauges are there from the first scrape, with each breaker's `open_for`.
#[tokio::test(flavor = "multi_thread")]
async fn a_live_gateways_metrics_are_those_the_code_exports() {
    let upstream = chaos("").await;
    let config = ConfigText::new()
        .tool(
            "lookup_order",
            "{chaos}/tools/lookup_order",
            "breaker = { open_for = \"7s\" }",
        )
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            "side_effects = true",
        )
        .model("agent", &[deployment("{chaos}/v1", "mock")], "")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
    let page = client()
        .get(gateway.url("/metrics"))
        .send()
        .await
        .expect("an answer")
        .text()
        .await
        .expect("text");
    let metrics = gateway_metrics();
    let samples = Samples::parse(&page);
    for series in samples.series() {
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        let labels: Vec<&str> = labels
            .trim_end_matches('}')
            .split("\",")
            .filter_map(|pair| pair.split_once('=').map(|(label, _)| label))
            .collect();
        let expr = format!(
            "{name}{{{}}}",
            labels
                .iter()
                .map(|l| format!("{l}=\"\""))
                .collect::<Vec<_>>()
                .join(",")
        );
        let found = problems(&expr, &metrics);
        assert!(found.is_empty(), "{series}: {found:?}");
    }
    let breaker = |name: &str, target: &str| samples.get(name, &[&format!("target=\"{target}\"")]);
    assert_eq!(
        breaker("ballast_breaker_open_for_seconds", "lookup_order"),
        Some(7.0)
    );
    assert_eq!(breaker("ballast_breaker_open_seconds", "lookup_order"), Some(0.0));
    assert_eq!(
        breaker("ballast_breaker_open_for_seconds", "agent[0] mock"),
        Some(5.0),
        "the default open_for"
    );
    assert!(page.contains("# HELP ballast_breaker_open_seconds"), "described");
    assert_eq!(
        breaker("ballast_breaker_state", "agent[0] mock"),
        Some(0.0),
        "read at scrape time, before any call"
    );
    the_rules_match_only_values_the_gateway_has(&samples);
}

/// The labels whose values the rules and the dashboard match against lists the code has.
const LISTED: [&str; 4] = ["outcome", "priority", "result", "reason"];

/// Every value the rules and the dashboard match `LISTED` labels against is one the live gateway shows (each
/// alternative of a `=~` list); and what it shows is the code's lists, registered at zero before any call.
fn the_rules_match_only_values_the_gateway_has(samples: &Samples) {
    let live = label_values(samples.series());
    let values = |metric: &str, label: &str| -> BTreeSet<String> {
        live.get(&(metric.to_owned(), label.to_owned()))
            .cloned()
            .unwrap_or_default()
    };
    let names = |list: &[&str]| -> BTreeSet<String> { list.iter().map(|v| (*v).to_owned()).collect() };
    let mut outcomes = names(&["ok", "fallback"]);
    outcomes.extend(ErrorCode::ALL.iter().map(|code| code.as_str().to_owned()));
    assert_eq!(values("ballast_requests_total", "outcome"), outcomes);
    let critical = [Priority::Critical, Priority::CriticalPlus].map(Priority::as_str);
    assert_eq!(values("ballast_shed_total", "priority"), names(&critical));
    assert!(
        critical
            .iter()
            .all(|class| Priority::ALL.iter().any(|p| p.as_str() == *class))
    );
    assert_eq!(values("ballast_shed_total", "reason"), names(&ShedReason::NAMES));
    assert_eq!(
        values("ballast_shed_total", "target"),
        names(&["lookup_order", "create_refund", "agent[0] mock"]),
        "every target's critical sheds registered at zero"
    );
    assert_eq!(
        samples.total("ballast_shed_total", &[]),
        0.0,
        "at zero before any call"
    );
    assert_eq!(
        samples.get(
            "ballast_deferred_total",
            &["queue=\"create_refund\"", "outcome=\"outcome_unknown\""]
        ),
        Some(0.0),
        "the side-effecting tool's deferred queue, at zero"
    );
    assert!(values("ballast_idempotency_total", "result").contains("unknown"));

    let rules = rule_exprs(&read(RULES));
    let dashboard = dashboard_exprs(&serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON"));
    let mut checked = 0;
    for expr in rules.iter().chain(&dashboard) {
        for m in matchers(expr)
            .into_iter()
            .filter(|m| LISTED.contains(&m.label.as_str()))
        {
            let known = values(&m.metric, &m.label);
            let alternatives: Vec<&str> = match m.op.as_str() {
                "=~" | "!~" => m.value.split('|').collect(),
                _ => vec![m.value.as_str()],
            };
            for value in alternatives {
                assert!(
                    known.contains(value),
                    "`{expr}`: {}{{{}{}\"{value}\"}} matches nothing the gateway exports ({known:?})",
                    m.metric,
                    m.label,
                    m.op
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "{checked} values checked");
}

fn promtool() -> Option<PathBuf> {
    let promtool =
        std::env::var_os("BALLAST_TEST_PROMTOOL").map_or_else(|| PathBuf::from("promtool"), PathBuf::from);
    let found = Command::new(&promtool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        assert!(
            std::env::var("BALLAST_REQUIRE_SERVICES").as_deref() != Ok("1"),
            "promtool is required (BALLAST_REQUIRE_SERVICES=1) but not installed: run scripts/services"
        );
        eprintln!(
            "skipped: promtool is not installed; run scripts/services or set BALLAST_REQUIRE_SERVICES=1"
        );
        return None;
    }
    Some(promtool)
}
