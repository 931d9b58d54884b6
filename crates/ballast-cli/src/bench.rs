//! `ballast bench flash-sale`: the flash-sale bench of `ballast-bench`, its arguments, progress bar and output.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use ballast_bench::flash_sale::{Arrivals, Scenario};
use ballast_bench::flash_sale::{Naive, Options, Run, Strategy, Summary, WithBallast, chart_svg, run, table};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

/// The flash-sale bench's arguments.
#[derive(Debug, Args)]
pub(crate) struct FlashSale {
    /// The scenario: `flash-sale`, or `dead-upstream:503`, `dead-upstream:503-retry-after`,
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
    /// The strategies to run, comma-separated: naive, ballast.
    #[arg(long, default_value = "naive,ballast")]
    strategies: String,
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
    let strategies = strategies(&args.strategies)?;
    let total = scenarios.len() * seeds.len() * strategies.len() * args.agents as usize;
    let progress = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:40}] {pos}/{len} conversations, {elapsed}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("a tokio runtime")?;
    let mut reports = Vec::new();
    for scenario in scenarios {
        let mut runs: Vec<Run> = Vec::new();
        for &seed in &seeds {
            let options = Options {
                scenario,
                agents: args.agents as usize,
                arrivals,
                seed,
                time_scale: args.time_scale,
                deadline,
                scripts: Vec::new(),
            };
            for strategy in &strategies {
                progress.set_message(format!("{scenario}, seed {seed}, {}", strategy.name()));
                let done = || progress.inc(1);
                let finished = runtime
                    .block_on(run(&options, strategy.as_ref(), &done))
                    .map_err(anyhow::Error::msg)?;
                runs.push(finished);
            }
        }
        reports.push(Report::new(
            scenario,
            &options_line(args, arrivals, scenario),
            runs,
        ));
    }
    progress.finish_and_clear();
    if let Some(path) = &args.chart {
        let runs: Vec<Run> = reports.iter().flat_map(|report| report.runs.clone()).collect();
        let title = reports
            .iter()
            .map(|report| report.scenario.name())
            .collect::<Vec<_>>()
            .join(", ");
        let svg =
            chart_svg(&format!("{title}: {}", seed_label(&seeds)), &runs).map_err(anyhow::Error::msg)?;
        std::fs::write(path, svg).with_context(|| format!("writing the chart to {}", path.display()))?;
    }
    if args.json {
        let value: Vec<_> = reports.iter().map(Report::to_json).collect();
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        for report in &reports {
            print!("{}", report.render());
        }
    }
    Ok(())
}

/// One scenario's runs, and their summaries per seed and pooled.
struct Report {
    scenario: Scenario,
    header: String,
    runs: Vec<Run>,
    per_seed: Vec<(u64, Vec<Summary>)>,
    pooled: Option<Vec<Summary>>,
}

impl Report {
    fn new(scenario: Scenario, header: &str, runs: Vec<Run>) -> Report {
        let mut seeds: Vec<u64> = runs.iter().map(|run| run.seed).collect();
        seeds.dedup();
        let strategies: Vec<String> = {
            let mut names: Vec<String> = Vec::new();
            for run in &runs {
                if !names.contains(&run.strategy) {
                    names.push(run.strategy.clone());
                }
            }
            names
        };
        let summaries = |filter: &dyn Fn(&Run) -> bool| -> Vec<Summary> {
            strategies
                .iter()
                .map(|strategy| {
                    let mine: Vec<Run> = runs
                        .iter()
                        .filter(|run| &run.strategy == strategy && filter(run))
                        .cloned()
                        .collect();
                    Summary::of(&mine)
                })
                .collect()
        };
        let per_seed = seeds
            .iter()
            .map(|&seed| (seed, summaries(&|run: &Run| run.seed == seed)))
            .collect();
        let pooled = (seeds.len() > 1).then(|| summaries(&|_: &Run| true));
        Report {
            scenario,
            header: header.to_owned(),
            runs,
            per_seed,
            pooled,
        }
    }

    fn render(&self) -> String {
        let mut out = format!("{}\n\n", self.header);
        if let Some(pooled) = &self.pooled {
            let seeds: Vec<u64> = self.per_seed.iter().map(|(seed, _)| *seed).collect();
            out.push_str(&format!("{}, pooled:\n{}\n", seed_label(&seeds), table(pooled)));
        }
        for (seed, summaries) in &self.per_seed {
            out.push_str(&format!("seed {seed}:\n{}\n", table(summaries)));
            for summary in summaries {
                for change in &summary.breaker_changes {
                    out.push_str(&format!(
                        "  {} breaker {}: {} ({}) at {:.0} ms\n",
                        summary.strategy,
                        change.breaker,
                        change.change,
                        change.reason,
                        change.at.as_secs_f64() * 1000.0
                    ));
                }
            }
            if summaries.iter().any(|s| !s.breaker_changes.is_empty()) {
                out.push('\n');
            }
        }
        out
    }

    fn to_json(&self) -> serde_json::Value {
        json!({
            "scenario": self.scenario.name(),
            "options": self.header,
            "pooled": self.pooled,
            "per_seed": self.per_seed.iter().map(|(seed, summaries)| json!({"seed": seed, "summaries": summaries})).collect::<Vec<_>>(),
        })
    }
}

/// What was run, in one line.
fn options_line(args: &FlashSale, arrivals: Option<Arrivals>, scenario: Scenario) -> String {
    let arrivals = arrivals.unwrap_or(scenario.default_arrivals());
    format!(
        "{scenario}: {} agents, {arrivals} arrivals, deadline {}, time scale {}",
        args.agents, args.deadline, args.time_scale
    )
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

fn seed_label(seeds: &[u64]) -> String {
    match seeds {
        [one] => format!("seed {one}"),
        [first, .., last] => format!("seeds {first}-{last}"),
        [] => String::new(),
    }
}

fn strategies(text: &str) -> anyhow::Result<Vec<Box<dyn Strategy>>> {
    text.split(',')
        .map(|name| -> anyhow::Result<Box<dyn Strategy>> {
            match name.trim() {
                "naive" => Ok(Box::new(Naive)),
                "ballast" => Ok(Box::new(WithBallast)),
                other => bail!("--strategies: unknown strategy {other:?}; naive, ballast"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_one_or_an_inclusive_range() {
        assert_eq!(seeds("3").unwrap(), [3]);
        assert_eq!(seeds("1..5").unwrap(), [1, 2, 3, 4, 5]);
        assert_eq!(seeds("1..=2").unwrap(), [1, 2]);
        assert!(seeds("5..1").is_err());
        assert!(seeds("x").unwrap_err().to_string().contains("whole number"));
    }

    #[test]
    fn strategies_are_named() {
        let names: Vec<&str> = strategies("naive, ballast")
            .unwrap()
            .iter()
            .map(|s| s.name())
            .collect();
        assert_eq!(names, ["naive", "ballast"]);
        assert!(strategies("magic").is_err());
    }
}
