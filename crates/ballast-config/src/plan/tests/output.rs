//! The shipped examples, the text table and the JSON.

use super::*;

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

#[test]
fn each_side_effecting_tool_says_how_it_is_deferred_and_the_secret_is_never_shown() {
    let plan = plan_of(
        r#"
        version = 1
        [deferred]
        concurrency = 6
        callback_url = "https://hooks.example.com/ballast"
        callback_secret_env = "BALLAST_CALLBACK_SECRET"
        [[tools]]
        name = "refund"
        side_effects = true
        upstream = { url = "http://127.0.0.1:9000/refund" }
        defer = { ttl = "10m", max_attempts = 8 }
        [[tools]]
        name = "lookup"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/lookup" }
        [[tools]]
        name = "pay"
        side_effects = true
        upstream = { url = "http://127.0.0.1:9000/pay" }
        "#,
    );
    let table = render_table(&plan);
    assert!(
        table.contains(
            "\nDeferred operations (answered 202, then worked in the background at the lowest admission class): 6 \
             at a time on each instance, over every tool, attempts apart by a jittered backoff from 1s to 1m; each \
             one's end is posted, signed, to \
             https://hooks.example.com/ballast.\n\
             \x20 refund: deferred whenever it cannot run now (callers accept it), up to 8 attempts within 10m, 2 at \
             a time\n\
             \x20 pay: deferred when it cannot run now and the caller sends Prefer: respond-async, up to 5 attempts \
             within 15m, 2 at a time\n"
        ),
        "{table}"
    );
    assert!(!table.contains("lookup: deferred") && !table.contains("BALLAST_CALLBACK_SECRET"));
    let json = serde_json::to_value(&plan).expect("a plan serialises");
    assert_eq!(
        json["deferred"],
        serde_json::json!({
            "concurrency": 6,
            "base_ms": 1_000,
            "cap_ms": 60_000,
            "callback_url": "https://hooks.example.com/ballast",
            "tools": [
                { "name": "refund", "path": "tools[0]", "accepted": true, "max_attempts": 8, "ttl_ms": 600_000,
                  "concurrency": 2 },
                { "name": "pay", "path": "tools[2]", "accepted": false, "max_attempts": 5, "ttl_ms": 900_000,
                  "concurrency": 2 },
            ],
        })
    );
}

#[test]
fn without_a_side_effecting_tool_nothing_is_deferred() {
    let plan = plan_of(
        r#"
        version = 1
        [[tools]]
        name = "lookup"
        upstream = { method = "GET", url = "http://127.0.0.1:9000/lookup" }
        "#,
    );
    assert_eq!(plan.deferred, None);
    assert!(!render_table(&plan).contains("Deferred"));
    assert!(
        serde_json::to_value(&plan)
            .expect("a plan serialises")
            .get("deferred")
            .is_none()
    );
}

#[test]
fn the_traces_are_shown_where_they_go_and_how_many() {
    let plan = plan_of("version = 1\n[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nsampling = 0.25\n");
    let table = render_table(&plan);
    assert!(
        table.contains(
            "Traces: OTLP http/protobuf to http://127.0.0.1:4318/v1/traces as service \"ballast\"; 25 % of the \
             traces that start here are recorded"
        ),
        "{table}"
    );
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["traces"]["sampling"], 0.25);
    assert!(plan_of("version = 1\n").traces.is_none());
}
