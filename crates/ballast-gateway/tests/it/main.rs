//! The gateway's black-box tests, in process: `app(gateway)` driven with `tower::ServiceExt::oneshot` (axum's
//! `examples/testing`), its upstreams chaos routers — or any router a test writes — in this process, one per host
//! of the config's URLs (`support`). Everything a caller reads from the router is tested here: answers, codes
//! and headers, auth and principals, idempotency and replays, fallbacks and breakers, the model routes (JSON and
//! streams, OpenAI's error envelope, Responses state), refused inputs, runs, `/metrics` and `/status`.
//!
//! Why in process: no binary to start, no port, no config file, and time that can be paused — a test that waits
//! on a timeout, a latency or a breaker's open time runs under `#[tokio::test(start_paused = true)]` and takes
//! no wall time (the gateway reads tokio's clock; its SQLite store works on blocking threads, which hold paused
//! time back while they run; the store's leases are on the wall clock, so no test here waits for one to lapse). The
//! rest run in real time, every wait bounded.
//!
//! What needs the real process is `ballast-cli`'s black-box binary (`crates/ballast-cli/tests/it`): signals and
//! graceful shutdown, kill -9 and restarts, real sockets and connection limits, the store probes `serve` runs,
//! the official SDKs, the CLI's own output and exit codes.
//!
//! The Prometheus recorder is the process's: `support::metrics` installs it once, and the tests that read
//! `/metrics` name their tools and routes after themselves.
//!
//! One module per file, all in one binary: each test binary is a link, and one per crate keeps a cold build
//! short.

mod answers;
mod app;
mod auth;
mod breaker_gauges;
mod fallback;
mod idempotency;
mod inputs;
mod load;
mod mcp;
mod mcp_faults;
mod messages;
mod model_deadlines;
mod model_state;
mod model_streams;
mod models;
mod repeats;
mod runs;
mod support;
