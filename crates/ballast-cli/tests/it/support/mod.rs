//! What the black-box tests of the `ballast` binary share: running it, and reading what it printed.

// Each test file uses its own part of the fixtures.
#![allow(dead_code)]

pub(crate) mod deferred;
pub(crate) mod gateway;
pub(crate) mod mcp;
pub(crate) mod models;
pub(crate) mod process;
pub(crate) mod promql;
pub(crate) mod raw;
pub(crate) mod sdk;

use std::process::{Command, Output};

/// Runs the real `ballast` binary with `args` and waits for it.
pub(crate) fn ballast(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ballast"))
        .args(args)
        .output()
        .expect("the ballast binary runs")
}

/// Printed bytes as text.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
