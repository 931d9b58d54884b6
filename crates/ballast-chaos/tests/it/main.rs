//! The chaos upstream's integration tests: its faults, APIs and admin endpoints over loopback.
//!
//! One module per file, all in one binary: each test binary is a link, and one per crate keeps a cold build
//! short.

mod admin;
mod embeddings;
mod faults;
mod keys;
mod mcp;
mod messages;
mod messages_faults;
mod responses;
mod responses_faults;
mod streaming;
mod support;
