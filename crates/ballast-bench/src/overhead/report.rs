//! The bench's result: per target, medians over the rounds, what it adds over going direct, and its throughput
//! next to the floor's; printed as a table or JSON, with the targets of the issue beside the figures.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::OverheadOptions;

/// One round of one target.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Round {
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) rate: f64,
    pub(crate) cpu_per_request: Option<Duration>,
    pub(crate) errors: u64,
}

/// One target as measured: its rounds, its server's peak memory, and where its group's direct and floor rows are.
#[derive(Clone, Debug)]
pub(crate) struct Measured {
    pub(crate) name: String,
    pub(crate) rounds: Vec<Round>,
    pub(crate) peak_rss: Option<u64>,
    /// The index of the row its latency is compared with (the same request, direct to the upstream).
    pub(crate) direct: usize,
    /// The index of the row its throughput is compared with (the same request, through the floor).
    pub(crate) floor: usize,
}

/// One target's figures: medians over the rounds.
#[derive(Clone, Debug, Serialize)]
pub struct TargetFigures {
    /// `direct`, `floor`, `gateway`, `gateway, idempotent`; for the model routes `direct, chat`, `gateway,
    /// responses streamed`, `gateway, messages`, ...
    pub name: String,
    /// Latency p50 at 1 connection, µs.
    pub p50_us: f64,
    /// Latency p99 at 1 connection, µs.
    pub p99_us: f64,
    /// p50 minus its group's direct's in the same round, µs (a stream's latency is its first content event's).
    pub added_p50_us: f64,
    /// p99 minus direct's in the same round, µs.
    pub added_p99_us: f64,
    /// Requests per second at the throughput load's connections.
    pub requests_per_second: f64,
    /// Requests per second over its group's floor's, in the same round.
    pub vs_floor: f64,
    /// The server's CPU time per request at the throughput load, µs (`None` for direct: the upstream's own).
    pub cpu_per_request_us: Option<f64>,
    /// The server's peak resident memory at the end, MiB.
    pub peak_rss_mib: Option<f64>,
    /// Requests that failed or were not 2xx, all rounds.
    pub errors: u64,
}

/// The whole result.
#[derive(Clone, Debug, Serialize)]
pub struct OverheadReport {
    /// Rounds run.
    pub rounds: usize,
    /// Measured seconds per load.
    pub seconds: f64,
    /// Connections of the throughput load.
    pub connections: usize,
    /// Whether the servers under test and the load generator ran on different CPUs.
    pub pinned: bool,
    /// Whether the upstream sent a stream's events without pausing between them.
    pub unpaced: bool,
    /// The gateway's store: `sqlite`, or the shared store's kind (`redis`, `postgres`).
    pub store: String,
    /// Calls per run of the `gateway, run` row (a new `ballast-run-id` every this many calls on a connection).
    pub calls_per_run: u64,
    /// Per target, in the order run.
    pub targets: Vec<TargetFigures>,
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

impl OverheadReport {
    /// The report of `measured`, each target compared with its group's direct and floor rows.
    pub(crate) fn new(measured: Vec<Measured>, options: &OverheadOptions, pinned: bool) -> Self {
        let rounds_of = |index: usize| measured.get(index).map(|m| m.rounds.clone()).unwrap_or_default();
        let targets = measured
            .iter()
            .enumerate()
            .map(|(index, m)| {
                let (direct, floor) = (rounds_of(m.direct), rounds_of(m.floor));
                let rounds = &m.rounds;
                let paired = |of: &dyn Fn(&Round, &Round) -> f64, base: &[Round]| {
                    median(rounds.iter().zip(base).map(|(r, b)| of(r, b)).collect())
                };
                let is_direct = index == m.direct;
                TargetFigures {
                    p50_us: median(rounds.iter().map(|r| micros(r.p50)).collect()),
                    p99_us: median(rounds.iter().map(|r| micros(r.p99)).collect()),
                    added_p50_us: paired(&|r, d| micros(r.p50) - micros(d.p50), &direct),
                    added_p99_us: paired(&|r, d| micros(r.p99) - micros(d.p99), &direct),
                    requests_per_second: median(rounds.iter().map(|r| r.rate).collect()),
                    vs_floor: paired(&|r, f| r.rate / f.rate.max(f64::EPSILON), &floor),
                    cpu_per_request_us: (!is_direct)
                        .then(|| {
                            rounds
                                .iter()
                                .filter_map(|r| r.cpu_per_request)
                                .map(micros)
                                .collect::<Vec<_>>()
                        })
                        .filter(|v| !v.is_empty())
                        .map(median),
                    peak_rss_mib: m
                        .peak_rss
                        .filter(|_| !is_direct)
                        .map(|b| b as f64 / (1024.0 * 1024.0)),
                    errors: rounds.iter().map(|r| r.errors).sum(),
                    name: m.name.clone(),
                }
            })
            .collect();
        OverheadReport {
            rounds: options.rounds,
            seconds: options.duration.as_secs_f64(),
            connections: options.connections,
            pinned,
            unpaced: options.unpaced,
            store: options
                .store
                .as_deref()
                .and_then(crate::flash_sale::store_kind)
                .unwrap_or("sqlite")
                .to_owned(),
            calls_per_run: super::groups::CALLS_PER_RUN,
            targets,
        }
    }
}

impl fmt::Display for OverheadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "overhead: medians of {} rounds, {} s per load; latency at 1 connection, throughput and CPU at {}; {}",
            self.rounds,
            self.seconds,
            self.connections,
            if self.pinned {
                "load generator on CPU 0; upstream, floor and gateway on CPU 1"
            } else {
                "not pinned (one CPU, or taskset unavailable): the load generator shares the servers' CPU"
            }
        )?;
        writeln!(f)?;
        writeln!(
            f,
            "| target | p50 | p99 | added p50 | added p99 | req/s @{} | vs floor | CPU/req | peak RSS | errors |",
            self.connections
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|---|---|")?;
        for t in &self.targets {
            let cpu = t
                .cpu_per_request_us
                .map_or("-".to_owned(), |c| format!("{c:.1} µs"));
            let rss = t.peak_rss_mib.map_or("-".to_owned(), |m| format!("{m:.1} MiB"));
            writeln!(
                f,
                "| {} | {:.0} µs | {:.0} µs | {:+.0} µs | {:+.0} µs | {:.0} | {:.2} | {} | {} | {} |",
                t.name,
                t.p50_us,
                t.p99_us,
                t.added_p50_us,
                t.added_p99_us,
                t.requests_per_second,
                t.vs_floor,
                cpu,
                rss,
                t.errors
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "targets, every gateway row: added p50 <= 100 µs; >= 0.80 x its floor's req/s; <= 40 µs CPU/req; <= 30 MiB \
             peak RSS; idempotent p50 <= 1.5 x gateway p50"
        )?;
        writeln!(
            f,
            "a streamed row's latency is its first content event's (chat: the first tool-call chunk; responses: \
             response.output_item.added; messages: content_block_start), the gateway's commit point; {}",
            if self.unpaced {
                "the upstream sends a stream's events without pausing (--unpaced)"
            } else {
                "the upstream pauses 5 ms between a stream's events, so each wakes the servers up idle"
            }
        )?;
        let store = match self.store.as_str() {
            "sqlite" => "SQLite (WAL, synchronous = NORMAL: survives a process kill, not a power loss)",
            "redis" => "the shared Redis (--store)",
            _ => "the shared PostgreSQL (--store)",
        };
        writeln!(
            f,
            "the idempotent path writes its claim, dispatch and answer to {store} on the request path; gateway, run: \
             the tool call with a ballast-run-id, a new run every {} calls on a connection (one starts the run, the \
             others continue it)",
            self.calls_per_run
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(p50_us: u64, rate: f64) -> Round {
        Round {
            p50: Duration::from_micros(p50_us),
            p99: Duration::from_micros(p50_us * 2),
            rate,
            cpu_per_request: Some(Duration::from_micros(10)),
            errors: 0,
        }
    }

    #[test]
    fn added_latency_and_the_floor_ratio_are_paired_within_each_round() {
        let row = |name: &str, rounds, rss| Measured {
            name: name.to_owned(),
            rounds,
            peak_rss: rss,
            direct: 0,
            floor: 1,
        };
        let measured = vec![
            row(
                "direct",
                vec![round(100, 1000.0), round(300, 1000.0), round(200, 1000.0)],
                None,
            ),
            row(
                "floor",
                vec![round(150, 500.0), round(340, 400.0), round(260, 500.0)],
                Some(8 << 20),
            ),
            row(
                "gateway",
                vec![round(200, 400.0), round(390, 100.0), round(300, 250.0)],
                Some(20 << 20),
            ),
        ];
        let report = OverheadReport::new(measured, &OverheadOptions::default(), true);
        let [direct, floor, gateway] = &report.targets[..] else {
            panic!("three targets")
        };
        assert_eq!(direct.added_p50_us, 0.0);
        assert_eq!(
            direct.cpu_per_request_us, None,
            "the upstream's own CPU is not a proxy's"
        );
        // Round by round: +50, +40, +60 -> median 50 (not 267 - 200 of the medians).
        assert_eq!(floor.added_p50_us, 50.0);
        assert_eq!(gateway.added_p50_us, 100.0);
        // 400/500, 100/400, 250/500 -> 0.8, 0.25, 0.5.
        assert_eq!(gateway.vs_floor, 0.5);
        assert_eq!(gateway.peak_rss_mib, Some(20.0));
        assert!(report.to_string().contains("| gateway | 300 µs |"), "{report}");
    }

    #[test]
    fn each_group_is_compared_with_its_own_direct_and_floor() {
        let row = |name: &str, p50, rate, direct, floor| Measured {
            name: name.to_owned(),
            rounds: vec![round(p50, rate)],
            peak_rss: None,
            direct,
            floor,
        };
        let measured = vec![
            row("direct", 100, 1000.0, 0, 1),
            row("floor", 150, 500.0, 0, 1),
            row("direct, chat", 300, 800.0, 2, 3),
            row("floor, chat", 340, 400.0, 2, 3),
            row("gateway, chat", 420, 200.0, 2, 3),
        ];
        let report = OverheadReport::new(measured, &OverheadOptions::default(), true);
        let gateway = &report.targets[4];
        assert_eq!(gateway.added_p50_us, 120.0, "against direct, chat");
        assert_eq!(gateway.vs_floor, 0.5, "against floor, chat");
        assert_eq!(
            report.targets[2].cpu_per_request_us, None,
            "a direct row of any group"
        );
    }
}
