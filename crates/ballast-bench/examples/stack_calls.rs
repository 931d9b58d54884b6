//! Runs N `ToolClient` calls over the in-memory transport of the stack bench, and nothing else: a fixed amount
//! of work whose instruction count is repeatable on a busy machine, unlike criterion's wall-clock times.
//!
//! Per-call instructions: run it under callgrind with two counts and divide the difference, e.g.
//! ```text
//! cargo build --profile bench -p ballast-bench --example stack_calls
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.1000 target/release/examples/stack_calls 1000
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.11000 target/release/examples/stack_calls 11000
//! ```
//! (instructions of the second minus the first, over 10,000). `callgrind_annotate` on either file shows where
//! they go.

use std::hint::black_box;

use ballast::{ToolCall, ToolClients};
use ballast_config::Config;
use serde_json::json;

fn main() {
    let calls: u64 = std::env::args()
        .nth(1)
        .map_or(Ok(10_000), |n| n.parse())
        .expect("the number of calls");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // The same tool and canned answer as the bench's `ballast_tool_client_in_memory`.
    let config = Config::from_toml_str(
        r#"
        version = 1
        [[tools]]
        name = "lookup_order"
        upstream = { method = "POST", url = "http://127.0.0.1:9/tools/lookup_order" }
        per_try_timeout = "2s"
        "#,
    )
    .expect("valid config");
    let canned = tower::service_fn(|_request: http::Request<bytes::Bytes>| {
        let response = http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(bytes::Bytes::from_static(
                br#"{"order_id":"1234","status":"shipped","amount":42.5}"#,
            ))
            .expect("a response");
        std::future::ready(Ok::<_, ballast::Error>(response))
    });
    let tools = ToolClients::from_config(&config, canned).expect("tools");
    let tool = tools.get("lookup_order").expect("configured").clone();
    let arguments = json!({"order_id": "1234", "op": "bench"});
    for _ in 0..calls {
        runtime.block_on(async {
            black_box(tool.call(ToolCall::new(arguments.clone())).await.expect("answer"))
        });
    }
}
