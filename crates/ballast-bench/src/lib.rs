//! Ballast's benchmarks: the tool-call stack's cost (`cargo bench -p ballast-bench`) and the flash-sale scenario
//! (`ballast bench flash-sale`). Benchmarks are not tests: results go to BENCHMARKS.md with their command.
//!
//! # Layout
//! - [`stack`] — what the stack bench (`benches/stack.rs`) and its instruction-count twin
//!   (`examples/stack_calls.rs`) both call: the `lookup_order` tool's config and its in-memory client.
//! - [`flash_sale`] — the flash-sale bench: scenarios, the strategies (naive, the `ballast` crate in process,
//!   agents over HTTP through Ballast's gateway or any other), the report and chart.
//! - [`demo`] — `ballast demo`: the chaos upstream and a gateway to try, after a short flash sale.
//! - [`overhead`] — what the gateway costs on the path, against a pass-through proxy (`ballast bench overhead`).
//! - `child` — the `ballast` processes a bench starts, killed and waited for whatever happens.

mod child;
pub mod demo;
pub mod flash_sale;
pub mod overhead;

pub mod stack {
    //! The tool-call stack bench's fixtures, shared by the criterion bench and the callgrind example so both
    //! measure the same client.

    use ballast::{Clients, tool::ToolClient};
    use ballast_config::Config;

    /// One tool, `lookup_order`, at `url` with a 2 s per-try timeout and every other setting at its default.
    pub fn lookup_config(url: &str) -> Config {
        Config::from_toml_str(&format!(
            r#"
            version = 1
            [[tools]]
            name = "lookup_order"
            upstream = {{ method = "POST", url = "{url}" }}
            per_try_timeout = "2s"
            "#
        ))
        .expect("valid config")
    }

    /// The `lookup_order` tool of `config` over a transport that answers at once in memory with a canned order:
    /// the layers' own cost, no network.
    pub fn in_memory_tool(config: &Config) -> ToolClient {
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
        let tools = Clients::from_config(config).build(canned).expect("tools").tools;
        tools.get("lookup_order").expect("configured").clone()
    }
}
