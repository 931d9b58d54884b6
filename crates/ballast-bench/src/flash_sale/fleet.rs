//! What the gateway instances of a run served, and the instance killed mid-sale: per run ([`FleetReport`]) and
//! over the runs of one strategy ([`FleetSummary`]), printed as lines under the table and in the JSON.
//!
//! - **Load**: the requests each instance answered (any status) and those it left unanswered (refused, reset, timed
//!   out), counted by the agents per request sent ([`super::spread`]), and each instance's share of the answered.
//! - **The kill**: when instance 0 was killed and when it was back (accepting again), from the run's start.
//! - **Acknowledged lost**: side effects an agent was told were done — a 2xx (over MCP, a result without `isError`)
//!   for a `create_refund` or `process_payment` — whose operation the upstream's ledger does not hold. A gateway
//!   that loses nothing it acknowledged keeps this at 0, whatever it killed; the ledger's duplicates say the
//!   converse (nothing done twice).

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::Record;
use super::millis::{millis, millis_opt};

/// One run's gateway instances: what each served, the kill, and what was acknowledged but lost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetReport {
    /// Per instance, by index.
    pub load: Vec<InstanceLoad>,
    /// The kill, when one was asked for.
    pub kill: Option<Kill>,
    /// Side effects acknowledged to an agent that the upstream's ledger does not hold (filled in by the runner).
    pub acknowledged_lost: u64,
}

/// What one instance served in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct InstanceLoad {
    /// Its index (0: the one a kill takes).
    pub instance: usize,
    /// Requests it answered, whatever the status.
    pub answered: u64,
    /// Requests sent to it that got no answer: refused or reset (while it was down), or timed out.
    pub unanswered: u64,
}

/// The kill of one instance in one run (durations from the run's start, scaled: real time).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Kill {
    /// The instance killed.
    pub instance: usize,
    /// When it was to be killed.
    #[serde(serialize_with = "millis")]
    pub at: Duration,
    /// When it was killed (`None`: the run ended first).
    #[serde(serialize_with = "millis_opt")]
    pub killed_at: Option<Duration>,
    /// When its restart printed its address and accepted again (`None`: never, or not killed).
    #[serde(serialize_with = "millis_opt")]
    pub back_at: Option<Duration>,
    /// Why the kill or the restart failed, if it did.
    pub failure: Option<String>,
}

/// The operations acknowledged to the agents of `records` that `ledger` (the operations the upstream executed)
/// does not hold.
pub(super) fn acknowledged_lost(records: &[Record], ledger: &HashSet<String>) -> u64 {
    records
        .iter()
        .flat_map(|record| &record.outcome.acknowledged)
        .filter(|op| !ledger.contains(op.as_str()))
        .count() as u64
}

/// A strategy's gateway instances over its runs (durations in full-scale time, as the rest of the summary).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetSummary {
    /// Per instance, summed over the runs.
    pub instances: Vec<InstanceShare>,
    /// Each run's kill, when one was asked for.
    pub kills: Vec<KillSummary>,
    /// Side effects acknowledged but not in the ledger, over the runs: 0 for a gateway that loses nothing.
    pub acknowledged_lost: u64,
}

/// One instance's load over the runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct InstanceShare {
    /// Its index.
    pub instance: usize,
    /// Requests it answered.
    pub answered: u64,
    /// Its share of every instance's answered requests (0..=1).
    pub share: f64,
    /// Requests sent to it that got no answer.
    pub unanswered: u64,
}

/// One run's kill, its times scaled back to full speed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KillSummary {
    /// The run's seed.
    pub seed: u64,
    /// The instance killed.
    pub instance: usize,
    /// When it was killed, from the run's start (`None`: the run ended first).
    #[serde(serialize_with = "millis_opt")]
    pub killed_at: Option<Duration>,
    /// When it accepted again.
    #[serde(serialize_with = "millis_opt")]
    pub back_at: Option<Duration>,
    /// How long it was down in real time, unscaled: a restart takes the time it takes at any `--time-scale`.
    #[serde(serialize_with = "millis_opt")]
    pub down_real: Option<Duration>,
    /// Why the kill or the restart failed, if it did.
    pub failure: Option<String>,
}

impl FleetSummary {
    /// The instances of `runs` (all of one strategy); `None` when none ran several or on a shared store.
    pub(super) fn of(runs: &[super::Run]) -> Option<FleetSummary> {
        let fleets: Vec<(&super::Run, &FleetReport)> = runs
            .iter()
            .filter_map(|run| run.fleet.as_ref().map(|fleet| (run, fleet)))
            .collect();
        if fleets.is_empty() {
            return None;
        }
        let mut sums: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
        for load in fleets.iter().flat_map(|(_, fleet)| &fleet.load) {
            let sum = sums.entry(load.instance).or_default();
            sum.0 += load.answered;
            sum.1 += load.unanswered;
        }
        let all: u64 = sums.values().map(|(answered, _)| answered).sum();
        let instances = sums
            .into_iter()
            .map(|(instance, (answered, unanswered))| InstanceShare {
                instance,
                answered,
                share: if all == 0 {
                    0.0
                } else {
                    answered as f64 / all as f64
                },
                unanswered,
            })
            .collect();
        let kills = fleets
            .iter()
            .filter_map(|(run, fleet)| {
                let kill = fleet.kill.as_ref()?;
                let unscaled = |d: Duration| d.div_f64(run.time_scale);
                Some(KillSummary {
                    seed: run.seed,
                    instance: kill.instance,
                    killed_at: kill.killed_at.map(unscaled),
                    back_at: kill.back_at.map(unscaled),
                    down_real: kill
                        .killed_at
                        .zip(kill.back_at)
                        .map(|(killed, back)| back.saturating_sub(killed)),
                    failure: kill.failure.clone(),
                })
            })
            .collect();
        Some(FleetSummary {
            instances,
            kills,
            acknowledged_lost: fleets.iter().map(|(_, fleet)| fleet.acknowledged_lost).sum(),
        })
    }

    /// Lines under the table for `strategy`: the load per instance, then each kill.
    pub(super) fn lines(&self, strategy: &str) -> String {
        let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
        let mut out = format!("  {strategy} per instance:");
        for (i, instance) in self.instances.iter().enumerate() {
            let _ = write!(
                out,
                "{} {} answered {} ({:.1} %)",
                if i == 0 { "" } else { "," },
                instance.instance,
                instance.answered,
                100.0 * instance.share
            );
            if instance.unanswered > 0 {
                let _ = write!(out, ", {} unanswered", instance.unanswered);
            }
        }
        let _ = writeln!(out, "; acknowledged lost {}", self.acknowledged_lost);
        for kill in &self.kills {
            let _ = write!(
                out,
                "  {strategy} seed {}: instance {} ",
                kill.seed, kill.instance
            );
            match (kill.killed_at, kill.back_at) {
                (None, _) => out.push_str("not killed: the run ended first"),
                (Some(killed), Some(back)) => {
                    let down = kill.down_real.unwrap_or_default();
                    let _ = write!(
                        out,
                        "killed (SIGKILL) at {}, back at {} (down {} real time)",
                        ms(killed),
                        ms(back),
                        ms(down)
                    );
                }
                (Some(killed), None) => {
                    let _ = write!(out, "killed (SIGKILL) at {}, never back", ms(killed));
                }
            }
            if let Some(failure) = &kill.failure {
                let _ = write!(out, " ({failure})");
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flash_sale::{Outcome, Run};

    fn run(seed: u64, load: [(u64, u64); 2], kill: Option<Kill>) -> Run {
        let mut acted = Outcome::success(5);
        acted.acknowledged = vec![format!("fs-{seed}-0")];
        Run {
            strategy: "gateway (2 instances, redis)".into(),
            seed,
            records: vec![super::super::Record {
                agent: 0,
                started: Duration::ZERO,
                took: Duration::from_millis(10),
                outcome: acted,
            }],
            duplicates: 0,
            upstream_requests: 5,
            breaker_changes: Vec::new(),
            throttled: Some(0),
            deadline: Duration::from_millis(1500),
            time_scale: 0.05,
            outage: None,
            fleet: Some(FleetReport {
                load: load
                    .iter()
                    .enumerate()
                    .map(|(instance, &(answered, unanswered))| InstanceLoad {
                        instance,
                        answered,
                        unanswered,
                    })
                    .collect(),
                kill,
                acknowledged_lost: seed % 2,
            }),
            deferred: None,
        }
    }

    #[test]
    fn loads_sum_over_runs_into_shares_and_kills_are_scaled_back_but_the_downtime_is_real() {
        let kill = Kill {
            instance: 0,
            at: Duration::from_millis(150),
            killed_at: Some(Duration::from_millis(151)),
            back_at: Some(Duration::from_millis(171)),
            failure: None,
        };
        let runs = [
            run(1, [(30, 4), (50, 0)], Some(kill)),
            run(2, [(10, 0), (10, 0)], None),
        ];
        let summary = FleetSummary::of(&runs).expect("instances");
        assert_eq!(summary.instances[0].answered, 40);
        assert_eq!(summary.instances[0].unanswered, 4);
        assert_eq!(summary.instances[1].share, 0.6);
        assert_eq!(summary.acknowledged_lost, 1);
        let [kill] = &summary.kills[..] else {
            panic!("one kill")
        };
        assert_eq!(kill.killed_at, Some(Duration::from_millis(3020)));
        assert_eq!(kill.down_real, Some(Duration::from_millis(20)));
        let lines = summary.lines("gateway (2 instances, redis)");
        assert!(
            lines.contains("0 answered 40 (40.0 %), 4 unanswered, 1 answered 60 (60.0 %)"),
            "{lines}"
        );
        assert!(lines.contains("acknowledged lost 1"), "{lines}");
        assert!(
            lines.contains(
                "seed 1: instance 0 killed (SIGKILL) at 3020 ms, back at 3420 ms (down 20 ms real time)"
            ),
            "{lines}"
        );
        let no_fleet = Run {
            fleet: None,
            ..runs[0].clone()
        };
        assert_eq!(FleetSummary::of(&[no_fleet]), None);
    }

    #[test]
    fn an_acknowledged_operation_missing_from_the_ledger_is_lost() {
        let records = run(1, [(1, 0), (1, 0)], None).records;
        let mut ledger = HashSet::new();
        assert_eq!(acknowledged_lost(&records, &ledger), 1);
        ledger.insert("fs-1-0".to_owned());
        assert_eq!(acknowledged_lost(&records, &ledger), 0);
    }
}
