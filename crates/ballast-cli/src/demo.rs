//! `ballast demo`: the arguments and the terminal; the demo itself is `ballast_bench::demo`.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use ballast_bench::demo::{
    DEFAULT_AGENTS, DEFAULT_TIME_SCALE, Demo, default_chart_path, flash_sale_strategies,
};
use ballast_bench::flash_sale::{Options, run_seeds};
use clap::Args;

use crate::bench::{Bar, write_chart};
use crate::signal::Signals;

/// The demo's arguments.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Skip the flash sale: start the upstream and the gateway, print how to try them, serve.
    #[arg(long)]
    no_bench: bool,
    /// Agents in the flash sale.
    #[arg(long, default_value_t = DEFAULT_AGENTS, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    agents: u32,
    /// The seed of the flash sale's faults and of the served upstream's.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The flash sale's clock: every duration (the upstream's, the deadlines, the timeouts) times this (0.5: twice
    /// as fast). Durations are reported scaled back, as at full speed.
    #[arg(long, default_value_t = DEFAULT_TIME_SCALE)]
    time_scale: f64,
    /// Where to draw the flash sale's chart [default: ballast-demo-flash-sale.svg in the temporary directory].
    #[arg(long, value_name = "FILE")]
    chart: Option<PathBuf>,
}

pub(crate) fn demo(args: &DemoArgs) -> anyhow::Result<()> {
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        bail!("--time-scale must be a positive number, not {}", args.time_scale);
    }
    let binary = std::env::current_exe().context("cannot find the ballast binary")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("a tokio runtime")?;
    runtime.block_on(async {
        // Watched before anything starts: an interrupt at any point stops what was started.
        let mut signals = Signals::watch()?;
        let mut demo = tokio::select! {
            demo = Demo::start(&binary, args.seed) => demo.map_err(anyhow::Error::msg)?,
            signal = signals.received() => bail!("stopped by {signal}"),
        };
        if !args.no_bench {
            let flash_sale = flash_sale(args, &binary);
            tokio::select! {
                finished = flash_sale => finished?,
                signal = signals.received() => {
                    demo.stop().await.map_err(anyhow::Error::msg)?;
                    bail!("stopped by {signal}; the upstream and the gateway are stopped");
                }
            }
        }
        println!("{}", demo.instructions());
        let stopped = tokio::select! {
            signal = signals.received() => Ok(signal),
            why = demo.exited() => Err(why),
        };
        match stopped {
            Ok(signal) => {
                eprintln!("{signal}: stopping the gateway, then the upstream");
                demo.stop().await.map_err(anyhow::Error::msg)?;
                eprintln!("ballast demo stopped");
                Ok(())
            }
            Err(why) => {
                let _ = demo.stop().await;
                bail!("{why}")
            }
        }
    })
}

/// The demo's flash sale: `naive`, `ballast` and `gateway` on one seed, with a progress bar; prints the table and
/// where the chart is.
async fn flash_sale(args: &DemoArgs, binary: &std::path::Path) -> anyhow::Result<()> {
    let strategies = flash_sale_strategies(binary);
    let options = Options {
        agents: args.agents as usize,
        seed: args.seed,
        time_scale: args.time_scale,
        ..Options::default()
    };
    println!(
        "A flash sale: {} agents at once, each one conversation (the model, lookup_order, a refund or a payment, \
         the model) under a 30 s deadline, against an upstream that times out, rate-limits, fails and loses \
         answers after committing. Three ways: the naive code of the tutorials, the `ballast` crate in process, \
         and agents with the OpenAI SDKs' habits through the gateway. The run's clock is sped up (every duration \
         times {}); the durations below are scaled back, as at full speed.\n",
        args.agents, args.time_scale
    );
    let bar = Bar::new((args.agents as usize * strategies.len()) as u64);
    let report = run_seeds(&options, &[args.seed], &strategies, &bar)
        .await
        .map_err(anyhow::Error::msg);
    bar.0.finish_and_clear();
    let report = report?;
    let chart = args.chart.clone().unwrap_or_else(default_chart_path);
    write_chart(&chart, std::slice::from_ref(&report), &[args.seed])?;
    print!("{}", report.render());
    println!(
        "How to read it: `success within deadline` counts the conversations that refunded or paid and got the \
         model's last answer within their 30 s; `overruns`, those still running past it; `duplicate side \
         effects`, refunds and payments executed twice (the naive code makes a new idempotency key on every \
         retry); `upstream requests per call`, the load the retries add.\n"
    );
    println!(
        "The chart (conversations ended so far, succeeded and failed, over time): {}\n",
        chart.display()
    );
    Ok(())
}
