//! `ballast bench overhead`: what the gateway costs on the path of a tool call, read against the floor — a
//! pass-through proxy that does nothing but be there — so the answer is a ratio anyone can reproduce.
//!
//! The targets, all in front of `ballast chaos --preset none` on 127.0.0.1: **direct** (the upstream itself),
//! **floor** (`floor.rs`), **gateway** (`POST /v1/tools/lookup_order` through `ballast serve`, as users run it:
//! auth on, its Prometheus recorder installed, its tracing subscriber at the default level), and **gateway,
//! idempotent** (`create_refund`, side-effecting, each request a new key: its claim, dispatch and completion
//! written to SQLite — WAL, `synchronous = NORMAL`: survives a process kill, not a power loss — on the request
//! path), **gateway, run** (the same `lookup_order` with a `ballast-run-id`, a new run every 4 calls on a connection:
//! what a call that belongs to a run costs, its run found or started and its allowance kept; `groups.rs`,
//! `CALLS_PER_RUN`), and **gateway, mcp** (`lookup_order` as an MCP `tools/call` at the gateway's `/mcp`: the same
//! tool over MCP, JSON-RPC in and out). With `store` (`--store URL`) the gateway's store is that Redis or
//! PostgreSQL instead of SQLite, under a principal of the bench's own (keys and runs are scoped by principal, so
//! what an earlier bench left in a shared store is never met). The model routes — chat, Responses and Anthropic's Messages, each answered whole and streamed — are
//! measured the same three ways (`groups.rs`). Each round runs every target in turn, at 1 connection (latency)
//! then at 32 (throughput, CPU per request); the table gives each figure's median over the rounds, so a noisy
//! machine moves all targets alike. With two CPUs or more, the load generator runs on CPU 0 and the upstream, the
//! floor and the gateway on CPU 1.

mod floor;
mod groups;
mod load;
mod process;
mod report;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;

pub use floor::serve_floor;
pub use report::{OverheadReport, TargetFigures};

use groups::{GROUPS, Group, MCP_HEADERS};
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
    /// The groups to measure (`tools`, `chat`, `chat streamed`, `responses`, `responses streamed`, `messages`,
    /// `messages streamed`); empty: all.
    pub groups: Vec<String>,
    /// Streams without the upstream's pause between events (preset `none` sends one every 5 ms): what the gateway's
    /// own work costs a stream, apart from its waking up idle for each event.
    pub unpaced: bool,
    /// The gateway's store: a `redis://` or `postgres://` URL; `None`: SQLite in a temporary directory.
    pub store: Option<String>,
}

impl Default for OverheadOptions {
    fn default() -> Self {
        OverheadOptions {
            binary: PathBuf::from("ballast"),
            rounds: 5,
            duration: Duration::from_secs(3),
            warmup: Duration::from_millis(500),
            connections: 32,
            groups: Vec::new(),
            unpaced: false,
            store: None,
        }
    }
}

/// Every group's label, for `--groups`.
pub fn group_labels() -> Vec<&'static str> {
    GROUPS.iter().map(Group::label).collect()
}

/// A target as run: its row's name, the request, the server whose CPU and memory are its, and where its group's
/// direct and floor rows are.
struct Measured<'a> {
    name: String,
    target: Target,
    server: Option<&'a Running>,
    direct: usize,
    floor: usize,
}

/// The principal key the bench's gateway is called with.
const KEY: &str = "bench-key-0123456789";
/// The environment variable the gateway reads a shared store's URL from (`[store] url_env`: a URL may carry a
/// password, which the configuration refuses in `url`).
const STORE_ENV: &str = "BALLAST_BENCH_STORE_URL";

/// The gateway's configuration: one principal, a model route whose deployment speaks every API the upstream serves
/// (Messages only when named), a read-only tool and a side-effecting one.
const CONFIG: &str = r#"
version = 1
[store]
{store}
[[principals]]
name = "{principal}"
key_env = "BALLAST_BENCH_KEY"
[[models]]
name = "agent"
deployments = [ { base_url = "http://{chaos}/v1", model = "mock", api = ["responses", "chat", "embeddings", "messages"] } ]
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

/// Preset `none` with no pause between a stream's events (`--unpaced`).
const UNPACED: &str = r#"
[model]
chunk_interval = "0s"
[endpoints.create_refund]
key_mode = "keyed"
[endpoints.process_payment]
key_mode = "keyed"
"#;

/// Runs the bench; `progress` hears what it is doing.
pub async fn run(
    options: &OverheadOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<OverheadReport, String> {
    if let Some(url) = &options.store
        && crate::flash_sale::store_kind(url).is_none()
    {
        return Err(format!(
            "--store {url:?}: a shared store is a redis://… or postgres://… URL (without --store the gateway's store is \
             SQLite in a temporary directory)"
        ));
    }
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    // The load generator on CPU 0; everything it measures — the upstream, the floor, the gateway — on CPU 1. So
    // every path crosses between the CPUs the same twice (there and back: a cross-CPU wake-up costs tens of µs on
    // a VM), and what a proxy adds is its own work, not an extra trip between CPUs.
    let pinned = cpus >= 2 && process::pin_self(0);
    let (server_cpu, upstream_cpu) = if pinned { (Some(1), Some(1)) } else { (None, None) };
    let binary = &options.binary;
    let profile = dir.path().join("unpaced.toml");
    let upstream_args: Vec<&str> = if options.unpaced {
        std::fs::write(&profile, UNPACED).map_err(|e| format!("cannot write the upstream's profile: {e}"))?;
        let profile = profile
            .to_str()
            .ok_or("the temporary directory's path is not UTF-8")?;
        vec!["chaos", "--profile", profile, "--listen", "127.0.0.1:0"]
    } else {
        vec!["chaos", "--preset", "none", "--listen", "127.0.0.1:0"]
    };
    let chaos = Running::start(binary, &upstream_args, upstream_cpu, &[], dir.path())?;
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
    let mut env = vec![("BALLAST_BENCH_KEY", KEY)];
    let (store, principal) = match &options.store {
        None => (
            format!("url = \"sqlite://{}/ballast.db\"", dir.path().display()),
            "bench".to_owned(),
        ),
        Some(url) => {
            env.push((STORE_ENV, url));
            let principal = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
            (format!("url_env = \"{STORE_ENV}\""), principal)
        }
    };
    let config = CONFIG
        .replace("{store}", &store)
        .replace("{principal}", &principal)
        .replace("{chaos}", &upstream);
    std::fs::write(&config_path, config).map_err(|e| format!("cannot write the gateway's config: {e}"))?;
    let config_arg = config_path.display().to_string();
    let gateway = Running::start(
        binary,
        &["serve", "--config", &config_arg, "--listen", "127.0.0.1:0"],
        server_cpu,
        &env,
        dir.path(),
    )?;
    let at = |addr, path: &str, headers: Vec<(&'static str, String)>, body: &Bytes, until| Target {
        addr,
        path: path.to_owned(),
        headers,
        keyed: false,
        runs_of: None,
        body: body.clone(),
        until,
        expect: None,
    };
    // Each group: direct to the upstream, through the floor, through the gateway (same request, same answer);
    // what the gateway adds is counted against the group's own direct and floor.
    let mut targets: Vec<Measured<'_>> = Vec::new();
    let chosen =
        |group: &Group| options.groups.is_empty() || options.groups.iter().any(|g| g == group.label());
    for group in GROUPS.iter().filter(|g| chosen(g)) {
        let body = Bytes::from_static(group.body.as_bytes());
        let direct = targets.len();
        let plain = |name: String, target, server| Measured {
            name,
            target,
            server,
            direct,
            floor: direct + 1,
        };
        let suffix = |who: &str| match group.name {
            "" => who.to_owned(),
            name => format!("{who}, {name}"),
        };
        let (anonymous, keyed) = (group.caller.headers(None), group.caller.headers(Some(KEY)));
        targets.push(plain(
            suffix("direct"),
            at(
                chaos.addr,
                group.upstream_path,
                anonymous.clone(),
                &body,
                group.until,
            ),
            None,
        ));
        targets.push(plain(
            suffix("floor"),
            at(floor.addr, group.upstream_path, anonymous, &body, group.until),
            Some(&floor),
        ));
        targets.push(plain(
            suffix("gateway"),
            at(
                gateway.addr,
                group.gateway_path,
                keyed.clone(),
                &body,
                group.until,
            ),
            Some(&gateway),
        ));
        if let Some(calls) = group.runs_of {
            let mut target = at(
                gateway.addr,
                group.gateway_path,
                keyed.clone(),
                &body,
                group.until,
            );
            target.runs_of = Some(calls);
            targets.push(plain(suffix("gateway, run"), target, Some(&gateway)));
        }
        if let Some(keyed_path) = group.keyed_path {
            let refund = Bytes::from_static(br#"{"order_id": "1234", "amount": 42.5}"#);
            let mut target = at(gateway.addr, keyed_path, keyed.clone(), &refund, group.until);
            target.keyed = true;
            targets.push(plain(suffix("gateway, idempotent"), target, Some(&gateway)));
        }
        if let Some(mcp_body) = group.mcp_body {
            let mut headers = keyed.clone();
            headers.extend(MCP_HEADERS.map(|(name, value)| (name, value.to_owned())));
            let body = Bytes::from_static(mcp_body.as_bytes());
            let mut target = at(gateway.addr, "/mcp", headers, &body, group.until);
            // A tool error is answered 200 too: only the tool's result counts.
            target.expect = Some(r#""isError":false"#);
            targets.push(plain(suffix("gateway, mcp"), target, Some(&gateway)));
        }
    }
    let mut rounds: Vec<Vec<report::Round>> = targets.iter().map(|_| Vec::new()).collect();
    for round in 1..=options.rounds {
        for (index, measured) in targets.iter().enumerate() {
            let (name, target, server) = (&measured.name, &measured.target, measured.server);
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
        .map(|(target, rounds)| report::Measured {
            name: target.name.clone(),
            rounds,
            peak_rss: target.server.and_then(|s| s.peak_rss()),
            direct: target.direct,
            floor: target.floor,
        })
        .collect();
    Ok(OverheadReport::new(measured, options, pinned))
}

#[cfg(test)]
mod tests {
    use ballast_chaos::Profile;

    use super::*;

    /// `--unpaced` is preset `none` but for the pause between a stream's events.
    #[test]
    fn the_unpaced_upstream_is_preset_none_without_the_pause() {
        let unpaced = Profile::from_toml_str(UNPACED).expect("the profile reads");
        let mut none = Profile::preset("none", 0).expect("the preset");
        assert!(!none.model.chunk_interval.is_zero(), "the preset pauses");
        none.model.chunk_interval = Duration::ZERO;
        assert_eq!(unpaced, none);
    }
}
