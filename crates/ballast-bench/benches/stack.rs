//! What the layer stack costs per successful call: a `ToolClient` call (deadline, admission, retry, breaker,
//! attempt timeout, reqwest) against ballast-chaos (preset `none`) on loopback, next to a bare reqwest call to the
//! same endpoint. The difference is Ballast's added cost; both share the network and the chaos server's work.
//!
//! Run: `cargo bench -p ballast-bench --bench stack`. Target: added CPU per successful call under 5 µs median.
//! Results: BENCHMARKS.md.

use std::hint::black_box;

use ballast::{Clients, tool::ToolCall, transport::HttpTransport};
use ballast_bench::stack::{in_memory_tool, lookup_config};
use ballast_chaos::Profile;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tower::ServiceExt as _;

fn stack_vs_bare(c: &mut Criterion) {
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
    let tools = Clients::from_config(&config)
        .build(HttpTransport::new(client.clone()).with_body_limit(config.server.body_limit))
        .expect("tools")
        .tools;
    let tool = tools.get("lookup_order").expect("configured").clone();
    let arguments = json!({"order_id": "1234", "op": "bench"});

    let mut group = c.benchmark_group("tool_call");
    group.bench_function("bare_reqwest", |b| {
        b.iter(|| {
            runtime.block_on(async {
                // What an agent does with a tool's answer: send the arguments as JSON, read the answer as JSON
                // (the ToolClient does both too).
                let response = client.post(&url).json(&arguments).send().await.expect("answer");
                black_box(response.json::<serde_json::Value>().await.expect("a JSON body"))
            })
        })
    });
    // The transport alone (http::Request -> reqwest -> buffered http::Response): what the layers add is the rest.
    let transport = HttpTransport::new(client.clone()).with_body_limit(config.server.body_limit);
    let body = bytes::Bytes::from(serde_json::to_vec(&arguments).expect("json"));
    group.bench_function("ballast_transport_only", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let request = http::Request::post(url.as_str())
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .expect("a request");
                let response = transport.clone().oneshot(request).await.expect("answer");
                black_box(
                    serde_json::from_slice::<serde_json::Value>(response.body().as_bytes().expect("whole"))
                        .expect("json"),
                )
            })
        })
    });
    group.bench_function("ballast_tool_client", |b| {
        b.iter(|| {
            runtime.block_on(async {
                black_box(tool.call(ToolCall::new(arguments.clone())).await.expect("answer"))
            })
        })
    });
    // The whole ToolClient over a transport that answers at once in memory: the layers' own cost, no network.
    let in_memory = in_memory_tool(&config);
    group.bench_function("ballast_tool_client_in_memory", |b| {
        b.iter(|| {
            runtime.block_on(async {
                black_box(
                    in_memory
                        .call(ToolCall::new(arguments.clone()))
                        .await
                        .expect("answer"),
                )
            })
        })
    });
    group.finish();
    runtime.block_on(chaos.shutdown()).expect("chaos stops cleanly");
}

criterion_group!(benches, stack_vs_bare);
criterion_main!(benches);
