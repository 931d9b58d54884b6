//! The `ballast` binary's black-box tests: each starts the real binary (and, for the SDK tests, the official
//! clients) against a chaos upstream on loopback. They hold what only a real process shows: signals and graceful
//! shutdown, kill -9 and restarts on the same store, real sockets (slow and idle connections, bodies never sent,
//! connection limits under a file limit), the store probes `serve` runs, the admin address it binds and prints,
//! its Prometheus recorder, panics anywhere in the process (its stderr), the official SDKs (OpenAI, Anthropic, MCP), and the CLI's own
//! commands (`serve --check`, `plan`, `chaos`, `demo`, `bench`), output and exit codes.
//!
//! What a caller reads from the gateway's router — answers, codes, headers, auth, idempotency, fallbacks, model
//! routes, refused inputs, runs, metrics and `/status` — is tested in process, faster and under paused time, by
//! `ballast-gateway`'s black-box tests (`crates/ballast-gateway/tests/it`).
//!
//! One module per file, all in one binary: each test binary is a link, and one per crate keeps a cold build
//! short.

mod bench;
mod bench_defer;
mod chaos;
mod dashboard;
mod demo;
mod deploy_alerts;
mod deploy_nginx;
mod plan;
mod serve_auth;
pub(crate) mod serve_deferred;
mod serve_deferred_crash;
mod serve_deferred_order;
mod serve_inputs;
mod serve_instances;
mod serve_lifecycle;
mod serve_load;
mod serve_mcp;
mod serve_mcp_faults;
mod serve_open_network;
mod serve_sdks;
mod serve_telemetry;
mod support;
