//! What the workspace's tests share, in one place instead of a copy per crate (never published):
//!
//! - [`eventually`] and [`within`] — bounded polling, for a test against another process or a background task:
//!   a patience that ends the loop by itself, never a fixed sleep (`eventually` waits on tokio's clock: real time,
//!   or virtual time in a test under paused time);
//! - [`Samples`] — a Prometheus text exposition read strictly (a line that is not a sample fails the test), and
//!   its samples found by name and labels;
//! - [`scripted`] — a chaos profile in which one endpoint has given faults and meets scripted steps per operation;
//! - [`ConfigText`] and [`deployment`] — a gateway config's text from the parts the tests repeat (the store, a tool,
//!   a model route, a principal), read by the real parser;
//! - [`server_sent_events`] — a streamed answer's text read as its events ([`Sse`]), as an SSE client reads them;
//! - [`model_routes`] and [`MODEL_PROVIDERS`] — the model routes the gateway's black-box tests share (in process and
//!   against the binary with the SDKs), and the chaos providers behind them.

mod config;
mod models;
mod sse;

pub use config::{ConfigText, deployment};
pub use models::{MODEL_PROVIDERS, model_routes};
pub use sse::{Sse, server_sent_events};

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use ballast_chaos::{EndpointProfile, Profile, Script, ScriptStep};

/// How often the polls look.
const STEP: Duration = Duration::from_millis(20);

/// Polls `check` every 20 ms until it gives `Some`, for at most `patience`; panics naming `what` otherwise.
pub async fn eventually<T, F, Fut>(patience: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let polling = async {
        loop {
            if let Some(value) = check().await {
                return value;
            }
            tokio::time::sleep(STEP).await;
        }
    };
    match tokio::time::timeout(patience, polling).await {
        Ok(value) => value,
        Err(_) => panic!("not within {patience:?}: {what}"),
    }
}

/// Whether `check` holds within `patience`, looking every 20 ms (a blocking poll, for a test outside a runtime).
pub fn within(patience: Duration, mut check: impl FnMut() -> bool) -> bool {
    let mut waited = Duration::ZERO;
    loop {
        if check() {
            return true;
        }
        if waited >= patience {
            return false;
        }
        std::thread::sleep(STEP);
        waited += STEP;
    }
}

/// The samples of a Prometheus text exposition, by series (`name{labels}`).
#[derive(Clone, Debug, Default)]
pub struct Samples(HashMap<String, f64>);

impl Samples {
    /// Reads `text`; panics on a line that is neither a comment, blank nor a sample with a valid name and value.
    pub fn parse(text: &str) -> Samples {
        let mut samples = HashMap::new();
        for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a sample: {line:?}"));
            let name_end = series.find('{').unwrap_or(series.len());
            let name = &series[..name_end];
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    && !name.starts_with(|c: char| c.is_ascii_digit()),
                "bad metric name in {line:?}"
            );
            if name_end < series.len() {
                assert!(series.ends_with('}'), "unclosed labels in {line:?}");
            }
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
            };
            samples.insert(series.to_owned(), value);
        }
        Samples(samples)
    }

    /// The samples of `name` whose labels hold each of `labels` (`key="value"`), in no particular order.
    pub fn of<'a>(&'a self, name: &'a str, labels: &'a [&'a str]) -> impl Iterator<Item = f64> + 'a {
        (self.0.iter())
            .filter(move |(series, _)| {
                series.split('{').next() == Some(name) && labels.iter().all(|label| series.contains(label))
            })
            .map(|(_, value)| *value)
    }

    /// The sum of [`of`](Self::of).
    pub fn total(&self, name: &str, labels: &[&str]) -> f64 {
        self.of(name, labels).sum()
    }

    /// A sample of `name` with `labels`, if there is one (the only one, when the labels pick one series).
    pub fn get(&self, name: &str, labels: &[&str]) -> Option<f64> {
        self.of(name, labels).next()
    }

    /// Every series (`name{labels}`).
    pub fn series(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// A profile under `seed` in which `endpoint` has `faults` and meets `steps` for each (op, steps).
pub fn scripted(
    seed: u64,
    endpoint: &str,
    faults: EndpointProfile,
    scripts: &[(&str, &[ScriptStep])],
) -> Profile {
    let mut profile = Profile {
        seed,
        ..Profile::default()
    };
    profile.endpoints.insert(endpoint.to_owned(), faults);
    profile.scripts = scripts
        .iter()
        .map(|(op, steps)| Script {
            endpoint: endpoint.to_owned(),
            op: (*op).to_owned(),
            steps: steps.to_vec(),
        })
        .collect();
    profile
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_found_by_name_and_labels() {
        let samples = Samples::parse(
            "# TYPE ballast_requests_total counter\n\
             ballast_requests_total{target=\"a\",outcome=\"ok\"} 2\n\
             ballast_requests_total{target=\"b\",outcome=\"ok\"} 3\n\
             ballast_up 1\n",
        );
        assert_eq!(samples.total("ballast_requests_total", &["outcome=\"ok\""]), 5.0);
        assert_eq!(
            samples.get("ballast_requests_total", &["target=\"b\""]),
            Some(3.0)
        );
        assert_eq!(samples.get("ballast_up", &[]), Some(1.0));
        assert_eq!(samples.get("ballast_down", &[]), None);
    }

    #[test]
    #[should_panic(expected = "not a sample")]
    fn a_line_that_is_not_a_sample_fails() {
        Samples::parse("ballast_requests_total\n");
    }

    #[tokio::test(start_paused = true)]
    async fn eventually_gives_up_after_its_patience() {
        let mut polls = 0;
        let found = eventually(Duration::from_secs(1), "the third poll", || {
            polls += 1;
            std::future::ready((polls == 3).then_some(polls))
        })
        .await;
        assert_eq!(found, 3);
        let never = tokio::spawn(eventually(Duration::from_secs(1), "never", || {
            std::future::ready(None::<()>)
        }));
        assert!(never.await.is_err(), "it panicked");
    }
}
