//! A ToolClient in front of an `IdempotencyLayer` believes what the server says (issue 11): an answer that says
//! the outcome is unknown — the layer's `urn:ballast:outcome_unknown` (502), `urn:ballast:handler_panicked` (500),
//! a handler's own answer marked `OutcomeUnknown` (`ballast-outcome: unknown`) — makes the call's outcome unknown,
//! its code `outcome_unknown`, and nothing is re-run: a caller that trusts it checks the operation before
//! refunding again under a new key. Every combination: an upstream that deduplicates (`keyed`) or not (`none`), a
//! handler that panics or one whose answer is marked, the first call and a later call with the same key.

use crate::support;

use ballast::{Clients, idempotency::IdempotencyLayer, tool::ToolCall, transport::ServiceTransport};
use ballast_config::Config;
use ballast_core::{ErrorCode, IdempotencyKey};
use serde_json::json;

use support::BODY_LIMIT;
use support::idempotency::{Handlers, app, sqlite};

/// A side-effecting tool at `path` of the app, with this `upstream_idempotency`.
fn config(path: &str, upstream_idempotency: &str) -> Config {
    Config::from_toml_str(&format!(
        r#"
        version = 1
        [[tools]]
        name = "create_refund"
        upstream = {{ method = "POST", url = "http://app{path}" }}
        side_effects = true
        upstream_idempotency = "{upstream_idempotency}"
        per_try_timeout = "5s"
        retry = {{ max_attempts = 3, base = "10ms", cap = "20ms" }}
        "#
    ))
    .expect("a valid config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_says_the_outcome_is_unknown_is_believed() {
    for upstream_idempotency in ["none", "keyed"] {
        for path in ["/lost", "/panic"] {
            let store = sqlite().await;
            let handlers = Handlers::new(true);
            let app = app(IdempotencyLayer::new(store.clone()), &handlers, store);
            let tools = Clients::from_config(&config(path, upstream_idempotency))
                .build(ServiceTransport::new(app).with_body_limit(BODY_LIMIT))
                .expect("tools build")
                .tools;
            let tool = tools.get("create_refund").expect("configured");
            let key = IdempotencyKey::parse("5b0f7c3e-0000-4000-8000-0000000000aa").unwrap();
            for call in ["first call", "later call with the same key"] {
                let error = tool
                    .call(ToolCall::new(json!({"order_id": "A-1", "amount": 5})).idempotency_key(key.clone()))
                    .await
                    .expect_err("no answer to trust");
                let case = format!("{upstream_idempotency} {path}, {call}");
                assert!(error.outcome_unknown(), "{case}: {error}\n{}", error.report());
                assert_eq!(
                    error.code(),
                    ErrorCode::OutcomeUnknown,
                    "{case}: {}",
                    error.report()
                );
                assert_eq!(
                    handlers.runs(),
                    1,
                    "{case}: the handler ran once, and never again"
                );
            }
        }
    }
}
