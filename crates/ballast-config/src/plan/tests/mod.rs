//! The plan's numbers and output, by what they cover:
//!
//! - here: the naive worst case, Ballast's bounds and the retry amplification;
//! - `warnings`: each check, and the settings that pass it;
//! - `output`: the shipped examples, the text table and the JSON (deferral included).

use std::time::Duration;

use super::*;

mod output;
mod warnings;

const MS: Duration = Duration::from_millis(1);

pub(super) fn plan_of(toml: &str) -> Plan {
    let config = Config::from_toml_str(toml).unwrap_or_else(|e| panic!("test config is invalid:\n{e}"));
    Plan::new(&config, 3)
}

pub(super) fn warnings_at<'a>(plan: &'a Plan, path: &str) -> Vec<&'a str> {
    plan.warnings
        .iter()
        .filter(|w| w.path == path)
        .map(|w| w.message.as_str())
        .collect()
}

#[test]
fn three_steps_of_thirty_seconds_retried_three_times_is_the_270_s_of_reference_003() {
    // reference/003: per-step timeouts of 30 s, three tries each; Ballast's bound stays the 30 s deadline.
    let plan = plan_of(
        r#"
        version = 1
        [server]
        default_timeout = "30s"
        [[tools]]
        name = "crm_lookup"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/tools/crm_lookup" }
        per_try_timeout = "30s"
        retry = { max_attempts = 3, base = "100ms", cap = "2s" }
        "#,
    );
    let row = &plan.rows[0];
    assert_eq!(row.kind, TargetKind::Tool);
    // 3 x 30 s + the two sleeps at their caps (100 ms, 200 ms).
    assert_eq!(row.naive_worst_case, Duration::from_secs(90) + 300 * MS);
    assert_eq!(row.ballast_bound, Duration::from_secs(30));
    assert_eq!(row.naive_amplification, 27.0);
    assert_eq!(row.ballast_amplification, 3);
    assert_eq!(row.retry_budget.to_string(), "20% + 10/s");
    let warnings = warnings_at(&plan, "tools[0]");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("3 attempts x 30s per try plus backoff = 1m30.3s"),
        "{}",
        warnings[0]
    );
}

#[test]
fn amplification_multiplies_over_the_layers() {
    let config = Config::from_toml_str(
        r#"
        version = 1
        [[tools]]
        name = "db"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/db" }
        per_try_timeout = "1s"
        "#,
    )
    .unwrap();
    assert_eq!(Plan::new(&config, 5).rows[0].naive_amplification, 243.0); // AWS's 3^5
    assert_eq!(Plan::new(&config, 1).rows[0].naive_amplification, 3.0);
    assert_eq!(Plan::new(&config, 0).layers, 1);
}

#[test]
fn model_fallbacks_add_their_own_retries_to_the_naive_case_and_share_the_deadline() {
    let plan = plan_of(
        r#"
        version = 1
        [[models]]
        name = "gpt-4.1"
        per_try_timeout = "5s"
        retry = { max_attempts = 2, base = "100ms", cap = "1s" }
        deployments = [
            { base_url = "https://api.openai.com/v1", model = "gpt-4.1" },
            { base_url = "http://127.0.0.1:9000/v1", model = "mock", per_try_timeout = "2s" },
        ]
        "#,
    );
    let row = &plan.rows[0];
    assert_eq!(row.kind, TargetKind::Model);
    assert_eq!(row.per_try_timeout, Duration::from_secs(5));
    // (2 x 5 s + 100 ms) + (2 x 2 s + 100 ms)
    assert_eq!(row.naive_worst_case, Duration::from_millis(14_200));
    assert_eq!(row.fallbacks, ["mock at http://127.0.0.1:9000/v1"]);
    assert_eq!(row.ballast_bound, Duration::from_millis(14_200)); // under the deadline: the chain itself
    // 10.1 s fits in 60% of 30 s: no warning.
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
}

/// Review finding 5: huge but valid values must neither hang (a loop per attempt) nor panic (an overflowing
/// `Duration` sum).
#[test]
fn huge_values_plan_at_once_without_overflow() {
    let plan = plan_of(
        r#"
        version = 1
        [[models]]
        name = "m"
        per_try_timeout = "5000000h"
        retry = { max_attempts = 100 }
        deployments = [
            { base_url = "https://api.openai.com/v1" },
            { base_url = "http://127.0.0.1:9000/v1", model = "b" },
            { base_url = "http://127.0.0.1:9001/v1", model = "c" },
        ]
        [[tools]]
        name = "t"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/t" }
        per_try_timeout = "5000000h"
        retry = { max_attempts = 100 }
        fallback_tool = "u"
        [[tools]]
        name = "u"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/u" }
        per_try_timeout = "5000000h"
        retry = { max_attempts = 100 }
        "#,
    );
    let hour = Duration::from_secs(3600);
    // 100 tries of 5,000,000 h, plus 100 + 200 + 400 + 800 + 1600 ms of growing sleeps and 94 at the 2 s cap.
    let one = (5_000_000 * hour) * 100 + Duration::from_millis(3_100 + 94 * 2_000);
    assert_eq!(plan.rows[0].naive_worst_case, one * 3);
    assert_eq!(plan.rows[1].naive_worst_case, one * 2);
    assert_eq!(plan.sequence_naive_worst_case, one * 6);
    assert_eq!(plan.sequence_ballast_bound, Duration::from_secs(30));
    assert!(render_table(&plan).contains("tool t"));
    assert!(serde_json::to_value(&plan).is_ok());

    // Whatever reaches the worst case (here past what validation allows) saturates instead of looping.
    let endless = RetryConfig {
        max_attempts: u32::MAX,
        ..RetryConfig::default()
    };
    assert_eq!(naive_worst_case(Duration::MAX, &endless), Duration::MAX);
    assert_eq!(
        saturating_sum([Duration::MAX, Duration::MAX].into_iter()),
        Duration::MAX
    );
}

/// Review finding 7: the OpenAI SDKs always send a deadline (Python `x-stainless-read-timeout: 600`), so their
/// calls run under `max_timeout`, not `default_timeout`; the plan shows both bounds.
#[test]
fn callers_that_send_a_deadline_get_the_max_timeout_bound() {
    let plan = plan_of(
        r#"
        version = 1
        [server]
        default_timeout = "30s"
        max_timeout = "120s"
        [[tools]]
        name = "crm_lookup"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/tools/crm_lookup" }
        per_try_timeout = "60s"
        [[tools]]
        name = "quick"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/tools/quick" }
        per_try_timeout = "1s"
        "#,
    );
    let (slow, quick) = (&plan.rows[0], &plan.rows[1]);
    assert_eq!(slow.ballast_bound, Duration::from_secs(30));
    assert_eq!(slow.ballast_bound_caller_deadline, Duration::from_secs(120));
    assert_eq!(quick.ballast_bound_caller_deadline, quick.naive_worst_case);
    assert_eq!(plan.sequence_ballast_bound, Duration::from_secs(30));
    assert_eq!(
        plan.sequence_ballast_bound_caller_deadline,
        Duration::from_secs(120)
    );
    let table = render_table(&plan);
    assert!(
        table.contains(
            "Callers that send a deadline (the OpenAI SDKs always do) get at most max_timeout: 2m."
        ),
        "{table}"
    );
    let json = serde_json::to_value(&plan).expect("a plan serialises");
    assert_eq!(json["rows"][0]["ballast_bound_ms"], 30_000);
    assert_eq!(json["rows"][0]["ballast_bound_caller_deadline_ms"], 120_000);
    assert_eq!(json["sequence_ballast_bound_caller_deadline_ms"], 120_000);
}

#[test]
fn mcp_servers_are_planned_with_their_overrides_and_undescribed_tools_are_named() {
    let plan = plan_of(
        r#"version = 1
           [[tools]]
           name = "lookup"
           upstream = { url = "http://127.0.0.1:9000/lookup" }
           [[tools]]
           name = "refund"
           description = "Refund an order."
           input_schema = { properties = { order_id = { type = "string" } } }
           upstream = { url = "http://127.0.0.1:9000/refund" }
           [[mcp_servers]]
           name = "shop"
           url = "http://127.0.0.1:9100/mcp"
           per_try_timeout = "4s"
           retry = { max_attempts = 2 }
           [mcp_servers.tools.slow_report]
           per_try_timeout = "20s"
           [mcp_servers.tools.other]
           side_effects = false
        "#,
    );
    let rows: Vec<(&str, TargetKind, Duration)> = (plan.rows.iter())
        .map(|r| (r.name.as_str(), r.kind, r.per_try_timeout))
        .collect();
    assert_eq!(
        rows[2..],
        [
            ("shop/*", TargetKind::McpServer, 4000 * MS),
            ("shop/slow_report", TargetKind::McpServer, 20_000 * MS),
        ],
        "a row for the server, one for the override that changes the per-try timeout"
    );
    // Two tries of 4 s and one backoff sleep at most.
    assert!(plan.rows[2].naive_worst_case >= 8000 * MS);
    assert_eq!(plan.rows[3].path, "mcp_servers[0].tools.slow_report");
    assert_eq!(plan.undescribed, ["lookup"]);
    assert!(
        render_table(&plan)
            .contains("without a description or an input_schema (a model picks tools by them): lookup.")
    );
}
