//! The numbers of a strategy over one or more runs, and the table that prints them side by side.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::deferrals::DeferredSummary;
use super::millis::{millis, millis_opt};
use super::outage::{fail_fast_after, recovered_after, worst};
use super::{BreakerChange, DEADLINE_SLACK, FleetSummary, Run};

/// One strategy's numbers over the runs it is made of (one seed, or several pooled). Every duration is in real
/// time: a run at time scale 0.1 reports its durations divided by 0.1, as if it had run at full scale.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The strategy.
    pub strategy: String,
    /// The seeds pooled.
    pub seeds: Vec<u64>,
    /// Conversations.
    pub conversations: usize,
    /// Conversations that went through within their deadline (+50 ms).
    pub succeeded: usize,
    /// `succeeded / conversations`.
    pub success_rate: f64,
    /// Median conversation time, success or not.
    #[serde(serialize_with = "millis")]
    pub p50: Duration,
    /// 99th percentile.
    #[serde(serialize_with = "millis")]
    pub p99: Duration,
    /// Longest.
    #[serde(serialize_with = "millis")]
    pub max: Duration,
    /// Conversations that ended more than 50 ms past their deadline, success or not.
    pub overruns: usize,
    /// Side effects executed twice (or more) for one operation: the double refunds.
    pub duplicates: u64,
    /// Requests the upstream received per logical call the agents made.
    pub requests_per_call: f64,
    /// Calls shed by admission, per class.
    pub shed: BTreeMap<String, usize>,
    /// Attempts refused by the adaptive throttles, nothing sent (`None`: the strategy has none).
    pub throttled: Option<u64>,
    /// Failed conversations by stable code.
    pub failures: BTreeMap<String, usize>,
    /// Circuit-breaker changes, with their reasons (all runs, in order).
    pub breaker_changes: Vec<BreakerChange>,
    /// Whether the runs had a dead upstream (the two measures below apply).
    pub dead_upstream: bool,
    /// Dead upstream: from the outage's start until conversations fail fast (in at most 1 s, scaled) — every
    /// conversation started from then until the outage's end; `None`: never.
    #[serde(serialize_with = "millis_opt")]
    pub fail_fast_after: Option<Duration>,
    /// Dead upstream: from the outage's end until at least 99 % of the conversations started from then on
    /// succeed; `None`: never.
    #[serde(serialize_with = "millis_opt")]
    pub recovered_after: Option<Duration>,
    /// The gateway's instances — what each served, the kills, what was acknowledged but lost — for a gateway of
    /// several or on a shared store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instances: Option<FleetSummary>,
    /// The side effects the gateway deferred and how they ended, for agents that asked for deferral (`--defer`).
    /// A deferred conversation is neither among the `succeeded` nor in `failures`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deferred: Option<DeferredSummary>,
}

impl Summary {
    /// The numbers of `runs`, all of one strategy (pooled when there are several seeds).
    pub fn of(runs: &[Run]) -> Summary {
        let strategy = runs.first().map(|run| run.strategy.clone()).unwrap_or_default();
        let records: Vec<(&Run, &super::Record)> = runs
            .iter()
            .flat_map(|run| run.records.iter().map(move |record| (run, record)))
            .collect();
        let within = |run: &Run, took: Duration| took <= run.deadline + DEADLINE_SLACK;
        let succeeded = records
            .iter()
            .filter(|(run, record)| record.outcome.succeeded && within(run, record.took))
            .count();
        let unscaled = |run: &Run, d: Duration| d.div_f64(run.time_scale);
        let mut times: Vec<Duration> = records
            .iter()
            .map(|(run, record)| unscaled(run, record.took))
            .collect();
        times.sort();
        let percentile = |p: f64| {
            if times.is_empty() {
                return Duration::ZERO;
            }
            let rank = ((p * times.len() as f64).ceil() as usize).clamp(1, times.len());
            times[rank - 1]
        };
        let mut shed = BTreeMap::new();
        let mut failures = BTreeMap::new();
        for (run, record) in &records {
            if let Some(class) = &record.outcome.shed_class {
                *shed.entry(class.clone()).or_insert(0) += 1;
            }
            // A deferred conversation did not fail: its side effect waits (it still counts as an overrun if late).
            let code = match &record.outcome.failure {
                Some(code) => Some(code.clone()),
                None if record.outcome.deferred.is_some() => None,
                None if !within(run, record.took) => Some("past_deadline".to_owned()),
                None => None,
            };
            if let Some(code) = code {
                *failures.entry(code).or_insert(0) += 1;
            }
        }
        let calls: u64 = records
            .iter()
            .map(|(_, record)| u64::from(record.outcome.calls))
            .sum();
        let requests: u64 = runs.iter().map(|run| run.upstream_requests).sum();
        Summary {
            strategy,
            seeds: runs.iter().map(|run| run.seed).collect(),
            conversations: records.len(),
            succeeded,
            success_rate: ratio(succeeded as f64, records.len() as f64),
            p50: percentile(0.50),
            p99: percentile(0.99),
            max: times.last().copied().unwrap_or_default(),
            overruns: records
                .iter()
                .filter(|(run, record)| !within(run, record.took))
                .count(),
            duplicates: runs.iter().map(|run| run.duplicates).sum(),
            requests_per_call: ratio(requests as f64, calls as f64),
            shed,
            throttled: runs
                .iter()
                .map(|run| run.throttled)
                .try_fold(0, |sum, n| n.map(|n| sum + n)),
            failures,
            breaker_changes: runs
                .iter()
                .flat_map(|run| {
                    run.breaker_changes.iter().map(|change| BreakerChange {
                        at: unscaled(run, change.at),
                        ..change.clone()
                    })
                })
                .collect(),
            dead_upstream: runs.iter().any(|run| run.outage.is_some()),
            fail_fast_after: worst(runs, fail_fast_after),
            recovered_after: worst(runs, recovered_after),
            instances: FleetSummary::of(runs),
            deferred: DeferredSummary::of(runs),
        }
    }
}

fn ratio(part: f64, whole: f64) -> f64 {
    if whole == 0.0 { 0.0 } else { part / whole }
}

/// The summaries side by side, one column per strategy, for a terminal.
pub fn table(summaries: &[Summary]) -> String {
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let opt = |d: Option<Duration>| d.map_or_else(|| "never".to_owned(), ms);
    let counts = |map: &BTreeMap<String, usize>| {
        if map.is_empty() {
            "-".to_owned()
        } else {
            map.iter()
                .map(|(key, count)| format!("{key} {count}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let mut rows: Vec<(&str, Vec<String>)> = vec![
        (
            "conversations",
            summaries.iter().map(|s| s.conversations.to_string()).collect(),
        ),
        (
            "success within deadline",
            summaries
                .iter()
                .map(|s| format!("{:.1} % ({})", 100.0 * s.success_rate, s.succeeded))
                .collect(),
        ),
        ("latency p50", summaries.iter().map(|s| ms(s.p50)).collect()),
        ("latency p99", summaries.iter().map(|s| ms(s.p99)).collect()),
        ("latency max", summaries.iter().map(|s| ms(s.max)).collect()),
        (
            "overruns",
            summaries.iter().map(|s| s.overruns.to_string()).collect(),
        ),
        (
            "duplicate side effects",
            summaries.iter().map(|s| s.duplicates.to_string()).collect(),
        ),
        (
            "upstream requests per call",
            summaries
                .iter()
                .map(|s| format!("{:.2}", s.requests_per_call))
                .collect(),
        ),
        (
            "shed per class",
            summaries.iter().map(|s| counts(&s.shed)).collect(),
        ),
        (
            "throttled attempts",
            summaries
                .iter()
                .map(|s| s.throttled.map_or_else(|| "-".to_owned(), |n| n.to_string()))
                .collect(),
        ),
        (
            "failures by code",
            summaries.iter().map(|s| counts(&s.failures)).collect(),
        ),
        (
            "breaker changes",
            summaries
                .iter()
                .map(|s| s.breaker_changes.len().to_string())
                .collect(),
        ),
    ];
    if summaries.iter().any(|s| s.dead_upstream) {
        rows.push((
            "fails fast after",
            summaries.iter().map(|s| opt(s.fail_fast_after)).collect(),
        ));
        rows.push((
            "99 % success after",
            summaries.iter().map(|s| opt(s.recovered_after)).collect(),
        ));
    }
    let deferred: Vec<Option<&DeferredSummary>> = summaries.iter().map(|s| s.deferred.as_ref()).collect();
    rows.extend(DeferredSummary::rows(&deferred));
    let label_width = rows.iter().map(|(label, _)| label.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..summaries.len())
        .map(|i| {
            rows.iter()
                .map(|(_, cells)| cells[i].chars().count())
                .chain(std::iter::once(summaries[i].strategy.len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let _ = write!(out, "| {:label_width$} |", "");
    for (summary, width) in summaries.iter().zip(&widths) {
        let _ = write!(out, " {:width$} |", summary.strategy);
    }
    out.push('\n');
    let _ = write!(out, "|{}|", "-".repeat(label_width + 2));
    for width in &widths {
        let _ = write!(out, "{}|", "-".repeat(width + 2));
    }
    out.push('\n');
    for (label, cells) in rows {
        let _ = write!(out, "| {label:label_width$} |");
        for (cell, width) in cells.iter().zip(&widths) {
            let _ = write!(out, " {cell:width$} |");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash_sale::{Outcome, Record};

    fn record(agent: usize, started_ms: u64, took_ms: u64, succeeded: bool) -> Record {
        Record {
            agent,
            started: Duration::from_millis(started_ms),
            took: Duration::from_millis(took_ms),
            outcome: if succeeded {
                Outcome::success(4)
            } else {
                Outcome::failed(2, "model", "status_503")
            },
        }
    }

    fn run(records: Vec<Record>, outage: Option<(u64, u64)>) -> Run {
        Run {
            strategy: "s".into(),
            seed: 1,
            records,
            duplicates: 2,
            upstream_requests: 12,
            breaker_changes: Vec::new(),
            throttled: None,
            deadline: Duration::from_millis(1000),
            time_scale: 1.0,
            outage: outage.map(|(a, b)| (Duration::from_millis(a), Duration::from_millis(b))),
            fleet: None,
            deferred: None,
        }
    }

    #[test]
    fn success_counts_only_within_the_deadline_and_overruns_count_every_late_one() {
        let summary = Summary::of(&[run(
            vec![
                record(0, 0, 900, true),
                record(1, 0, 1049, true),
                record(2, 0, 1051, true),
                record(3, 0, 5000, false),
            ],
            None,
        )]);
        assert_eq!((summary.succeeded, summary.overruns), (2, 2));
        assert_eq!(summary.failures["past_deadline"], 1);
        assert_eq!(summary.failures["status_503"], 1);
        assert_eq!(summary.max, Duration::from_millis(5000));
        assert_eq!(summary.requests_per_call, 12.0 / 14.0);
        assert_eq!((summary.fail_fast_after, summary.recovered_after), (None, None));
    }

    #[test]
    fn a_deferred_conversation_neither_succeeds_nor_fails_but_may_overrun() {
        let deferred = |agent, took_ms| Record {
            outcome: Outcome::deferred(3, format!("k-{agent}")),
            ..record(agent, 0, took_ms, false)
        };
        let summary = Summary::of(&[run(
            vec![record(0, 0, 900, true), deferred(1, 400), deferred(2, 1200)],
            None,
        )]);
        assert_eq!(summary.succeeded, 1);
        assert!(summary.failures.is_empty(), "{:?}", summary.failures);
        assert_eq!(summary.overruns, 1, "late all the same");
    }

    #[test]
    fn dead_upstream_measures_when_failures_turn_fast_and_when_success_returns() {
        let records = vec![
            record(0, 0, 100, true),
            record(1, 1000, 1500, false), // slow failure in the outage
            record(2, 1500, 20, false),   // fast from here
            record(3, 1800, 20, false),
            record(4, 2100, 100, false), // after the outage, still failing
            record(5, 2500, 100, true),
            record(6, 2700, 100, true),
        ];
        let summary = Summary::of(&[run(records, Some((1000, 2000)))]);
        assert_eq!(summary.fail_fast_after, Some(Duration::from_millis(500)));
        assert_eq!(summary.recovered_after, Some(Duration::from_millis(500)));
    }

    #[test]
    fn the_table_has_a_column_per_strategy() {
        let summary = Summary::of(&[run(vec![record(0, 0, 10, true)], None)]);
        let text = table(&[
            summary.clone(),
            Summary {
                strategy: "other".into(),
                ..summary
            },
        ]);
        assert!(text.lines().next().unwrap().contains("other"), "{text}");
        assert!(text.contains("duplicate side effects"), "{text}");
    }
}
