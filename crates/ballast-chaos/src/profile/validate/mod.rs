//! Phase two: the raw profile to the typed [`Profile`], checking every rule and reporting every broken one.
//!
//! A profile that loads is a profile that works: rates are probabilities, the exclusive rates of an endpoint
//! leave room for nothing-goes-wrong, a latency fit exists, an outage has a length, a capacity admits someone, a
//! stream fault has chunks to fault after, a script step means something. All problems are collected, grouped by
//! table (`[model]`, `[default]`, the endpoints by name, the scripts in order), so one run shows everything to fix.

mod check;
mod endpoint;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use super::error::{Problem, Problems, ProfileError};
use super::raw::{RawModel, RawProfile, RawScript};
use super::{EndpointProfile, McpSettings, ModelSettings, Profile, Script};

/// The typed profile of `raw`, or every rule it breaks.
pub(super) fn validate(raw: &RawProfile) -> Result<Profile, ProfileError> {
    let mut problems = Problems::default();
    let model = model(&raw.model, &mut problems);
    let default = endpoint::merge(
        "default",
        &raw.default,
        &EndpointProfile::default(),
        &mut problems,
    );
    let endpoints = raw
        .endpoints
        .iter()
        .map(|(name, table)| {
            let path = format!("endpoints.{name}");
            check::endpoint_name(&mut problems, path.clone(), name);
            (
                name.clone(),
                endpoint::merge(&path, table, &default, &mut problems),
            )
        })
        .collect();
    let scripts = scripts(&raw.scripts, &mut problems);
    let closed = raw
        .closed
        .iter()
        .enumerate()
        .filter_map(|(i, window)| {
            check::window(&mut problems, &format!("closed[{i}]"), &window.start, &window.end)
        })
        .collect();
    problems.into_result(Profile {
        seed: raw.seed,
        default,
        endpoints,
        model,
        mcp: McpSettings {
            lying_annotations: raw.mcp.lying_annotations.unwrap_or(false),
        },
        scripts,
        closed,
    })
}

fn model(raw: &RawModel, problems: &mut Problems) -> ModelSettings {
    let mut model = ModelSettings::default();
    if let Some(limit) = raw.context_limit_chars {
        if limit == 0 {
            problems.push("model.context_limit_chars", Problem::ZeroCount);
        }
        model.context_limit_chars = limit;
    }
    if let Some(interval) = &raw.chunk_interval
        && let Some(interval) = check::duration(problems, "model.chunk_interval".into(), interval)
    {
        model.chunk_interval = interval;
    }
    model
}

fn scripts(raw: &[RawScript], problems: &mut Problems) -> Vec<Script> {
    let mut first_of: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut scripts = Vec::with_capacity(raw.len());
    for (i, script) in raw.iter().enumerate() {
        let at = |key: &str| format!("scripts[{i}].{key}");
        if script.endpoint.is_empty() {
            problems.push(at("endpoint"), Problem::Empty);
        } else {
            check::endpoint_name(problems, at("endpoint"), &script.endpoint);
        }
        if script.op.is_empty() {
            problems.push(at("op"), Problem::Empty);
        }
        if script.steps.is_empty() {
            problems.push(at("steps"), Problem::Empty);
        }
        let steps = script
            .steps
            .iter()
            .enumerate()
            .filter_map(|(j, step)| check::step(problems, format!("scripts[{i}].steps[{j}]"), step))
            .collect();
        match first_of.get(&(script.endpoint.as_str(), script.op.as_str())) {
            Some(&first) => problems.push(format!("scripts[{i}]"), Problem::DuplicateScript { first }),
            None => {
                first_of.insert((&script.endpoint, &script.op), i);
            }
        }
        scripts.push(Script {
            endpoint: script.endpoint.clone(),
            op: script.op.clone(),
            steps,
        });
    }
    scripts
}
