//! The benchmarks' integration tests.
//!
//! One module per file, all in one binary: each test binary is a link, and one per crate keeps a cold build
//! short.

mod flash_sale;
