use std::time::Duration;

use super::*;

const MS: Duration = Duration::from_millis(1);

fn plan_of(toml: &str) -> Plan {
    let config = Config::from_toml_str(toml).unwrap_or_else(|e| panic!("test config is invalid:\n{e}"));
    Plan::new(&config, 3)
}

fn warnings_at<'a>(plan: &'a Plan, path: &str) -> Vec<&'a str> {
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

#[test]
fn a_primary_that_can_outlast_its_share_is_warned_about() {
    let plan = plan_of(
        r#"
        version = 1
        [[models]]
        name = "gpt-4.1"
        per_try_timeout = "10s"
        deployments = [
            { base_url = "https://api.openai.com/v1" },
            { base_url = "http://127.0.0.1:9000/v1", model = "mock" },
        ]
        "#,
    );
    let warnings = warnings_at(&plan, "models[0]");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("beyond the primary's share (18s) of the 30s default deadline"),
        "{}",
        warnings[0]
    );
}

#[test]
fn a_primary_share_that_leaves_the_fallbacks_no_time_is_warned_about() {
    let plan = plan_of(
        r#"
        version = 1
        [[models]]
        name = "gpt-4.1"
        per_try_timeout = "1s"
        primary_share = 1.0
        deployments = [
            { base_url = "https://api.openai.com/v1" },
            { base_url = "http://127.0.0.1:9000/v1", model = "mock" },
        ]
        "#,
    );
    let warnings = warnings_at(&plan, "models[0]");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("primary_share 1 leaves the fallback deployments 0s"),
        "{}",
        warnings[0]
    );
}

#[test]
fn a_side_effect_without_upstream_deduplication_and_with_retries_is_warned_about() {
    let tool = |idempotency: &str, attempts: u32| {
        plan_of(&format!(
            r#"
            version = 1
            [[tools]]
            name = "create_refund"
            upstream = {{ method = "POST", url = "http://127.0.0.1:9000/tools/create_refund" }}
            side_effects = true
            upstream_idempotency = "{idempotency}"
            per_try_timeout = "1s"
            retry = {{ max_attempts = {attempts} }}
            "#
        ))
    };
    let risky = tool("none", 3);
    let warnings = warnings_at(&risky, "tools[0]");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("upstream_idempotency = \"none\", yet max_attempts = 3"),
        "{}",
        warnings[0]
    );
    assert!(tool("none", 1).warnings.is_empty());
    assert!(tool("keyed", 3).warnings.is_empty());
    assert!(tool("keyed_replays_errors", 3).warnings.is_empty());
}

#[test]
fn a_breaker_that_can_never_open_is_warned_about() {
    let plan = plan_of(
        r#"
        version = 1
        [[tools]]
        name = "search_products"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/tools/search_products" }
        per_try_timeout = "1s"
        breaker = { consecutive_failures = 0, failure_rate = 0 }
        "#,
    );
    let warnings = warnings_at(&plan, "tools[0].breaker");
    assert_eq!(warnings.len(), 1, "{:?}", plan.warnings);
    assert!(warnings[0].contains("can never open"));
}

#[test]
fn a_fallback_tool_chain_is_followed_and_warned_about_when_the_primary_can_use_the_whole_deadline() {
    let plan = plan_of(
        r#"
        version = 1
        [[tools]]
        name = "search_products"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/tools/search_products" }
        per_try_timeout = "10s"
        fallback_tool = "search_cache"
        [[tools]]
        name = "search_cache"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/tools/search_cache" }
        per_try_timeout = "1s"
        fallback_response = { results = [] }
        "#,
    );
    let row = &plan.rows[0];
    assert_eq!(row.fallbacks, ["tool search_cache", "static response"]);
    // (3 x 10 s + 300 ms) + (3 x 1 s + 300 ms)
    assert_eq!(row.naive_worst_case, Duration::from_millis(33_600));
    let warnings = warnings_at(&plan, "tools[0]");
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("fallback tool search_cache gets 0s when search_products hangs")),
        "{warnings:?}"
    );
    assert!(warnings_at(&plan, "tools[1]").is_empty());
}

#[test]
fn a_per_try_timeout_under_min_attempt_is_warned_about() {
    let plan = plan_of(
        r#"
        version = 1
        [[tools]]
        name = "cache"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/cache" }
        per_try_timeout = "20ms"
        "#,
    );
    let warnings = warnings_at(&plan, "tools[0]");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("under server.min_attempt 50ms")),
        "{warnings:?}"
    );
}

#[test]
fn the_shipped_example_plans_without_warnings() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/ballast.toml");
    let config = Config::load(std::path::Path::new(path)).expect("examples/ballast.toml is valid");
    let plan = Plan::new(&config, 3);
    assert_eq!(plan.rows.len(), config.models.len() + config.tools.len());
    assert!(plan.warnings.is_empty(), "{:#?}", plan.warnings);
}

#[test]
fn the_table_shows_every_row_and_warning_and_the_json_uses_milliseconds() {
    let plan = plan_of(
        r#"
        version = 1
        [[tools]]
        name = "create_refund"
        upstream = { method = "POST", url = "http://127.0.0.1:9000/tools/create_refund" }
        side_effects = true
        per_try_timeout = "1.2s"
        "#,
    );
    let table = render_table(&plan);
    assert!(table.contains("tool create_refund"), "{table}");
    assert!(
        table.contains("Warnings (1):\n  tools[0]: create_refund has side effects"),
        "{table}"
    );
    let json = serde_json::to_value(&plan).expect("a plan serialises");
    assert_eq!(json["rows"][0]["per_try_timeout_ms"], 1200);
    assert_eq!(json["rows"][0]["naive_worst_case_ms"], 3900);
    assert_eq!(json["deadline"]["default_timeout_ms"], 30_000);
    assert_eq!(json["warnings"][0]["path"], "tools[0]");
}

#[test]
fn an_empty_config_plans_to_nothing() {
    let plan = Plan::new(&Config::embedded_default(), 3);
    assert!(plan.rows.is_empty() && plan.warnings.is_empty());
    assert!(render_table(&plan).contains("No model routes or tools are configured."));
}

#[test]
fn the_naive_example_shows_every_trap() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/naive.toml");
    let config = Config::load(std::path::Path::new(path)).expect("examples/naive.toml is valid");
    let plan = Plan::new(&config, 3);
    let messages = |p: &str| warnings_at(&plan, p).join("\n");
    assert!(
        messages("models[0]").contains("beyond the primary's share"),
        "{}",
        messages("models[0]")
    );
    assert!(
        messages("tools[0]").contains("beyond the 30s default deadline"),
        "{}",
        messages("tools[0]")
    );
    assert!(
        messages("tools[1]").contains("upstream_idempotency = \"none\""),
        "{}",
        messages("tools[1]")
    );
    assert!(messages("tools[1].breaker").contains("can never open"));
    assert!(
        messages("models[0]").contains("leaves the fallback deployments 11.95s"),
        "{}",
        messages("models[0]")
    );
    assert_eq!(plan.warnings.len(), 6);
    // The model route alone: two deployments x (3 x 30 s + 300 ms) naive, 30 s with Ballast.
    assert_eq!(plan.rows[0].naive_worst_case, Duration::from_millis(180_600));
    assert_eq!(plan.rows[0].ballast_bound, Duration::from_secs(30));
    // One request through all three: 3m0.6s + 2 x 1m30.3s naive; still 30 s with Ballast.
    assert_eq!(plan.sequence_naive_worst_case, Duration::from_millis(361_200));
    assert_eq!(plan.sequence_ballast_bound, Duration::from_secs(30));
    assert_eq!(
        plan.sequence_ballast_bound_caller_deadline,
        Duration::from_secs(300)
    );
    assert!(render_table(&plan).contains(
        "in sequence: naive worst 6m1.2s; with Ballast (one deadline per run: ballast-run-id or the Rust library) \
         30s, or at most 5m for a caller that sends its own deadline."
    ));
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

/// Review finding 8: "20%" hid the ratio budget's floor of 10 retries per second, the larger part at low
/// traffic; a token bucket showed no numbers at all.
#[test]
fn retry_load_shows_the_floor_and_the_bucket() {
    let plan = plan_of(
        r#"
        version = 1
        [[tools]]
        name = "ratio"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/ratio" }
        per_try_timeout = "1s"
        [[tools]]
        name = "bucket"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/bucket" }
        per_try_timeout = "1s"
        budget = { kind = "token_bucket", capacity = 5, refill_per_sec = 0.5 }
        "#,
    );
    let table = render_table(&plan);
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line("tool ratio").ends_with("20% + 10/s"), "{table}");
    assert!(line("tool bucket").ends_with("5 + 0.5/s"), "{table}");
    let json = serde_json::to_value(&plan).expect("a plan serialises");
    assert_eq!(
        json["rows"][0]["retry_budget"],
        serde_json::json!({ "kind": "ratio", "ratio": 0.2, "min_per_sec": 10, "window_ms": 10_000 })
    );
    assert_eq!(
        json["rows"][1]["retry_budget"],
        serde_json::json!({ "kind": "token_bucket", "capacity": 5, "refill_per_sec": 0.5 })
    );
    assert!(json["rows"][0].get("sustained_retry_share").is_none());
}

/// Review finding 9: the fallback deployments' time was only compared with `reserve + min_attempt`, so a 60%
/// share that leaves 11.95 s to a fallback whose single try takes 20 s passed without a word.
#[test]
fn a_fallback_with_less_time_than_one_try_is_warned_about() {
    let route = |fallback_per_try: &str| {
        plan_of(&format!(
            r#"
            version = 1
            [[models]]
            name = "gpt-4.1"
            per_try_timeout = "5s"
            retry = {{ max_attempts = 2 }}
            deployments = [
                {{ base_url = "https://api.openai.com/v1" }},
                {{ base_url = "http://127.0.0.1:9000/v1", model = "mock", per_try_timeout = "{fallback_per_try}" }},
            ]
            "#
        ))
    };
    let short = route("20s");
    let warnings = warnings_at(&short, "models[0]");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "primary_share 0.6 leaves the fallback deployments 11.95s of the 30s default deadline (after the 50ms \
             reserve), under the per_try_timeout 20s of mock"
        ),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].contains("lower primary_share or the fallback's per_try_timeout"));
    assert!(route("11.95s").warnings.is_empty());

    // A fallback tool: what the primary's worst case leaves (30 s - 20.1 s - 50 ms) against one try of 10 s.
    let tools = |fallback_per_try: &str| {
        plan_of(&format!(
            r#"
            version = 1
            [[tools]]
            name = "search"
            upstream = {{ method = "GET", url = "http://127.0.0.1:9000/search" }}
            per_try_timeout = "10s"
            retry = {{ max_attempts = 2 }}
            fallback_tool = "cache"
            [[tools]]
            name = "cache"
            upstream = {{ method = "GET", url = "http://127.0.0.1:9000/cache" }}
            per_try_timeout = "{fallback_per_try}"
            retry = {{ max_attempts = 1 }}
            "#
        ))
    };
    let short = tools("10s");
    let warnings = warnings_at(&short, "tools[0]");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("fallback tool cache gets 9.85s when search hangs"),
        "{}",
        warnings[0]
    );
    assert!(tools("9s").warnings.is_empty(), "{:?}", tools("9s").warnings);
}
