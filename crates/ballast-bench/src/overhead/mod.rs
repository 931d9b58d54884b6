//! `ballast bench overhead`: what the gateway costs on the path of a tool call, read against the floor — a
//! pass-through proxy that does nothing but be there — so the answer is a ratio anyone can reproduce.
//!
//! The targets, all in front of `ballast chaos --preset none` on 127.0.0.1: **direct** (the upstream itself),
//! **floor** (`floor.rs`), **gateway** (`POST /v1/tools/lookup_order` through `ballast serve`, as users run it:
//! auth on, its Prometheus recorder installed, its tracing subscriber at the default level), and **gateway,
//! idempotent** (`create_refund`, side-effecting, each request a new key: its claim, dispatch and completion
//! written to SQLite — WAL, `synchronous = NORMAL`: survives a process kill, not a power loss — on the request
//! path). Each round runs every target in turn, at 1 connection (latency) then at 32 (throughput, CPU per request);
//! the table gives each figure's median over the rounds, so a noisy machine moves all targets alike. With two CPUs
//! or more, the load generator runs on CPU 0 and the upstream, the floor and the gateway on CPU 1.

mod floor;
mod load;
mod process;
mod report;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;

pub use floor::serve_floor;
pub use report::{OverheadReport, TargetFigures};

use load::Target;
use process::Running;

/// How the bench runs.
#[derive(Clone, Debug)]
pub struct OverheadOptions {
    /// The `ballast` binary that serves the upstream, the floor and the gateway.
    pub binary: PathBuf,
    /// Rounds (each runs every target once); the table shows medians.
    pub rounds: usize,
    /// Measured time of each load.
    pub duration: Duration,
    /// Unmeasured time before each load.
    pub warmup: Duration,
    /// The connections of the throughput load.
    pub connections: usize,
}

impl Default for OverheadOptions {
    fn default() -> Self {
        OverheadOptions {
            binary: PathBuf::from("ballast"),
            rounds: 5,
            duration: Duration::from_secs(3),
            warmup: Duration::from_millis(500),
            connections: 32,
        }
    }
}

/// The principal key the bench's gateway is called with.
const KEY: &str = "bench-key-0123456789";

/// The gateway's configuration: one principal, a read-only tool and a side-effecting one.
const CONFIG: &str = r#"
version = 1
[store]
url = "sqlite://{dir}/ballast.db"
[[principals]]
name = "bench"
key_env = "BALLAST_BENCH_KEY"
[[tools]]
name = "lookup_order"
upstream = { method = "POST", url = "http://{chaos}/tools/lookup_order" }
per_try_timeout = "2s"
[[tools]]
name = "create_refund"
upstream = { method = "POST", url = "http://{chaos}/tools/create_refund" }
side_effects = true
upstream_idempotency = "keyed"
per_try_timeout = "2s"
"#;

/// Runs the bench; `progress` hears what it is doing.
pub async fn run(
    options: &OverheadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<OverheadReport, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    // The load generator on CPU 0; everything it measures — the upstream, the floor, the gateway — on CPU 1. So
    // every path crosses between the CPUs the same twice (there and back: a cross-CPU wake-up costs tens of µs on
    // a VM), and what a proxy adds is its own work, not an extra trip between CPUs.
    let pinned = cpus >= 2 && process::pin_self(0);
    let (server_cpu, upstream_cpu) = if pinned { (Some(1), Some(1)) } else { (None, None) };
    let binary = &options.binary;
    let chaos = Running::start(
        binary,
        &["chaos", "--preset", "none", "--listen", "127.0.0.1:0"],
        upstream_cpu,
        &[],
        dir.path(),
    )?;
    let upstream = chaos.addr.to_string();
    let floor = Running::start(
        binary,
        &[
            "bench",
            "floor",
            "--upstream",
            &upstream,
            "--listen",
            "127.0.0.1:0",
        ],
        server_cpu,
        &[],
        dir.path(),
    )?;
    let config_path = dir.path().join("ballast.toml");
    let config = CONFIG
        .replace("{dir}", &dir.path().display().to_string())
        .replace("{chaos}", &upstream);
    std::fs::write(&config_path, config).map_err(|e| format!("cannot write the gateway's config: {e}"))?;
    let config_arg = config_path.display().to_string();
    let gateway = Running::start(
        binary,
        &["serve", "--config", &config_arg, "--listen", "127.0.0.1:0"],
        server_cpu,
        &[("BALLAST_BENCH_KEY", KEY)],
        dir.path(),
    )?;
    let lookup = Bytes::from_static(br#"{"order_id": "1234"}"#);
    let refund = Bytes::from_static(br#"{"order_id": "1234", "amount": 42.5}"#);
    let bearer = Some(format!("Bearer {KEY}"));
    let targets: [(&str, Target, Option<&Running>); 4] = [
        (
            "direct",
            Target {
                addr: chaos.addr,
                path: "/tools/lookup_order".into(),
                authorization: None,
                keyed: false,
                body: lookup.clone(),
            },
            None,
        ),
        (
            "floor",
            Target {
                addr: floor.addr,
                path: "/tools/lookup_order".into(),
                authorization: None,
                keyed: false,
                body: lookup.clone(),
            },
            Some(&floor),
        ),
        (
            "gateway",
            Target {
                addr: gateway.addr,
                path: "/v1/tools/lookup_order".into(),
                authorization: bearer.clone(),
                keyed: false,
                body: lookup,
            },
            Some(&gateway),
        ),
        (
            "gateway, idempotent",
            Target {
                addr: gateway.addr,
                path: "/v1/tools/create_refund".into(),
                authorization: bearer,
                keyed: true,
                body: refund,
            },
            Some(&gateway),
        ),
    ];
    let mut rounds: Vec<Vec<report::Round>> = targets.iter().map(|_| Vec::new()).collect();
    for round in 1..=options.rounds {
        for (index, (name, target, server)) in targets.iter().enumerate() {
            progress(&format!("round {round}/{}: {name}", options.rounds));
            let single = load::run(target, 1, options.warmup, options.duration).await;
            let cpu_before = server.and_then(|s| s.cpu_time());
            let many = load::run(target, options.connections, options.warmup, options.duration).await;
            let cpu_after = server.and_then(|s| s.cpu_time());
            // The warm-up of the many-connection load is inside the CPU window: count its requests too, at the
            // measured rate, so CPU per request is not overstated.
            let counted = many.rate() * (options.duration + options.warmup).as_secs_f64();
            let cpu_per_request = match (cpu_before, cpu_after) {
                (Some(before), Some(after)) if counted > 0.0 => {
                    Some(after.saturating_sub(before).div_f64(counted))
                }
                _ => None,
            };
            rounds[index].push(report::Round {
                p50: single.quantile(0.5),
                p99: single.quantile(0.99),
                rate: many.rate(),
                cpu_per_request,
                errors: single.errors + many.errors,
            });
        }
    }
    let measured = targets
        .iter()
        .zip(rounds)
        .map(|((name, _, server), rounds)| ((*name).to_owned(), rounds, server.and_then(|s| s.peak_rss())))
        .collect();
    Ok(OverheadReport::new(measured, options, pinned))
}
