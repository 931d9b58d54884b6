//! The `ballast` command: argument parsing and wiring only; the work is in the library crates.

mod bench;
mod chaos;
mod demo;
mod overhead;
mod serve;
mod signal;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

/// Ballast keeps an LLM agent's calls steady: one deadline per request, safe and affordable retries, circuit
/// breakers, priority admission.
#[derive(Debug, Parser)]
#[command(name = "ballast", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what Ballast is for: a short flash sale (200 agents against a failing upstream; the naive code, the
    /// `ballast` crate and agents through the gateway side by side), then the gateway serving in front of the chaos
    /// upstream, with a curl, a Python and a TypeScript agent to try it, until Ctrl-C.
    Demo(demo::DemoArgs),
    /// Print the worst case of a configuration: per model and tool, the naive worst case next to Ballast's bound,
    /// the retry amplification over stacked layers, and warnings. Exit code 1 when the config has errors.
    Plan {
        /// The configuration file (TOML).
        config: PathBuf,
        /// How many stacked layers, each retrying like this config, the amplification assumes.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=16))]
        layers: u32,
        /// Print the plan as JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Serve the gateway: tool calls from any language under one deadline, with safe retries, idempotency,
    /// breakers and priority admission. Prints the bound address first; SIGTERM or Ctrl-C stops it gracefully.
    Serve {
        /// The configuration file (TOML).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// The address to listen on, overriding `server.listen`; port 0 picks a free port.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Check the configuration and its secrets, print the plan's warnings, and exit (0 when it can serve).
        #[arg(long)]
        check: bool,
    },
    /// Run a benchmark against the chaos upstream, served on 127.0.0.1.
    Bench {
        #[command(subcommand)]
        bench: BenchCommand,
    },
    /// Serve the chaos upstream: a mock OpenAI-compatible model and mock tools that fail the way real ones do,
    /// deterministically (the fault of an attempt follows from the seed). Prints the bound address first, then
    /// what it serves; Ctrl-C or SIGTERM stops it gracefully.
    Chaos {
        /// The address to listen on; port 0 picks a free port (the first line printed names the bound one).
        #[arg(long, default_value = "127.0.0.1:9000")]
        listen: SocketAddr,
        /// A fault profile (TOML).
        #[arg(long, value_name = "FILE", conflicts_with = "preset")]
        profile: Option<PathBuf>,
        /// A named preset (none, flaky, flash-sale); `none` when neither this nor --profile is given.
        #[arg(long, value_name = "NAME")]
        preset: Option<String>,
        /// The seed of the faults, overriding the profile's (presets default to 0).
        #[arg(long)]
        seed: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// The flash sale: N agents at once, each one conversation (model, lookup_order, a refund or a payment,
    /// model) under one deadline, side by side on the same faults: naive code, the `ballast` crate in process,
    /// agents through `ballast serve` (their tools over HTTP, or over MCP with --tools mcp, beside a naive MCP
    /// client), and through any other gateway with --against. Prints a table per seed (and pooled over a seed
    /// range), or JSON; optionally an SVG chart.
    // Boxed: its arguments are many, the other benches' few.
    FlashSale(Box<bench::FlashSale>),
    /// What the gateway costs on the path of a tool call: added latency at 1 connection, requests per second at 32,
    /// CPU per request and peak memory, next to going direct and to a pass-through proxy (the floor), in
    /// interleaved rounds against the chaos upstream. Prints a table (or JSON).
    Overhead(overhead::Overhead),
    /// The bench's pass-through proxy (started by `bench overhead`).
    #[command(hide = true)]
    Floor(overhead::Floor),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Demo(args) => demo::demo(&args),
        Command::Plan { config, layers, json } => plan(&config, layers, json),
        Command::Serve {
            config,
            listen,
            check,
        } => serve::run(&config, listen, check),
        Command::Chaos {
            listen,
            profile,
            preset,
            seed,
        } => chaos::run(listen, profile.as_deref(), preset.as_deref(), seed),
        Command::Bench {
            bench: BenchCommand::FlashSale(args),
        } => bench::flash_sale(&args),
        Command::Bench {
            bench: BenchCommand::Overhead(args),
        } => overhead::overhead(&args),
        Command::Bench {
            bench: BenchCommand::Floor(args),
        } => overhead::floor(&args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn plan(path: &std::path::Path, layers: u32, json: bool) -> anyhow::Result<()> {
    let config = ballast_config::Config::load(path)
        .with_context(|| format!("{} is not a valid Ballast configuration", path.display()))?;
    let plan = ballast_config::Plan::new(&config, layers);
    if json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print!("{}", ballast_config::render_table(&plan));
    }
    Ok(())
}
