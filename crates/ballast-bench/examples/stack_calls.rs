//! Runs N calls of one variant of the stack bench, and nothing else: a fixed amount of work whose instruction
//! count is repeatable on a busy machine, unlike criterion's wall-clock times.
//!
//! Variants: `in_memory` (a `ToolClient` over a transport that answers at once, the default), `tool` (a
//! `ToolClient` over loopback to ballast-chaos, preset `none`) and `bare` (a bare reqwest call to the same
//! endpoint). Per-call instructions: run a variant under callgrind with two counts and divide the difference:
//! ```text
//! cargo build --profile bench -p ballast-bench --example stack_calls
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.1000 target/release/examples/stack_calls tool 1000
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.6000 target/release/examples/stack_calls tool 6000
//! ```
//! (the second total minus the first, over 5,000). `callgrind_annotate` on either file shows where they go.

use std::hint::black_box;

use ballast::{Clients, tool::ToolCall, transport::HttpTransport};
use ballast_bench::stack::{in_memory_tool, lookup_config};
use ballast_chaos::Profile;
use serde_json::{Value, json};

fn main() {
    // `BALLAST_STACK_OBSERVED=1`: as in a service that exports its metrics and keeps its spans — the Prometheus
    // recorder (no listener: what it costs to record, not to scrape) and a tracing subscriber at INFO (the call
    // spans are then live; the attempt spans, at DEBUG, are not), both installed before the clients are built.
    if std::env::var_os("BALLAST_STACK_OBSERVED").is_some() {
        use tracing_subscriber::layer::SubscriberExt as _;
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        metrics::set_global_recorder(recorder).expect("the only recorder");
        let subscriber = tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::INFO);
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    }
    let mut args = std::env::args().skip(1);
    let variant = args.next().unwrap_or_else(|| "in_memory".to_owned());
    let calls: u64 = args
        .next()
        .map_or(Ok(10_000), |n| n.parse())
        .expect("the number of calls");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let chaos = runtime
        .block_on(ballast_chaos::spawn(Profile::preset("none", 0).expect("preset")))
        .expect("chaos serves");
    let url = chaos.url("/tools/lookup_order");
    let client = reqwest::Client::new();
    let config = lookup_config(&url);
    let arguments = json!({"order_id": "1234", "op": "bench"});
    match variant.as_str() {
        "in_memory" => {
            let tool = in_memory_tool(&config);
            measured(calls, || {
                runtime.block_on(async {
                    black_box(tool.call(ToolCall::new(arguments.clone())).await.expect("answer"))
                });
            });
        }
        "tool" => {
            let tools = Clients::from_config(&config)
                .build(HttpTransport::new(client).with_body_limit(config.server.body_limit))
                .expect("tools")
                .tools;
            let tool = tools.get("lookup_order").expect("configured").clone();
            measured(calls, || {
                runtime.block_on(async {
                    black_box(tool.call(ToolCall::new(arguments.clone())).await.expect("answer"))
                });
            });
        }
        "bare" => {
            measured(calls, || {
                runtime.block_on(async {
                    let response = client.post(&url).json(&arguments).send().await.expect("answer");
                    black_box(response.json::<Value>().await.expect("a JSON body"))
                });
            });
        }
        other => panic!("unknown variant {other}: in_memory, tool or bare"),
    }
    runtime.block_on(chaos.shutdown()).expect("chaos stops cleanly");
}

/// The calls, and only they: `scripts/stack-instructions` counts instructions inside this function alone
/// (callgrind's `--toggle-collect`), so the start-up — a runtime, a recorder calibrating its clock for as long as
/// the machine takes — adds nothing to either count.
#[inline(never)]
fn measured(calls: u64, mut call: impl FnMut()) {
    for _ in 0..calls {
        call();
    }
}
