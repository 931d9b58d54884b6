//! Every check of `ballast plan`, with a config that trips it and one that does not.

use super::*;

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

#[test]
fn an_open_for_longer_than_the_deadline_without_a_fallback_is_warned_about() {
    let tool = |breaker: &str, fallback: &str| {
        plan_of(&format!(
            r#"
            version = 1
            [[tools]]
            name = "lookup_order"
            upstream = {{ method = "GET", url = "http://127.0.0.1:9000/tools/lookup_order" }}
            breaker = {breaker}
            {fallback}
            "#
        ))
    };
    let plan = tool("{ open_for = \"60s\" }", "");
    let warnings = warnings_at(&plan, "tools[0].breaker");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("open_for 1m is longer than the 30s default deadline, and nothing falls back"),
        "{}",
        warnings[0]
    );
    let with_fallback = tool(
        "{ open_for = \"60s\" }",
        "fallback_response = { status = \"unknown\" }",
    );
    assert!(warnings_at(&with_fallback, "tools[0].breaker").is_empty());
    assert!(warnings_at(&tool("{ open_for = \"5s\" }", ""), "tools[0].breaker").is_empty());
    let model = plan_of(
        r#"
        version = 1
        [[models]]
        name = "gpt-4.1"
        per_try_timeout = "5s"
        breaker = { open_for = "45s" }
        deployments = [ { base_url = "https://api.openai.com/v1" } ]
        "#,
    );
    assert_eq!(warnings_at(&model, "models[0].breaker").len(), 1);
}

#[test]
fn a_model_route_without_a_real_concurrency_limit_is_warned_about() {
    let route = |concurrency: u32| {
        plan_of(&format!(
            r#"
            version = 1
            [[models]]
            name = "gpt-4.1"
            per_try_timeout = "5s"
            concurrency = {concurrency}
            deployments = [ {{ base_url = "https://api.openai.com/v1" }} ]
            "#
        ))
    };
    let plan = route(100_000);
    let warnings = warnings_at(&plan, "models[0]");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("concurrency 100000 is as good as no limit"),
        "{}",
        warnings[0]
    );
    assert!(warnings_at(&route(64), "models[0]").is_empty());
}

#[test]
fn a_run_allowance_smaller_than_a_conversation_needs_is_warned_about() {
    let run = |run: &str| {
        plan_of(&format!(
            r#"
            version = 1
            [run]
            {run}
            [[tools]]
            name = "lookup_order"
            upstream = {{ method = "GET", url = "http://127.0.0.1:9000/tools/lookup_order" }}
            per_try_timeout = "1s"
            retry = {{ max_attempts = 4 }}
            "#
        ))
    };
    let flat = run("retry_allowance = 1\nretry_allowance_per_call = 0");
    let warnings = warnings_at(&flat, "run");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("gives a conversation of 4 calls 1 retries")
            && warnings[0].contains("under the 4 that 99 in 100 such conversations need"),
        "{}",
        warnings[0]
    );
    assert!(warnings_at(&run(""), "run").is_empty(), "the defaults give 5");
}

#[test]
fn the_retries_a_conversation_needs_are_the_quantile_of_its_calls() {
    use crate::plan::warnings::retries_needed;
    // One call, one attempt: never a retry.
    assert_eq!(retries_needed(1, 1, 0.2, 0.99), 0);
    // One call of 2 attempts failing 20%: a retry 20% of the time.
    assert_eq!(retries_needed(1, 2, 0.2, 0.79), 0);
    assert_eq!(retries_needed(1, 2, 0.2, 0.81), 1);
    // Four calls of 4 attempts: P(0) = 0.8^4 = 0.41; the 99th percentile is 4.
    assert_eq!(retries_needed(4, 4, 0.2, 0.40), 0);
    assert_eq!(retries_needed(4, 4, 0.2, 0.96), 3); // P(<= 3) = 0.970
    assert_eq!(retries_needed(4, 4, 0.2, 0.99), 4); // P(<= 4) = 0.992
}
