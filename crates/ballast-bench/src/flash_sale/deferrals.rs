//! How the side effects the gateway deferred (`--defer`) ended: per run ([`DeferredRun`], what the drain read of
//! each) and over the runs of one strategy ([`DeferredSummary`]), printed as rows of the table and in the JSON.
//!
//! Every deferred operation is counted once, in one of five ends, so that `deferred = completed + expired +
//! failed + outcome_unknown + unfinished`: nothing deferred goes unaccounted for. "Time to complete" is the
//! gateway's `took_ms` of the completed ones (from the deferral to the end), scaled back to full speed as every
//! duration of the report is — though the queue's own waits run in real time at any scale ([`super::defer`]), so
//! at a small `--time-scale` they weigh more in it than they would at full speed.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;

use super::Run;
use super::millis::millis_opt;

/// How one deferred operation ended, as the drain last read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferredState {
    /// Done later: its result is the upstream's answer.
    Completed,
    /// Its ttl ended while it waited.
    Expired,
    /// The upstream refused it for good, or its attempts were spent.
    Failed,
    /// Sent, and nobody knows whether it acted: it will not run again.
    OutcomeUnknown,
    /// Not ended by the drain deadline (still queued or in progress, or never read), or unknown to the gateway
    /// (`not_found`).
    Unfinished,
}

/// One deferred operation's end.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeferredEnd {
    /// The operation's key.
    pub key: String,
    /// The tool.
    pub tool: String,
    /// The call's `op` (what the upstream's ledger records it under).
    pub op: Option<String>,
    /// How it ended.
    pub state: DeferredState,
    /// The last `status` the gateway gave for it (`unread`: none).
    pub last_status: String,
    /// The gateway's `took_ms`, from the deferral to its end (real time, unscaled), for one that ended.
    #[serde(serialize_with = "millis_opt")]
    pub took: Option<Duration>,
}

/// One run's deferred operations, drained.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeferredRun {
    /// Each operation's end, in the order drained.
    pub ends: Vec<DeferredEnd>,
    /// Operations that completed later but whose `op` the upstream's ledger does not hold (filled in by the
    /// runner): a gateway that reports a side effect done that never ran. 0 expected.
    pub acknowledged_lost: u64,
}

impl DeferredRun {
    pub(super) fn new(ends: Vec<DeferredEnd>) -> DeferredRun {
        DeferredRun {
            ends,
            acknowledged_lost: 0,
        }
    }

    /// The completed operations whose `op` is not in `ledger` (the operations the upstream executed).
    pub(super) fn completed_not_in(&self, ledger: &HashSet<String>) -> u64 {
        self.ends
            .iter()
            .filter(|end| end.state == DeferredState::Completed)
            .filter(|end| end.op.as_ref().is_none_or(|op| !ledger.contains(op)))
            .count() as u64
    }
}

/// A strategy's deferred operations over its runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeferredSummary {
    /// Side effects the gateway deferred (one per deferred conversation).
    pub deferred: u64,
    /// Of those, done later.
    pub completed: u64,
    /// Median time from the deferral to completion, scaled back to full speed (`None`: none completed).
    #[serde(serialize_with = "millis_opt")]
    pub took_p50: Option<Duration>,
    /// 99th percentile.
    #[serde(serialize_with = "millis_opt")]
    pub took_p99: Option<Duration>,
    /// Ended by their ttl.
    pub expired: u64,
    /// Refused for good, or out of attempts.
    pub failed: u64,
    /// Ended with an unknown outcome.
    pub outcome_unknown: u64,
    /// Not ended by the drain deadline, or unknown to the gateway.
    pub unfinished: u64,
    /// Completed, but not in the upstream's ledger.
    pub acknowledged_lost: u64,
}

impl DeferredSummary {
    /// The deferred operations of `runs` (all of one strategy); `None` when none asked for deferral.
    pub(super) fn of(runs: &[Run]) -> Option<DeferredSummary> {
        let drained: Vec<(&Run, &DeferredRun)> = runs
            .iter()
            .filter_map(|run| run.deferred.as_ref().map(|deferred| (run, deferred)))
            .collect();
        if drained.is_empty() {
            return None;
        }
        let ends = || drained.iter().flat_map(|(_, deferred)| &deferred.ends);
        let count = |state: DeferredState| ends().filter(|end| end.state == state).count() as u64;
        let mut took: Vec<Duration> = drained
            .iter()
            .flat_map(|(run, deferred)| {
                (deferred.ends.iter())
                    .filter(|end| end.state == DeferredState::Completed)
                    .filter_map(|end| end.took)
                    .map(|took| took.div_f64(run.time_scale))
            })
            .collect();
        took.sort();
        Some(DeferredSummary {
            deferred: ends().count() as u64,
            completed: count(DeferredState::Completed),
            took_p50: percentile(&took, 0.50),
            took_p99: percentile(&took, 0.99),
            expired: count(DeferredState::Expired),
            failed: count(DeferredState::Failed),
            outcome_unknown: count(DeferredState::OutcomeUnknown),
            unfinished: count(DeferredState::Unfinished),
            acknowledged_lost: drained
                .iter()
                .map(|(_, deferred)| deferred.acknowledged_lost)
                .sum(),
        })
    }

    /// The table's rows for these summaries' deferred operations (`-` for a strategy that asked for none); none
    /// when no strategy did.
    pub(super) fn rows(summaries: &[Option<&DeferredSummary>]) -> Vec<(&'static str, Vec<String>)> {
        if summaries.iter().all(Option::is_none) {
            return Vec::new();
        }
        let cells = |cell: &dyn Fn(&DeferredSummary) -> String| -> Vec<String> {
            summaries
                .iter()
                .map(|summary| summary.map_or_else(|| "-".to_owned(), cell))
                .collect()
        };
        let ms = |d: Option<Duration>| {
            d.map_or_else(
                || "-".to_owned(),
                |d| format!("{:.0} ms", d.as_secs_f64() * 1000.0),
            )
        };
        vec![
            ("deferred", cells(&|s| s.deferred.to_string())),
            (
                "completed later",
                cells(&|s| match s.acknowledged_lost {
                    0 => s.completed.to_string(),
                    lost => format!("{} ({lost} not in the upstream's ledger)", s.completed),
                }),
            ),
            (
                "time to complete p50 / p99",
                cells(&|s| match s.took_p50 {
                    None => "-".to_owned(),
                    Some(_) => format!("{} / {}", ms(s.took_p50), ms(s.took_p99)),
                }),
            ),
            ("expired", cells(&|s| s.expired.to_string())),
            ("failed later", cells(&|s| s.failed.to_string())),
            ("outcome unknown later", cells(&|s| s.outcome_unknown.to_string())),
            ("unfinished at the drain", cells(&|s| s.unfinished.to_string())),
        ]
    }
}

/// The `p` quantile of `sorted` (nearest rank); `None` when empty.
fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(state: DeferredState, took_ms: Option<u64>, op: &str) -> DeferredEnd {
        DeferredEnd {
            key: format!("k-{op}"),
            tool: "create_refund".into(),
            op: Some(op.into()),
            state,
            last_status: "x".into(),
            took: took_ms.map(Duration::from_millis),
        }
    }

    fn run(ends: Vec<DeferredEnd>, time_scale: f64) -> Run {
        Run {
            strategy: "gateway (defer)".into(),
            seed: 1,
            records: Vec::new(),
            duplicates: 0,
            upstream_requests: 0,
            breaker_changes: Vec::new(),
            throttled: Some(0),
            deadline: Duration::from_secs(30),
            time_scale,
            outage: None,
            fleet: None,
            deferred: Some(DeferredRun::new(ends)),
        }
    }

    #[test]
    fn every_deferred_operation_is_counted_once_and_times_are_scaled_back() {
        use DeferredState::*;
        let runs = [
            run(
                vec![
                    end(Completed, Some(100), "a"),
                    end(Completed, Some(300), "b"),
                    end(Expired, None, "c"),
                ],
                0.1,
            ),
            run(
                vec![
                    end(Failed, Some(5), "d"),
                    end(OutcomeUnknown, Some(5), "e"),
                    end(Unfinished, None, "f"),
                ],
                0.1,
            ),
        ];
        let summary = DeferredSummary::of(&runs).expect("deferred");
        assert_eq!(summary.deferred, 6);
        assert_eq!(
            summary.completed
                + summary.expired
                + summary.failed
                + summary.outcome_unknown
                + summary.unfinished,
            summary.deferred
        );
        assert_eq!(summary.took_p50, Some(Duration::from_secs(1)));
        assert_eq!(summary.took_p99, Some(Duration::from_secs(3)));
        let ledger: HashSet<String> = ["a".to_owned()].into();
        assert_eq!(runs[0].deferred.as_ref().unwrap().completed_not_in(&ledger), 1);
        let rows = DeferredSummary::rows(&[Some(&summary), None]);
        let row = |label: &str| {
            rows.iter()
                .find(|(l, _)| *l == label)
                .map(|(_, cells)| cells.clone())
        };
        assert_eq!(row("deferred"), Some(vec!["6".to_owned(), "-".to_owned()]));
        assert_eq!(row("time to complete p50 / p99").unwrap()[0], "1000 ms / 3000 ms");
        assert!(DeferredSummary::rows(&[None, None]).is_empty());
        let nothing = Run {
            deferred: None,
            ..runs[0].clone()
        };
        assert_eq!(DeferredSummary::of(&[nothing]), None);
    }
}
