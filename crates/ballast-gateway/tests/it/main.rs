//! The gateway's integration tests, in process (`app().oneshot(...)`).
//!
//! One module per file, all in one binary: each test binary is a link, and one per crate keeps a cold build
//! short.

mod app;
mod request_span;
