//! `ballast bench flash-sale`: the flash-sale bench of `ballast-bench`, its arguments, progress bar and output.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use ballast_bench::flash_sale::{
    Against, Arrivals, Instances, MODEL, ModelApi, Naive, NaiveMcp, Options, Progress, Run, Scenario,
    ScenarioReport, Strategy, ThroughGateway, ToolApi, WithBallast, chart_svg, run_seeds, seed_label,
};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::signal::Signals;

/// The strategies run when `--strategies` is not given.
const DEFAULT_STRATEGIES: &str = "naive,ballast,gateway";
/// The strategies run with `--tools mcp` when `--strategies` is not given: the naive MCP client joins.
const DEFAULT_STRATEGIES_MCP: &str = "naive,ballast,gateway,naive-mcp";

/// The flash-sale bench's arguments.
#[derive(Debug, Args)]
pub(crate) struct FlashSale {
    /// The scenario: `flash-sale`; `payment-outage` (the sale with payments down from 10 s to 40 s, agents
    /// arriving over 30 s: what `--defer` is for); or `dead-upstream:503`, `dead-upstream:503-retry-after`,
    /// `dead-upstream:refused`, `dead-upstream:hangs` (`dead-upstream`: all four, one after the other).
    #[arg(long, default_value = "flash-sale")]
    scenario: String,
    /// Agents (conversations) per run.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    agents: u32,
    /// When they start: burst, ramp, poisson, steady (default: burst for the flash sale, steady for a dead
    /// upstream).
    #[arg(long)]
    arrivals: Option<String>,
    /// The seed, or an inclusive range of seeds whose runs are pooled: `3`, `1..5`.
    #[arg(long, default_value = "1")]
    seed: String,
    /// The clock's pace: 0.1 runs every duration (upstream, deadlines, timeouts, backoff) ten times faster.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Each conversation's deadline (before scaling).
    #[arg(long, default_value = "30s")]
    deadline: String,
    /// The strategies to run, comma-separated: naive, ballast, gateway, naive-mcp (the naive agents with their
    /// tools on the upstream's MCP server), against [default: naive,ballast,gateway; naive-mcp too with --tools
    /// mcp; against too with --against].
    #[arg(long)]
    strategies: Option<String>,
    /// Also run the agents through this OpenAI-compatible gateway (its base URL, `http://HOST:PORT/v1`): model
    /// calls through it, tool calls straight to the bench's upstream. It must route the model `agent` to the
    /// bench's upstream (printed before the run; see --upstream-listen); with --api messages it must speak
    /// Anthropic's Messages API (`URL/messages`).
    #[arg(long, value_name = "URL")]
    against: Option<String>,
    /// The key the agents send to the --against gateway (a bearer key; `x-api-key` with --api messages).
    #[arg(long, value_name = "KEY", requires = "against")]
    against_key: Option<String>,
    /// Where each run's chaos upstream listens [default: 127.0.0.1:9000 with --against, so that the other gateway
    /// can be configured once; else a free port per run].
    #[arg(long, value_name = "ADDR")]
    upstream_listen: Option<SocketAddr>,
    /// The model API of the HTTP agents (gateway, against): mixed (even agents the Responses API, odd ones Chat
    /// Completions), responses, chat, or messages (Anthropic's Messages API, with the Anthropic SDKs' `x-api-key`
    /// and `anthropic-version`). The naive and ballast strategies call chat whatever it says; the table names the
    /// API beside the strategy (`gateway (messages)`) unless mixed.
    #[arg(long, default_value = "mixed")]
    api: String,
    /// How the gateway's agents call their tools: http (`POST /v1/tools/{name}`, with the run and the step), or
    /// mcp (MCP `tools/call`s at the gateway's `/mcp`, one MCP client per conversation with `ballast-run-id`, the
    /// gateway's tools the upstream's MCP server's): the whole path MCP, named `gateway (mcp)`. With mcp the
    /// naive MCP client (naive-mcp) runs too by default. The other strategies call as they do.
    #[arg(long, default_value = "http")]
    tools: String,
    /// `ballast serve` instances per gateway run: N processes with the same config on the shared --store, each
    /// request of the agents (every try, every SDK retry) to one picked at random (seeded by --seed). Above 1 it
    /// needs --store; the table then adds each instance's requests and share.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    instances: u32,
    /// The gateway instances' shared store: a redis://… or postgres://… URL (SQLite is one process). Without it
    /// each gateway run has its own SQLite file.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Kill gateway instance 0 with SIGKILL this many seconds into each run (bench time, scaled by --time-scale as
    /// the rest of the scenario is), and restart it at once on the same port. Needs --instances 2 or more.
    #[arg(long, value_name = "SECONDS")]
    kill_one_at: Option<f64>,
    /// The gateway's agents let their side effects wait: each refund and payment says `Prefer: respond-async` (and
    /// a `ballast-defer-ttl` of what is left of its deadline plus 60 s, scaled), so the gateway answers one it
    /// cannot serve now `202 Accepted` and works it later; after the load the bench reads every deferred operation
    /// until it ends, and the table adds how they ended. Named `gateway (defer)`; needs the gateway strategy and
    /// --tools http.
    #[arg(long)]
    defer: bool,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write an SVG chart of successes and failures over time per strategy to this file.
    #[arg(long, value_name = "FILE")]
    chart: Option<PathBuf>,
}

pub(crate) fn flash_sale(args: &FlashSale) -> anyhow::Result<()> {
    let scenarios: Vec<Scenario> = if args.scenario == "dead-upstream" {
        ballast_bench::flash_sale::Dead::ALL
            .into_iter()
            .map(Scenario::DeadUpstream)
            .collect()
    } else {
        vec![args.scenario.parse().map_err(anyhow::Error::msg)?]
    };
    let arrivals: Option<Arrivals> = args
        .arrivals
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let seeds = seeds(&args.seed)?;
    let deadline = ballast_config::parse_duration(&args.deadline)
        .with_context(|| format!("--deadline {:?}", args.deadline))?;
    if deadline.is_zero() {
        bail!("--deadline must be more than zero");
    }
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        bail!("--time-scale must be a positive number, not {}", args.time_scale);
    }
    let api: ModelApi = args
        .api
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--api: {e}"))?;
    let tools: ToolApi = args
        .tools
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--tools: {e}"))?;
    let binary = std::env::current_exe().context("cannot find the ballast binary")?;
    let strategies = strategies(args, &binary, api, tools)?;
    let upstream = args.upstream_listen.unwrap_or(if args.against.is_some() {
        SocketAddr::from(([127, 0, 0, 1], 9000))
    } else {
        SocketAddr::from(([127, 0, 0, 1], 0))
    });
    if let Some(url) = &args.against {
        let speaks = match api {
            ModelApi::Messages => {
                format!("Messages (the agents call {url}/messages; the upstream's is /v1/messages)")
            }
            _ => "OpenAI-compatible".to_owned(),
        };
        eprintln!(
            "--against {url}: the gateway there must send the model {MODEL:?} to the {speaks} upstream \
             http://{upstream}/v1 (the bench's chaos upstream, served there during each run; it answers any model \
             name). Tool calls go straight to http://{upstream}/tools/{{name}}."
        );
    }
    let total = scenarios.len() * seeds.len() * strategies.len() * args.agents as usize;
    let progress = Bar::new(total as u64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("a tokio runtime")?;
    let reports = runtime.block_on(async {
        // Watched before anything starts: an interrupt drops the runs, which stops every process they started.
        let mut signals = Signals::watch()?;
        let mut reports = Vec::new();
        for scenario in scenarios {
            let options = Options {
                scenario,
                agents: args.agents as usize,
                arrivals,
                seed: seeds[0],
                time_scale: args.time_scale,
                deadline,
                scripts: Vec::new(),
                upstream,
            };
            let report = tokio::select! {
                report = run_seeds(&options, &seeds, &strategies, &progress) => report.map_err(anyhow::Error::msg)?,
                signal = signals.received() => {
                    progress.0.finish_and_clear();
                    bail!("stopped by {signal}; every process the bench started is stopped");
                }
            };
            reports.push(report);
        }
        Ok::<_, anyhow::Error>(reports)
    })?;
    progress.0.finish_and_clear();
    if let Some(path) = &args.chart {
        write_chart(path, &reports, &seeds)?;
    }
    if args.json {
        let value: Vec<_> = reports.iter().map(ScenarioReport::to_json).collect();
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        for report in &reports {
            print!("{}", report.render());
        }
    }
    Ok(())
}

/// Draws the chart of every run of `reports` to `path`.
pub(crate) fn write_chart(path: &Path, reports: &[ScenarioReport], seeds: &[u64]) -> anyhow::Result<()> {
    let runs: Vec<Run> = reports.iter().flat_map(|report| report.runs.clone()).collect();
    let title = reports
        .iter()
        .map(|report| report.scenario.name())
        .collect::<Vec<_>>()
        .join(", ");
    let svg = chart_svg(&format!("{title}: {}", seed_label(seeds)), &runs).map_err(anyhow::Error::msg)?;
    std::fs::write(path, svg).with_context(|| format!("writing the chart to {}", path.display()))
}

/// The progress bar: conversations ended, and which run is going.
pub(crate) struct Bar(pub(crate) ProgressBar);

impl Bar {
    pub(crate) fn new(total: u64) -> Bar {
        let bar = ProgressBar::new(total).with_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:40}] {pos}/{len} conversations, {elapsed}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Bar(bar)
    }
}

impl Progress for Bar {
    fn run_starts(&self, scenario: Scenario, seed: u64, strategy: &str) {
        self.0.set_message(format!("{scenario}, seed {seed}, {strategy}"));
    }

    fn conversation_ended(&self) {
        self.0.inc(1);
    }
}

/// `3` or `1..5` (inclusive).
fn seeds(text: &str) -> anyhow::Result<Vec<u64>> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .with_context(|| format!("--seed {text:?}: a seed is a whole number (or a range like 1..5)"))
    };
    match text.split_once("..") {
        None => Ok(vec![number(text)?]),
        Some((first, last)) => {
            let (first, last) = (number(first)?, number(last.trim_start_matches('='))?);
            if last < first {
                bail!("--seed {text:?}: the range ends before it starts");
            }
            if last - first >= 1000 {
                bail!("--seed {text:?}: at most 1000 seeds");
            }
            Ok((first..=last).collect())
        }
    }
}

/// The gateway's instances, from `--instances`, `--store` and `--kill-one-at`.
fn instances(args: &FlashSale) -> anyhow::Result<Instances> {
    let kill_one_at = args
        .kill_one_at
        .map(|seconds| {
            Duration::try_from_secs_f64(seconds)
                .map_err(|_| anyhow::anyhow!("--kill-one-at {seconds}: a number of seconds, 0 or more"))
        })
        .transpose()?;
    Instances::new(args.instances as usize, args.store.clone(), kill_one_at).map_err(anyhow::Error::msg)
}

/// The strategies named by `--strategies` (default: [`DEFAULT_STRATEGIES`], or [`DEFAULT_STRATEGIES_MCP`] with
/// `--tools mcp`; and `against` with `--against`), the gateway's with its instances and `--defer`.
fn strategies(
    args: &FlashSale,
    binary: &Path,
    api: ModelApi,
    tools: ToolApi,
) -> anyhow::Result<Vec<Box<dyn Strategy>>> {
    let default = match tools {
        ToolApi::Http => DEFAULT_STRATEGIES,
        ToolApi::Mcp => DEFAULT_STRATEGIES_MCP,
    };
    let mut names: Vec<String> = args
        .strategies
        .as_deref()
        .unwrap_or(default)
        .split(',')
        .map(|name| name.trim().to_owned())
        .collect();
    if args.against.is_some() && !names.iter().any(|name| name == "against") {
        names.push("against".to_owned());
    }
    let instances = instances(args)?;
    let gateway = names.iter().any(|name| name == "gateway");
    if instances != Instances::default() && !gateway {
        bail!(
            "--instances, --store and --kill-one-at shape the gateway strategy, which --strategies leaves out"
        );
    }
    if args.defer && !gateway {
        bail!(
            "--defer asks Ballast's gateway to defer the agents' side effects: it needs the gateway strategy, which \
             --strategies leaves out"
        );
    }
    if args.defer && tools == ToolApi::Mcp {
        bail!(
            "--defer needs --tools http: the gateway defers a tool call whose caller says `Prefer: respond-async`, \
             which an MCP tools/call cannot say"
        );
    }
    names
        .iter()
        .map(|name| -> anyhow::Result<Box<dyn Strategy>> {
            match name.as_str() {
                "naive" => Ok(Box::new(Naive)),
                "ballast" => Ok(Box::new(WithBallast)),
                "gateway" => Ok(Box::new(
                    ThroughGateway::new(binary.to_owned(), api)
                        .tools(tools)
                        .instances(instances.clone())
                        .defer(args.defer),
                )),
                "naive-mcp" => Ok(Box::new(NaiveMcp)),
                "against" => match &args.against {
                    Some(url) => Ok(Box::new(Against::new(url, args.against_key.clone(), api))),
                    None => bail!("--strategies: `against` needs --against URL (the gateway to run against)"),
                },
                other => {
                    bail!("--strategies: unknown strategy {other:?}; naive, ballast, gateway, naive-mcp, against")
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
