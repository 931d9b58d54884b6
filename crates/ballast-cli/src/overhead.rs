//! `ballast bench overhead` (what the gateway costs, against the floor) and the floor proxy it starts
//! (`ballast bench floor`, hidden: the bench's own part).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use ballast_bench::overhead::{OverheadOptions, run, serve_floor};
use clap::Args;

/// The overhead bench's arguments.
#[derive(Debug, Args)]
pub(crate) struct Overhead {
    /// Rounds; each runs every target once, and the table shows medians.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Measured seconds of each load (each also has a 0.5 s warm-up).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Connections of the throughput load.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    connections: u32,
    /// Measure only these groups, comma-separated: tools, chat, "chat streamed", responses, "responses streamed",
    /// messages, "messages streamed" (default: all).
    #[arg(long, value_delimiter = ',')]
    groups: Vec<String>,
    /// Streams without the upstream's 5 ms between events: what the gateway's own work costs a stream, apart
    /// from waking up idle for each event.
    #[arg(long)]
    unpaced: bool,
    /// The gateway's store: a shared Redis or PostgreSQL (`redis://…`, `postgres://…`) instead of SQLite in a
    /// temporary directory, the bench's keys and runs under a principal of its own.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// The floor proxy's arguments.
#[derive(Debug, Args)]
pub(crate) struct Floor {
    /// The upstream every request is forwarded to.
    #[arg(long)]
    upstream: SocketAddr,
    /// The address to listen on; port 0 picks a free one (printed first).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

pub(crate) fn overhead(args: &Overhead) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.seconds.is_finite() && args.seconds > 0.0,
        "--seconds must be more than zero"
    );
    let known = ballast_bench::overhead::group_labels();
    if let Some(unknown) = args.groups.iter().find(|g| !known.contains(&g.as_str())) {
        anyhow::bail!("--groups: {unknown:?} is not one of {}", known.join(", "));
    }
    let options = OverheadOptions {
        binary: std::env::current_exe().context("cannot find the ballast binary")?,
        rounds: args.rounds as usize,
        duration: Duration::from_secs_f64(args.seconds),
        connections: args.connections as usize,
        groups: args.groups.clone(),
        unpaced: args.unpaced,
        store: args.store.clone(),
        ..OverheadOptions::default()
    };
    // One thread: the load generator is pinned to one CPU, and a current-thread runtime keeps it there.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime
        .block_on(run(&options, &mut |step| eprintln!("{step}")))
        .map_err(anyhow::Error::msg)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}

pub(crate) fn floor(args: &Floor) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        println!(
            "ballast bench floor listening on http://{}",
            listener.local_addr()?
        );
        serve_floor(listener, args.upstream, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
        Ok(())
    })
}
