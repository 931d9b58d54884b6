//! Every strategy on every seed of a scenario, and what comes of them: a summary per strategy per seed, and
//! pooled over the seeds — as tables for a terminal or as JSON. `ballast bench flash-sale` and `ballast demo` both
//! run the flash sale this way.

use serde_json::json;

use super::{Options, Run, Scenario, Strategy, Summary, run, table};

/// What a caller hears while [`run_seeds`] runs.
pub trait Progress: Sync {
    /// A run of `strategy` on `seed` starts.
    fn run_starts(&self, scenario: Scenario, seed: u64, strategy: &str);
    /// One conversation ended.
    fn conversation_ended(&self);
}

/// Runs every strategy on every seed in turn (for each seed, the strategies one after the other), with the rest of
/// `options` as given.
pub async fn run_seeds(
    options: &Options,
    seeds: &[u64],
    strategies: &[Box<dyn Strategy>],
    progress: &dyn Progress,
) -> Result<ScenarioReport, String> {
    let mut runs = Vec::with_capacity(seeds.len() * strategies.len());
    for &seed in seeds {
        let options = Options {
            seed,
            ..options.clone()
        };
        for strategy in strategies {
            progress.run_starts(options.scenario, seed, strategy.name());
            let done = || progress.conversation_ended();
            runs.push(run(&options, strategy.as_ref(), &done).await?);
        }
    }
    Ok(ScenarioReport::new(options.scenario, &options.describe(), runs))
}

/// One scenario's runs, and their summaries per seed and pooled.
#[derive(Clone, Debug)]
pub struct ScenarioReport {
    /// The scenario.
    pub scenario: Scenario,
    /// What was run, in one line.
    pub header: String,
    /// Every run, in the order run.
    pub runs: Vec<Run>,
    /// Per seed, a summary per strategy.
    pub per_seed: Vec<(u64, Vec<Summary>)>,
    /// Over every seed, when there are several.
    pub pooled: Option<Vec<Summary>>,
}

impl ScenarioReport {
    /// The summaries of `runs` (strategies in the order first run).
    pub fn new(scenario: Scenario, header: &str, runs: Vec<Run>) -> ScenarioReport {
        let mut seeds: Vec<u64> = runs.iter().map(|run| run.seed).collect();
        seeds.dedup();
        let mut strategies: Vec<String> = Vec::new();
        for run in &runs {
            if !strategies.contains(&run.strategy) {
                strategies.push(run.strategy.clone());
            }
        }
        let summaries = |keep: &dyn Fn(&Run) -> bool| -> Vec<Summary> {
            strategies
                .iter()
                .map(|strategy| {
                    let mine: Vec<Run> = runs
                        .iter()
                        .filter(|run| &run.strategy == strategy && keep(run))
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
        ScenarioReport {
            scenario,
            header: header.to_owned(),
            runs,
            per_seed,
            pooled,
        }
    }

    /// The tables: pooled first (when there are several seeds), then each seed's with its breakers' changes.
    pub fn render(&self) -> String {
        let mut out = format!("{}\n\n", self.header);
        if let Some(pooled) = &self.pooled {
            let seeds: Vec<u64> = self.per_seed.iter().map(|(seed, _)| *seed).collect();
            out.push_str(&format!(
                "{}, pooled:\n{}{}\n",
                seed_label(&seeds),
                table(pooled),
                instance_lines(pooled)
            ));
        }
        for (seed, summaries) in &self.per_seed {
            out.push_str(&format!(
                "seed {seed}:\n{}{}\n",
                table(summaries),
                instance_lines(summaries)
            ));
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

    /// The same as JSON: `{"scenario", "options", "pooled", "per_seed": [{"seed", "summaries"}]}`.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "scenario": self.scenario.name(),
            "options": self.header,
            "pooled": self.pooled,
            "per_seed": self
                .per_seed
                .iter()
                .map(|(seed, summaries)| json!({"seed": seed, "summaries": summaries}))
                .collect::<Vec<_>>(),
        })
    }
}

/// The lines under a table of what each gateway instance served and the kills, for the strategies that ran
/// several instances or a shared store (none for the others).
fn instance_lines(summaries: &[Summary]) -> String {
    summaries
        .iter()
        .filter_map(|summary| {
            summary
                .instances
                .as_ref()
                .map(|fleet| fleet.lines(&summary.strategy))
        })
        .collect()
}

/// `seed 3`, or `seeds 1-5`.
pub fn seed_label(seeds: &[u64]) -> String {
    match seeds {
        [one] => format!("seed {one}"),
        [first, .., last] => format!("seeds {first}-{last}"),
        [] => String::new(),
    }
}
