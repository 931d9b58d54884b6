//! The `ballast` binary's black-box tests: each starts the real binary (and, for the SDK tests, the
//! official clients) against a chaos upstream on loopback.
//!
//! One module per file, all in one binary: each test binary is a link, and one per crate keeps a cold build
//! short.

mod bench;
mod chaos;
mod demo;
mod plan;
mod serve_auth;
mod serve_fallback;
mod serve_idempotency;
mod serve_inputs;
mod serve_lifecycle;
mod serve_load;
mod serve_models;
mod serve_open_network;
mod serve_sdks;
mod support;
