//! The refund agent: look up an order, then refund it — both calls under ONE 30 s deadline, against the chaos
//! upstream in process with the flash-sale faults, printing each call's outcome report.
//!
//! Run: `cargo run -p ballast --example refund_agent` (optionally `-- SEED` to meet other faults).
//!
//! What to look for: every attempt carries what is left of the one deadline (not a fresh 30 s); the refund
//! carries one idempotency key across its retries, so a lost response is retried without a second refund (the
//! ledger at the end shows one execution per operation); a failure says what happened and whether the refund
//! may have happened (`OUTCOME UNKNOWN`).

use std::time::Duration;

use ballast::config::Config;
use ballast::policy::Deadline;
use ballast::{Clients, clock, context::scope, tool::ToolCall, transport::ServiceTransport};
use ballast_chaos::Profile;
use serde_json::json;
use tower::ServiceExt as _;

const TOOLS: &str = r#"
version = 1
[server]
default_timeout = "30s"

[[tools]]
name = "lookup_order"
upstream = { method = "POST", url = "http://chaos/tools/lookup_order" }
priority = "sheddable_plus"
per_try_timeout = "1s"

[[tools]]
name = "create_refund"
upstream = { method = "POST", url = "http://chaos/tools/create_refund" }
side_effects = true
upstream_idempotency = "keyed"      # the flash-sale preset's refund service deduplicates by key
priority = "critical"
per_try_timeout = "2s"
"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seed = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(7);
    let chaos = ballast_chaos::router(Profile::preset("flash-sale", seed)?);
    let config = Config::from_toml_str(TOOLS)?;
    let tools = Clients::from_config(&config)
        .build(ServiceTransport::new(chaos.clone()).with_body_limit(config.server.body_limit))?
        .tools;
    let (lookup, refund) = (
        tools.get("lookup_order").expect("configured"),
        tools.get("create_refund").expect("configured"),
    );

    println!("flash-sale faults, seed {seed}; one 30 s deadline for each customer request\n");
    for (n, order) in ["1001", "1002", "1003", "1004", "1005"].into_iter().enumerate() {
        let op = format!("refund-{order}");
        let deadline = Deadline::after(clock::now(), Duration::from_secs(30));
        // Everything inside the scope shares the deadline: the refund gets what the lookup left.
        scope(deadline, async {
            let found = lookup
                .call(ToolCall::new(json!({"order_id": order, "op": op})))
                .await;
            match &found {
                Ok(answer) => println!("{}", answer.report),
                Err(error) => println!("{}\n  -> {error}", error.report()),
            }
            let amount = found
                .as_ref()
                .ok()
                .and_then(|a| a.body()["amount"].as_f64())
                .unwrap_or(42.5);
            let call = ToolCall::new(json!({"order_id": order, "amount": amount, "op": op}))
                .run(format!("customer-request-{n}"))
                .step("refund", 0);
            match refund.call(call).await {
                Ok(answer) => println!("{}\n", answer.report),
                Err(error) => println!("{}\n  -> {error}\n", error.report()),
            }
        })
        .await;
    }

    let ledger = chaos
        .oneshot(http::Request::get("/ledger").body(axum::body::Body::empty())?)
        .await?;
    let ledger = axum::body::to_bytes(ledger.into_body(), 1 << 20).await?;
    println!(
        "refunds executed per operation (the chaos ledger): {}",
        String::from_utf8_lossy(&ledger)
    );
    Ok(())
}
