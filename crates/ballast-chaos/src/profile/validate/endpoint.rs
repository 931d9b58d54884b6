//! One endpoint's table, over the profile's `[default]`: each key the table sets replaces the default's value
//! (a table such as `latency` or `stream` is replaced whole), then the rules that tie keys together.

use std::collections::BTreeMap;

use crate::profile::error::{Problem, Problems};
use crate::profile::raw::{RawCapacity, RawEndpoint, RawLatency, RawOutage, RawStream};
use crate::profile::{
    Capacity, EndpointProfile, ErrorRate, Fault, Latency, Outage, Quota, StreamFaults, exclusive_outcomes,
};

use super::check;

/// Rates may sum to 1 plus this, so that rates that add up to 1 on paper are not refused for float noise.
const SUM_SLACK: f64 = 1e-9;

/// `raw` at `path` over `base`.
pub(super) fn merge(
    path: &str,
    raw: &RawEndpoint,
    base: &EndpointProfile,
    problems: &mut Problems,
) -> EndpointProfile {
    let at = |key: &str| format!("{path}.{key}");
    let mut merged = base.clone();
    if let Some(latency) = &raw.latency {
        merged.latency = self::latency(&at("latency"), latency, problems);
    }
    if let Some(errors) = &raw.errors {
        merged.errors = self::errors(&at("errors"), errors, problems);
    }
    if let Some(retry_after) = &raw.retry_after {
        merged.retry_after = check::retry_after(problems, &at("retry_after"), retry_after);
    }
    merge_rates(path, raw, &mut merged, problems);
    if let Some(mode) = raw.lose_with {
        merged.lose_with = mode.into();
    }
    if let Some(outages) = &raw.outages {
        merged.outages = self::outages(&at("outages"), outages, problems);
    }
    if let Some(capacity) = raw.capacity {
        merged.capacity = self::capacity(&at("capacity"), capacity, problems);
    }
    if let Some(stream) = &raw.stream {
        merged.stream = self::stream(&at("stream"), stream, problems);
    }
    if let Some(mode) = raw.key_mode {
        merged.key_mode = mode.into();
    }
    // The table that sets a rate owns the sum: an endpoint that inherits all its rates is not blamed for
    // `[default]`'s.
    if raw.sets_a_rate() {
        rates_sum(path, &merged, problems);
    }
    merged
}

/// The single rates (`errors` and `stream` have their own tables). A refused rate counts as 0, so that it is not
/// blamed a second time in the sum.
fn merge_rates(path: &str, raw: &RawEndpoint, merged: &mut EndpointProfile, problems: &mut Problems) {
    let mut rate = |key: &str, value: Option<f64>, current: &mut f64| {
        if let Some(value) = value {
            *current = check::rate(problems, format!("{path}.{key}"), value).unwrap_or(0.0);
        }
    };
    rate(
        "insufficient_quota",
        raw.insufficient_quota,
        &mut merged.insufficient_quota,
    );
    rate("spend_limit", raw.spend_limit, &mut merged.spend_limit);
    rate("hang", raw.hang, &mut merged.hang);
    rate("reset", raw.reset, &mut merged.reset);
    rate(
        "commit_then_lose",
        raw.commit_then_lose,
        &mut merged.commit_then_lose,
    );
    rate("garbage", raw.garbage, &mut merged.garbage);
    rate("is_error", raw.is_error, &mut merged.is_error);
}

fn latency(path: &str, raw: &RawLatency, problems: &mut Problems) -> Option<Latency> {
    let p50 = check::duration(problems, format!("{path}.p50"), &raw.p50);
    let p99 = check::duration(problems, format!("{path}.p99"), &raw.p99);
    let (p50, p99) = (p50?, p99?);
    if p50.is_zero() {
        problems.push(format!("{path}.p50"), Problem::Zero);
        return None;
    }
    if p99 < p50 {
        problems.push(path, Problem::P99UnderP50 { p50, p99 });
        return None;
    }
    Some(Latency { p50, p99 })
}

/// Statuses in ascending order: the order the draw tries them.
fn errors(path: &str, raw: &BTreeMap<String, f64>, problems: &mut Problems) -> Vec<ErrorRate> {
    let mut errors: Vec<ErrorRate> = raw
        .iter()
        .filter_map(|(key, rate)| {
            let at = format!("{path}.{key}");
            let status = check::error_status(problems, at.clone(), key);
            let rate = check::rate(problems, at, *rate);
            Some(ErrorRate {
                status: status?,
                rate: rate?,
            })
        })
        .collect();
    errors.sort_by_key(|e| e.status);
    errors
}

fn outages(path: &str, raw: &[RawOutage], problems: &mut Problems) -> Vec<Outage> {
    raw.iter()
        .enumerate()
        .filter_map(|(i, outage)| {
            let at = format!("{path}[{i}]");
            let window = check::window(problems, &at, &outage.start, &outage.end)?;
            Some(Outage {
                start: window.start,
                end: window.end,
                answer: outage.answer.map(Into::into).unwrap_or_default(),
            })
        })
        .collect()
}

fn capacity(path: &str, raw: RawCapacity, problems: &mut Problems) -> Option<Capacity> {
    if raw.concurrent == 0 {
        problems.push(format!("{path}.concurrent"), Problem::ZeroCount);
        return None;
    }
    Some(Capacity {
        concurrent: raw.concurrent,
        queue: raw.queue,
    })
}

fn stream(path: &str, raw: &RawStream, problems: &mut Problems) -> StreamFaults {
    let at = |key: &str| format!("{path}.{key}");
    let cut = raw
        .cut
        .and_then(|r| check::rate(problems, at("cut"), r))
        .unwrap_or(0.0);
    let stall = raw
        .stall
        .and_then(|r| check::rate(problems, at("stall"), r))
        .unwrap_or(0.0);
    let error = raw
        .error
        .and_then(|r| check::rate(problems, at("error"), r))
        .unwrap_or(0.0);
    let stall_for = raw
        .stall_for
        .as_ref()
        .and_then(|v| check::duration(problems, at("stall_for"), v));
    let keep_alive = raw
        .keep_alive
        .as_ref()
        .and_then(|v| check::duration(problems, at("keep_alive"), v));
    let faults = StreamFaults {
        cut,
        cut_after_chunks: raw.cut_after_chunks.unwrap_or(0),
        stall,
        // 0 is a stall before the first chunk, after the status line: a stream of nothing but keep-alives.
        stall_after_chunks: raw.stall_after_chunks.unwrap_or(0),
        stall_for: stall_for.unwrap_or_default(),
        keep_alive,
        error,
        // 1: the error comes after content by definition (an error before content is `error_delivery`'s).
        error_after_chunks: raw.error_after_chunks.unwrap_or(1),
        error_delivery: raw.error_delivery.map(Into::into).unwrap_or_default(),
    };
    if faults.error_after_chunks == 0 {
        problems.push(at("error_after_chunks"), Problem::ZeroCount);
    }
    if faults.cut > 0.0 && faults.cut_after_chunks == 0 {
        problems.push(at("cut_after_chunks"), Problem::ZeroChunks { rate: "cut" });
    }
    // A refused `stall_for` was already reported; a missing one or a zero is blamed here.
    let refused = raw.stall_for.is_some() && stall_for.is_none();
    if faults.stall > 0.0 && faults.stall_for.is_zero() && !refused {
        problems.push(at("stall_for"), Problem::ZeroStall);
    }
    // A keep-alive every 0s would never stop sending.
    if keep_alive.is_some_and(|interval| interval.is_zero()) {
        problems.push(at("keep_alive"), Problem::Zero);
    }
    faults
}

fn rates_sum(path: &str, faults: &EndpointProfile, problems: &mut Problems) {
    let rates: Vec<(String, f64)> = exclusive_outcomes(faults)
        .filter(|(rate, _)| *rate > 0.0)
        .map(|(rate, fault)| (rate_key(&fault), rate))
        .collect();
    let sum: f64 = rates.iter().map(|(_, rate)| rate).sum();
    if sum > 1.0 + SUM_SLACK {
        problems.push(path, Problem::RatesOverOne { sum, rates });
    }
}

/// The profile key of an exclusive fault's rate: `errors.503`, `insufficient_quota`, `spend_limit`, `hang`,
/// `stream.cut`, `stream.error`, ...
fn rate_key(fault: &Fault) -> String {
    match fault {
        Fault::Status {
            quota: Some(Quota::Insufficient),
            ..
        } => "insufficient_quota".into(),
        Fault::Status {
            quota: Some(Quota::SpendLimit),
            ..
        } => "spend_limit".into(),
        Fault::Status { status, .. } => format!("errors.{status}"),
        Fault::Hang => "hang".into(),
        Fault::Reset => "reset".into(),
        Fault::CommitThenLose(_) => "commit_then_lose".into(),
        Fault::StreamCut { .. } => "stream.cut".into(),
        Fault::StreamStall { .. } => "stream.stall".into(),
        Fault::StreamError { .. } => "stream.error".into(),
        Fault::Garbage => "garbage".into(),
        Fault::IsError => "is_error".into(),
        Fault::None => "none".into(),
    }
}
