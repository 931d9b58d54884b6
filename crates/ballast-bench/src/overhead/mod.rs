//! `ballast bench overhead`: what the gateway costs on the path of a tool call, read against the floor — a
//! pass-through proxy that does nothing but be there — so the answer is a ratio anyone can reproduce.
//!
//! The targets, all in front of `ballast chaos --preset none` on 127.0.0.1: **direct** (the upstream itself),
//! **floor** (`floor.rs`), **gateway** (`POST /v1/tools/lookup_order` through `ballast serve`, as users run it:
//! auth on, its Prometheus recorder installed, its tracing subscriber at the default level), and **gateway,
//! idempotent** (`create_refund`, side-effecting, each request a new key: its claim, dispatch and completion
//! written to SQLite — WAL, `synchronous = NORMAL`: survives a process kill, not a power loss — on the request
//! path). The model routes — chat, Responses and Anthropic's Messages, each answered whole and streamed — are
//! measured the same three ways (`GROUPS`). Each round runs every target in turn, at 1 connection (latency) then at 32 (throughput, CPU per request);
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

use load::{Target, Until};
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
        }
    }
}

/// One kind of request, measured direct, through the floor and through the gateway.
struct Group {
    /// What the rows say after `direct`, `floor`, `gateway` (`""` for the tool call, the first group).
    name: &'static str,
    /// The request's path at the upstream (and the floor, which forwards it untouched).
    upstream_path: &'static str,
    /// The same request's path at the gateway.
    gateway_path: &'static str,
    /// A side-effecting path at the gateway, measured too (the idempotent path), for the tool group.
    keyed_path: Option<&'static str>,
    /// The JSON body.
    body: &'static str,
    /// What its latency is timed to: the whole answer, or a stream's first content event.
    until: Until,
    /// Whose SDK sends it: how the key goes, and what else is sent.
    caller: Caller,
}

/// How a group's requests say who calls, as the caller's SDK sends them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    /// OpenAI's SDKs (and a tool call's plain HTTP): `Authorization: Bearer KEY`.
    OpenAi,
    /// Anthropic's SDKs: `x-api-key: KEY` and `anthropic-version: 2023-06-01` — sent direct and through the floor
    /// too, since the upstream refuses a Messages request without the version.
    Anthropic,
}

impl Caller {
    /// The headers of a request with `key` (`None`: to the upstream or the floor, which take none).
    fn headers(self, key: Option<&str>) -> Vec<(&'static str, String)> {
        match self {
            Caller::OpenAi => key
                .map(|key| ("authorization", format!("Bearer {key}")))
                .into_iter()
                .collect(),
            Caller::Anthropic => key
                .map(|key| ("x-api-key", key.to_owned()))
                .into_iter()
                .chain([("anthropic-version", "2023-06-01".to_owned())])
                .collect(),
        }
    }
}

impl Group {
    /// Its name in `--groups`: `tools`, or the name its rows carry.
    fn label(&self) -> &'static str {
        if self.name.is_empty() { "tools" } else { self.name }
    }
}

/// Every group's label, for `--groups`.
pub fn group_labels() -> Vec<&'static str> {
    GROUPS.iter().map(Group::label).collect()
}

/// The groups, in the order run: a tool call, then the model routes, answered whole and streamed (timed to the
/// first content event: for a stream that is when the caller can start acting, and the gateway's commit point).
const GROUPS: [Group; 7] = [
    Group {
        name: "",
        upstream_path: "/tools/lookup_order",
        gateway_path: "/v1/tools/lookup_order",
        keyed_path: Some("/v1/tools/create_refund"),
        body: r#"{"order_id": "1234"}"#,
        until: Until::Whole,
        caller: Caller::OpenAi,
    },
    Group {
        name: "chat",
        upstream_path: "/v1/chat/completions",
        gateway_path: "/v1/chat/completions",
        keyed_path: None,
        body: r#"{"model": "agent", "messages": [{"role": "user", "content": "Refund order 1234, op=op-bench"}]}"#,
        until: Until::Whole,
        caller: Caller::OpenAi,
    },
    Group {
        name: "chat streamed",
        upstream_path: "/v1/chat/completions",
        gateway_path: "/v1/chat/completions",
        keyed_path: None,
        body: r#"{"model": "agent", "stream": true, "messages": [{"role": "user", "content": "Refund order 1234, op=op-bench"}]}"#,
        until: Until::FirstContent("tool_calls"),
        caller: Caller::OpenAi,
    },
    Group {
        name: "responses",
        upstream_path: "/v1/responses",
        gateway_path: "/v1/responses",
        keyed_path: None,
        body: r#"{"model": "agent", "store": false, "input": "Refund order 1234, op=op-bench"}"#,
        until: Until::Whole,
        caller: Caller::OpenAi,
    },
    Group {
        name: "responses streamed",
        upstream_path: "/v1/responses",
        gateway_path: "/v1/responses",
        keyed_path: None,
        body: r#"{"model": "agent", "store": false, "stream": true, "input": "Refund order 1234, op=op-bench"}"#,
        until: Until::FirstContent("response.output_item.added"),
        caller: Caller::OpenAi,
    },
    Group {
        name: "messages",
        upstream_path: "/v1/messages",
        gateway_path: "/v1/messages",
        keyed_path: None,
        body: r#"{"model": "agent", "max_tokens": 1024, "messages": [{"role": "user", "content": "Refund order 1234, op=op-bench"}]}"#,
        until: Until::Whole,
        caller: Caller::Anthropic,
    },
    Group {
        name: "messages streamed",
        upstream_path: "/v1/messages",
        gateway_path: "/v1/messages",
        keyed_path: None,
        body: r#"{"model": "agent", "max_tokens": 1024, "stream": true, "messages": [{"role": "user", "content": "Refund order 1234, op=op-bench"}]}"#,
        until: Until::FirstContent("content_block_start"),
        caller: Caller::Anthropic,
    },
];

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

/// The gateway's configuration: one principal, a model route whose deployment speaks every API the upstream serves
/// (Messages only when named), a read-only tool and a side-effecting one.
const CONFIG: &str = r#"
version = 1
[store]
url = "sqlite://{dir}/ballast.db"
[[principals]]
name = "bench"
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
    let at = |addr, path: &str, headers: Vec<(&'static str, String)>, body: &Bytes, until| Target {
        addr,
        path: path.to_owned(),
        headers,
        keyed: false,
        body: body.clone(),
        until,
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
        if let Some(keyed_path) = group.keyed_path {
            let refund = Bytes::from_static(br#"{"order_id": "1234", "amount": 42.5}"#);
            let mut target = at(gateway.addr, keyed_path, keyed, &refund, group.until);
            target.keyed = true;
            targets.push(plain(suffix("gateway, idempotent"), target, Some(&gateway)));
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

    /// Every group's request, as its caller's SDK sends it, is one the upstream answers (a Messages request needs
    /// `anthropic-version`), and a streamed one holds the event its latency is timed to.
    #[tokio::test]
    async fn every_groups_request_is_answered_by_the_upstream_with_its_timed_event() {
        let profile = Profile::preset("none", 0).expect("the preset");
        let upstream = ballast_chaos::spawn(profile).await.expect("chaos");
        let client = reqwest::Client::new();
        for group in &GROUPS {
            let mut request = client
                .post(upstream.url(group.upstream_path))
                .header("content-type", "application/json")
                .body(group.body);
            for (name, value) in group.caller.headers(None) {
                request = request.header(name, value);
            }
            let answer = request.send().await.expect("an answer");
            let status = answer.status();
            let body = answer.text().await.expect("a body");
            assert!(status.is_success(), "{}: {status} {body}", group.label());
            if let Until::FirstContent(marker) = group.until {
                assert!(body.contains(marker), "{}: {body}", group.label());
            }
        }
        upstream.shutdown().await.expect("chaos stops");
    }

    #[test]
    fn anthropics_callers_send_the_key_as_x_api_key_with_the_version() {
        assert_eq!(
            Caller::Anthropic.headers(Some("k")),
            [
                ("x-api-key", "k".to_owned()),
                ("anthropic-version", "2023-06-01".to_owned())
            ]
        );
        assert_eq!(
            Caller::Anthropic.headers(None),
            [("anthropic-version", "2023-06-01".to_owned())]
        );
        assert_eq!(
            Caller::OpenAi.headers(Some("k")),
            [("authorization", "Bearer k".to_owned())]
        );
        assert!(Caller::OpenAi.headers(None).is_empty());
        assert!(group_labels().contains(&"messages streamed"));
    }
}
