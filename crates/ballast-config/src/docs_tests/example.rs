//! examples/ballast.toml: what it sets up, and that it fits its own deadline.

use std::time::Duration;

use ballast_core::{Priority, UpstreamIdempotency};

use super::*;

#[test]
fn the_example_loads_and_is_the_flash_sale_setup() {
    let config = Config::from_toml_str(EXAMPLE).unwrap();
    assert_eq!(config.principals.len(), 1);
    assert!(matches!(
        config.store.location,
        StoreLocation::Url {
            kind: StoreKind::Sqlite,
            ..
        }
    ));
    let model = config.model("gpt-4.1").unwrap();
    assert_eq!(model.deployments.len(), 2);
    assert_eq!(model.deployments[1].base_url, "http://127.0.0.1:9000/v1");

    let tool = |name| config.tool(name).unwrap();
    let lookup = tool("lookup_order");
    assert!(!lookup.side_effects);
    assert_eq!(lookup.priority, Priority::SheddablePlus);
    let refund = tool("create_refund");
    assert!(refund.side_effects);
    assert_eq!(
        (refund.upstream_idempotency, refund.priority),
        (UpstreamIdempotency::Keyed, Priority::Critical)
    );
    let payment = tool("process_payment");
    assert!(payment.side_effects);
    assert_eq!(
        payment.upstream_idempotency,
        UpstreamIdempotency::KeyedReplaysErrors
    );
    assert_eq!(
        (payment.priority, payment.concurrency, payment.queue),
        (Priority::CriticalPlus, 32, 256)
    );
    let search = tool("search_products");
    assert!(!search.side_effects);
    assert_eq!(search.priority, Priority::Sheddable);
    assert!(matches!(search.fallback, Some(ToolFallback::Response(_))));

    let env = |name: &str| {
        ["BALLAST_KEY_SHOP_AGENTS", "OPENAI_API_KEY"]
            .contains(&name)
            .then(|| "set".to_owned())
    };
    assert_eq!(config.missing_secrets(&env), []);
}

/// The longest a call can take if every try times out and every sleep is at its cap.
fn naive_worst(per_try: Duration, retry: &RetryConfig) -> Duration {
    crate::plan::naive_worst_case(per_try, retry)
}

/// The example teaches good settings: every call's worst case fits the default deadline, and the model's
/// primary fits its share and leaves the fallback enough (what `ballast plan` would warn about otherwise).
#[test]
fn the_example_fits_its_own_deadline() {
    let config = Config::from_toml_str(EXAMPLE).unwrap();
    let deadline = config.server.default_timeout - config.server.reserve;
    for tool in &config.tools {
        assert!(
            naive_worst(tool.per_try_timeout, &tool.retry) <= deadline,
            "{}",
            tool.name
        );
    }
    let model = config.model("gpt-4.1").unwrap();
    let primary = naive_worst(model.deployments[0].per_try_timeout, &model.retry);
    let fallback = naive_worst(model.deployments[1].per_try_timeout, &model.retry);
    assert!(primary <= deadline.mul_f64(model.primary_share));
    assert!(fallback <= deadline - deadline.mul_f64(model.primary_share));
}
