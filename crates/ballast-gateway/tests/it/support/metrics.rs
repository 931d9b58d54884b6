//! The process's Prometheus recorder, for the tests that read `/metrics`.
//!
//! A recorder is the process's (the `metrics` facade has one global recorder), and every test of this binary runs
//! in this process: it is installed once, by the first test that asks, and every gateway opened after that records
//! into it. So a test that reads the metrics names its tools and model routes after itself — their labels (`target`,
//! `route`, `model`) are then its own whatever runs beside it — and never asserts on a series that is not
//! labelled by one of its names.
//!
//! The recorder is built as the gateway's own (`src/metrics.rs`: histograms of seconds with buckets); the
//! counters the gateway registers at zero when it installs its recorder are the binary's part, tested by
//! `ballast-cli`'s black-box tests.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Buckets of the histograms in seconds (any will do: the tests look for the series, not their bounds).
const SECONDS_BUCKETS: [f64; 8] = [0.001, 0.01, 0.1, 0.25, 0.5, 1.0, 10.0, 60.0];

/// The handle of the process's recorder, installed at the first call.
pub(crate) fn handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &SECONDS_BUCKETS)
                .expect("buckets")
                .install_recorder()
                .expect("the only recorder of this test binary")
        })
        .clone()
}

/// The value of the sample of `name` whose labels include every one of `labels` (`key="value"`), in `metrics`.
pub(crate) fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    ballast_testkit::Samples::parse(metrics).get(name, labels)
}
