//! The last [`KEPT`] of per-interval deltas: what each target did in each interval, and which calls failed with
//! which code. Pure state: the time of each interval is given, never read.
//!
//! Sparse, so that its size follows the traffic and not the configuration: an interval keeps only the targets that
//! counted something in it (an MCP server with 2,000 tools of which 3 are called keeps 3 rows per interval), and
//! `to_json` sends only the targets active at least once in the window.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use ballast_core::Instant;
use serde_json::{Value, json};

use super::totals::{Counts, Totals};

/// How often the counters are read: one point of each chart.
pub(crate) const INTERVAL: Duration = Duration::from_secs(5);

/// How far back the history goes: what an operator opening the page sees at once.
pub(crate) const KEPT: Duration = Duration::from_secs(15 * 60);

/// The window of a failure's recent count (`last_5m`).
const RECENT: Duration = Duration::from_secs(5 * 60);

/// One interval: what was counted between the reading before and `end`, for the targets that counted anything.
#[derive(Debug)]
struct Interval {
    end: Instant,
    targets: BTreeMap<String, Counts>,
    failures: BTreeMap<(String, String), u64>,
}

/// The intervals of the last [`KEPT`], oldest first, and the totals of the last reading.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    intervals: VecDeque<Interval>,
    last: Totals,
}

impl Ring {
    /// Adds the interval that ends at `now` with the counters `totals` (the first is counted from zero: from the
    /// start of the process), and forgets the intervals older than [`KEPT`].
    pub(crate) fn record(&mut self, totals: Totals, now: Instant) {
        let targets = (totals.targets.iter())
            .map(|(target, counts)| {
                let before = self.last.targets.get(target).copied().unwrap_or_default();
                (target.clone(), counts.since(&before))
            })
            .filter(|(_, counts)| !counts.is_zero())
            .collect();
        let failures = (totals.failures.iter())
            .map(|(key, count)| {
                let before = self.last.failures.get(key).copied().unwrap_or_default();
                (key.clone(), count.saturating_sub(before))
            })
            .filter(|(_, count)| *count > 0)
            .collect();
        self.intervals.push_back(Interval {
            end: now,
            targets,
            failures,
        });
        self.last = totals;
        while (self.intervals.front()).is_some_and(|oldest| now.saturating_duration_since(oldest.end) >= KEPT)
        {
            self.intervals.pop_front();
        }
    }

    /// `{"interval_seconds", "points", "last_seconds_ago", "targets": {target: {"requests": [..], "ok", "fallback",
    /// "retries", "shed", "attempts"}}}`: one number per interval, oldest first, every array as long as `points`;
    /// only the targets that counted something in one of the intervals kept.
    pub(crate) fn to_json(&self, now: Instant) -> Value {
        let mut targets: BTreeMap<&str, [Vec<u64>; 6]> = BTreeMap::new();
        for interval in &self.intervals {
            for target in interval.targets.keys() {
                targets.entry(target).or_default();
            }
        }
        for interval in &self.intervals {
            for (target, series) in &mut targets {
                let counts = interval.targets.get(*target).copied().unwrap_or_default();
                let values = [
                    counts.requests,
                    counts.ok,
                    counts.fallback,
                    counts.retries,
                    counts.shed,
                    counts.attempts,
                ];
                for (series, value) in series.iter_mut().zip(values) {
                    series.push(value);
                }
            }
        }
        let targets: serde_json::Map<String, Value> = (targets.into_iter())
            .map(|(target, [requests, ok, fallback, retries, shed, attempts])| {
                let series = json!({
                    "requests": requests, "ok": ok, "fallback": fallback, "retries": retries, "shed": shed,
                    "attempts": attempts,
                });
                (target.to_owned(), series)
            })
            .collect();
        json!({
            "interval_seconds": INTERVAL.as_secs(),
            "points": self.intervals.len(),
            "last_seconds_ago": self.intervals.back().map(|last| now.saturating_duration_since(last.end).as_secs_f64()),
            "targets": targets,
        })
    }

    /// The failures of the kept intervals by target and code, the latest first: `[{"target", "code", "last_5m",
    /// "last_15m", "last_seconds_ago"}]` (`last_seconds_ago`: since the end of the last interval that counted one).
    pub(crate) fn failures_json(&self, now: Instant) -> Value {
        struct Seen {
            recent: u64,
            kept: u64,
            ago: Duration,
        }
        let mut seen: BTreeMap<&(String, String), Seen> = BTreeMap::new();
        for interval in &self.intervals {
            let ago = now.saturating_duration_since(interval.end);
            for (key, count) in &interval.failures {
                let entry = seen.entry(key).or_insert(Seen {
                    recent: 0,
                    kept: 0,
                    ago,
                });
                entry.kept += count;
                if ago < RECENT {
                    entry.recent += count;
                }
                entry.ago = ago;
            }
        }
        let mut failures: Vec<_> = seen.into_iter().collect();
        failures.sort_by(|(a_key, a), (b_key, b)| {
            a.ago.cmp(&b.ago).then(b.kept.cmp(&a.kept)).then(a_key.cmp(b_key))
        });
        let failures: Vec<Value> = (failures.into_iter())
            .map(|((target, code), seen)| {
                json!({
                    "target": target,
                    "code": code,
                    "last_5m": seen.recent,
                    "last_15m": seen.kept,
                    "last_seconds_ago": seen.ago.as_secs_f64(),
                })
            })
            .collect();
        Value::Array(failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(target: &str, requests: u64, retries: u64, failed: &[(&str, u64)]) -> Totals {
        let mut totals = Totals::default();
        let ok = requests - failed.iter().map(|(_, n)| n).sum::<u64>();
        let counts = Counts {
            requests,
            ok,
            retries,
            ..Counts::default()
        };
        totals.targets.insert(target.to_owned(), counts);
        for (code, count) in failed {
            totals
                .failures
                .insert((target.to_owned(), (*code).to_owned()), *count);
        }
        totals
    }

    fn now() -> Instant {
        ballast::clock::now()
    }

    #[tokio::test(start_paused = true)]
    async fn each_point_is_what_was_counted_in_its_interval_and_a_new_target_is_zero_before() {
        let mut ring = Ring::default();
        ring.record(totals("a", 4, 1, &[]), now());
        tokio::time::advance(INTERVAL).await;
        let mut both = totals("a", 10, 4, &[("upstream_unavailable", 2)]);
        both.targets.insert(
            "b".to_owned(),
            Counts {
                requests: 3,
                ok: 3,
                ..Counts::default()
            },
        );
        ring.record(both, now());
        tokio::time::advance(Duration::from_secs(2)).await;
        let history = ring.to_json(now());
        assert_eq!(history["points"], 2);
        assert_eq!(history["interval_seconds"], 5);
        assert_eq!(history["last_seconds_ago"], 2.0);
        assert_eq!(history["targets"]["a"]["requests"], json!([4, 6]));
        assert_eq!(history["targets"]["a"]["ok"], json!([4, 4]));
        assert_eq!(history["targets"]["a"]["retries"], json!([1, 3]));
        assert_eq!(history["targets"]["b"]["requests"], json!([0, 3]));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_targets_are_neither_kept_nor_sent() {
        let mut ring = Ring::default();
        let mut many = totals("busy", 1, 0, &[]);
        for i in 0..2_000 {
            many.targets.insert(format!("tool-{i}"), Counts::default());
        }
        many.targets.insert(
            "once".to_owned(),
            Counts {
                requests: 2,
                ok: 2,
                ..Counts::default()
            },
        );
        ring.record(many.clone(), now());
        for calls in 2..10 {
            tokio::time::advance(INTERVAL).await;
            many.targets.get_mut("busy").unwrap().requests = calls;
            many.targets.get_mut("busy").unwrap().ok = calls;
            ring.record(many.clone(), now());
        }
        let rows: usize = ring.intervals.iter().map(|interval| interval.targets.len()).sum();
        assert_eq!(
            rows,
            9 + 1,
            "a row per interval for `busy`, one for `once`, none for the idle tools"
        );
        let history = ring.to_json(now());
        let sent: Vec<&String> = history["targets"].as_object().unwrap().keys().collect();
        assert_eq!(sent, ["busy", "once"]);
        assert_eq!(
            history["targets"]["once"]["requests"],
            json!([2, 0, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(history["targets"]["busy"]["fallback"], json!(vec![0; 9]));
    }

    #[tokio::test(start_paused = true)]
    async fn fifteen_minutes_are_kept_and_older_intervals_forgotten() {
        let mut ring = Ring::default();
        let points = KEPT.as_secs() / INTERVAL.as_secs();
        for i in 0..points + 20 {
            ring.record(totals("a", i, 0, &[]), now());
            tokio::time::advance(INTERVAL).await;
        }
        let history = ring.to_json(now());
        assert_eq!(history["points"], points);
        let requests = history["targets"]["a"]["requests"].as_array().unwrap();
        assert!(requests.iter().all(|n| n == 1), "each interval counted one call");
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_listed_latest_first_with_their_recent_count() {
        let mut ring = Ring::default();
        ring.record(totals("a", 3, 0, &[("deadline_exceeded", 3)]), now());
        tokio::time::advance(Duration::from_secs(6 * 60)).await;
        ring.record(
            totals("a", 5, 0, &[("deadline_exceeded", 3), ("breaker_open", 2)]),
            now(),
        );
        tokio::time::advance(INTERVAL).await;
        ring.record(
            totals("a", 5, 0, &[("deadline_exceeded", 3), ("breaker_open", 2)]),
            now(),
        );
        let failures = ring.failures_json(now());
        assert_eq!(
            failures,
            json!([
                {"target": "a", "code": "breaker_open", "last_5m": 2, "last_15m": 2, "last_seconds_ago": 5.0},
                {"target": "a", "code": "deadline_exceeded", "last_5m": 0, "last_15m": 3, "last_seconds_ago": 365.0},
            ])
        );
        tokio::time::advance(KEPT).await;
        ring.record(
            totals("a", 5, 0, &[("deadline_exceeded", 3), ("breaker_open", 2)]),
            now(),
        );
        assert_eq!(
            ring.failures_json(now()),
            json!([]),
            "nothing failed in the last 15 minutes"
        );
    }
}
