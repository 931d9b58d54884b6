//! The cumulative counters the history needs, read from the recorder's Prometheus text: what the gateway already
//! counts on the request path, so keeping a history adds nothing there. A small reader of the exposition format's
//! sample lines (`name{label="value",...} number`), not a general one: only the four counters below are kept.

use std::collections::BTreeMap;

/// One target's counters, cumulative since the process started (or, as a delta, over one interval).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Calls that ended (`ballast_requests_total`, every outcome).
    pub(crate) requests: u64,
    /// Calls the upstream answered (`ok`).
    pub(crate) ok: u64,
    /// Calls a fallback answered (`fallback`): answered, but not by the upstream.
    pub(crate) fallback: u64,
    /// Retries (`ballast_retries_total`, every reason).
    pub(crate) retries: u64,
    /// Calls shed by admission (`ballast_shed_total`, every class and reason).
    pub(crate) shed: u64,
    /// Attempts sent (`ballast_attempts_total`).
    pub(crate) attempts: u64,
}

impl Counts {
    /// What was counted since `earlier` (counters only grow; a smaller value counts as none).
    pub(crate) fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            requests: self.requests.saturating_sub(earlier.requests),
            ok: self.ok.saturating_sub(earlier.ok),
            fallback: self.fallback.saturating_sub(earlier.fallback),
            retries: self.retries.saturating_sub(earlier.retries),
            shed: self.shed.saturating_sub(earlier.shed),
            attempts: self.attempts.saturating_sub(earlier.attempts),
        }
    }

    /// Whether nothing was counted (an idle target's interval, which the history does not keep).
    pub(crate) fn is_zero(&self) -> bool {
        *self == Counts::default()
    }
}

/// Every target's counters, and the calls that failed by target and code, at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) targets: BTreeMap<String, Counts>,
    /// `(target, code)`: calls that ended with that stable error code.
    pub(crate) failures: BTreeMap<(String, String), u64>,
}

impl Totals {
    /// The totals in `text`, the recorder's rendering. Lines that are not samples of the four counters are
    /// skipped; so is a sample that cannot be read (the history is a picture, not an account).
    pub(crate) fn parse(text: &str) -> Totals {
        let mut totals = Totals::default();
        for line in text.lines() {
            if let Some(sample) = Sample::parse(line) {
                totals.add(&sample);
            }
        }
        totals
    }

    fn add(&mut self, sample: &Sample<'_>) {
        let Some(target) = sample.label("target") else {
            return;
        };
        let counts = || Counts::default();
        match sample.name {
            "ballast_requests_total" => {
                let outcome = sample.label("outcome").unwrap_or_default();
                let entry = self.targets.entry(target.clone()).or_insert_with(counts);
                entry.requests += sample.value;
                if outcome == "ok" {
                    entry.ok += sample.value;
                } else if outcome == "fallback" {
                    entry.fallback += sample.value;
                } else if sample.value > 0 {
                    *self.failures.entry((target, outcome)).or_default() += sample.value;
                }
            }
            "ballast_retries_total" => {
                self.targets.entry(target).or_insert_with(counts).retries += sample.value;
            }
            "ballast_shed_total" => self.targets.entry(target).or_insert_with(counts).shed += sample.value,
            "ballast_attempts_total" => {
                self.targets.entry(target).or_insert_with(counts).attempts += sample.value;
            }
            _ => {}
        }
    }
}

/// One sample line of a kept counter.
#[derive(Debug, PartialEq)]
struct Sample<'a> {
    name: &'a str,
    /// The labels as written, between the braces.
    labels: &'a str,
    value: u64,
}

/// The counters the history reads.
const KEPT: [&str; 4] = [
    "ballast_requests_total",
    "ballast_retries_total",
    "ballast_shed_total",
    "ballast_attempts_total",
];

impl<'a> Sample<'a> {
    fn parse(line: &'a str) -> Option<Sample<'a>> {
        let open = line.find('{')?;
        let name = &line[..open];
        if !KEPT.contains(&name) {
            return None;
        }
        let close = line.rfind('}')?;
        let value: f64 = line.get(close + 1..)?.trim().split(' ').next()?.parse().ok()?;
        // A counter's value is a whole number the exporter writes as a float.
        let value = (value.is_finite() && value >= 0.0).then(|| value.round() as u64)?;
        Some(Sample {
            name,
            labels: line.get(open + 1..close)?,
            value,
        })
    }

    /// The value of label `key`, unescaped (`\"`, `\\`, `\n`), if present.
    fn label(&self, key: &str) -> Option<String> {
        let mut rest = self.labels;
        while !rest.is_empty() {
            let (name, after) = rest.split_once("=\"")?;
            let (value, after) = quoted(after)?;
            if name.trim_start_matches(',') == key {
                return Some(value);
            }
            rest = after;
        }
        None
    }
}

/// The value of a quoted label (after its opening quote), unescaped, and what follows its closing quote.
fn quoted(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[at + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other => value.push(other),
            },
            other => value.push(other),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const RENDERED: &str = "\
# TYPE ballast_requests_total counter
ballast_requests_total{route=\"agent\",target=\"agent[0] mock\",outcome=\"ok\"} 7
ballast_requests_total{route=\"agent\",target=\"agent[0] mock\",outcome=\"fallback\"} 1
ballast_requests_total{route=\"agent\",target=\"agent[0] mock\",outcome=\"upstream_unavailable\"} 2
ballast_requests_total{route=\"agent\",target=\"agent[0] mock\",outcome=\"breaker_open\"} 0
ballast_requests_total{route=\"lookup\",target=\"lookup\",outcome=\"ok\"} 3
# TYPE ballast_retries_total counter
ballast_retries_total{target=\"agent[0] mock\",reason=\"503\"} 4
ballast_retries_total{target=\"agent[0] mock\",reason=\"timeout\"} 1
ballast_attempts_total{target=\"agent[0] mock\"} 15
ballast_shed_total{target=\"lookup\",priority=\"sheddable\",reason=\"queue_full\"} 6
ballast_shed_total{target=\"lookup\",priority=\"critical\",reason=\"queue_full\"} 1
ballast_throttled_total{target=\"lookup\"} 9
ballast_request_duration_seconds_bucket{route=\"lookup\",le=\"0.5\"} 3
ballast_runs_evicted_total 0
";

    #[test]
    fn the_four_counters_are_summed_per_target_and_failures_kept_by_code() {
        let totals = Totals::parse(RENDERED);
        let agent = Counts {
            requests: 10,
            ok: 7,
            fallback: 1,
            retries: 5,
            shed: 0,
            attempts: 15,
        };
        assert_eq!(totals.targets["agent[0] mock"], agent);
        let lookup = Counts {
            requests: 3,
            ok: 3,
            shed: 7,
            ..Counts::default()
        };
        assert_eq!(totals.targets["lookup"], lookup);
        assert_eq!(totals.targets.len(), 2, "throttled and histograms are not read");
        let failures: Vec<_> = totals.failures.iter().collect();
        assert_eq!(
            failures,
            [(
                &("agent[0] mock".to_owned(), "upstream_unavailable".to_owned()),
                &2
            )],
            "a code counted zero times is no failure"
        );
    }

    #[test]
    fn escaped_label_values_and_odd_lines_are_read_or_skipped_not_misread() {
        let text = "\
ballast_attempts_total{target=\"a \\\"quoted\\\", b=\\\\c\"} 2
ballast_attempts_total{target=\"x\"} not-a-number
ballast_attempts_total{target=\"y\"} -3
ballast_attempts_total{target=\"unterminated} 1
ballast_attempts_total{route=\"no target\"} 1
ballast_attempts_total{target=\"z\"} 4e0 1700000000
";
        let totals = Totals::parse(text);
        let names: Vec<&str> = totals.targets.keys().map(String::as_str).collect();
        assert_eq!(names, ["a \"quoted\", b=\\c", "z"]);
        assert_eq!(totals.targets["a \"quoted\", b=\\c"].attempts, 2);
        assert_eq!(
            totals.targets["z"].attempts, 4,
            "a timestamp after the value is ignored"
        );
    }

    #[test]
    fn a_delta_never_goes_below_zero() {
        let later = Counts {
            requests: 5,
            ok: 1,
            ..Counts::default()
        };
        let earlier = Counts {
            requests: 2,
            ok: 3,
            ..Counts::default()
        };
        let delta = later.since(&earlier);
        assert_eq!((delta.requests, delta.ok), (3, 0));
        assert_eq!(Counts::default().since(&later), Counts::default());
    }
}
