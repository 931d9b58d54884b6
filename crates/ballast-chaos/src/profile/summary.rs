//! What a profile serves, for people: `ballast chaos` prints it at start, so whoever reads a run's log knows the
//! upstream it ran against without opening the profile.

use std::fmt::Write as _;

use super::outcome::{Fault, exclusive_outcomes};
use super::{EndpointProfile, ErrorDelivery, KeyMode, LoseMode, Profile, Quota, RetryAfterForm, ScriptStep};
use ballast_human::format_duration as human;

impl Profile {
    /// One line for the seed and the model's settings, one per endpoint (`[default]` first: what every endpoint
    /// without its own line gets), one per script.
    ///
    /// ```
    /// let summary = ballast_chaos::Profile::preset("flaky", 7).unwrap().summary();
    /// assert!(summary.contains("[default]: no latency; 10% 503, 2% hang"), "{summary}");
    /// ```
    pub fn summary(&self) -> String {
        let mut text = format!(
            "seed {}; model: context limit {} chars, a chunk every {}\n",
            self.seed,
            self.model.context_limit_chars,
            human(self.model.chunk_interval)
        );
        let default = std::iter::once(("[default]", &self.default));
        let endpoints = self
            .endpoints
            .iter()
            .map(|(name, faults)| (name.as_str(), faults));
        for (name, faults) in default.chain(endpoints) {
            let _ = writeln!(text, "{name}: {}", endpoint_line(faults));
        }
        if self.mcp.lying_annotations {
            text.push_str("mcp: create_refund annotated readOnlyHint: true (a lie)\n");
        }
        for script in &self.scripts {
            let steps: Vec<String> = script.steps.iter().map(|step| step_name(*step)).collect();
            let _ = writeln!(
                text,
                "script {} op {:?}: {}",
                script.endpoint,
                script.op,
                steps.join(", ")
            );
        }
        text
    }
}

fn endpoint_line(faults: &EndpointProfile) -> String {
    let mut parts = vec![match faults.latency {
        Some(l) => format!("latency p50 {}, p99 {}", human(l.p50), human(l.p99)),
        None => "no latency".to_owned(),
    }];
    let rates: Vec<String> = exclusive_outcomes(faults)
        .filter(|(rate, _)| *rate > 0.0)
        .map(|(rate, fault)| format!("{} {}", percent(rate), fault_name(&fault)))
        .collect();
    parts.push(if rates.is_empty() {
        "no faults".to_owned()
    } else {
        rates.join(", ")
    });
    if let Some(form) = faults.retry_after {
        parts.push(match form {
            RetryAfterForm::Seconds(s) => format!("Retry-After: {s} on 429 and 503"),
            RetryAfterForm::Millis(ms) => format!("retry-after-ms: {ms} on 429 and 503"),
            RetryAfterForm::HttpDate(d) => {
                format!("Retry-After: an HTTP-date {} ahead on 429 and 503", human(d))
            }
        });
    }
    for outage in &faults.outages {
        parts.push(format!(
            "down from {} to {}",
            human(outage.start),
            human(outage.end)
        ));
    }
    if let Some(interval) = faults.stream.keep_alive {
        parts.push(format!(
            "keep-alive every {} while a stream stalls",
            human(interval)
        ));
    }
    if faults.stream.error_delivery == ErrorDelivery::Events {
        parts.push("a stream's injected errors as events".to_owned());
    }
    if let Some(capacity) = faults.capacity {
        parts.push(format!(
            "capacity {} + queue {}",
            capacity.concurrent, capacity.queue
        ));
    }
    parts.push(
        match faults.key_mode {
            KeyMode::None => "key_mode none",
            KeyMode::Keyed => "key_mode keyed",
            KeyMode::KeyedReplaysErrors => "key_mode keyed_replays_errors",
        }
        .to_owned(),
    );
    parts.join("; ")
}

/// `0.05` as `5%`, `0.005` as `0.5%`.
fn percent(rate: f64) -> String {
    format!("{}%", (rate * 100.0 * 1e6).round() / 1e6)
}

fn fault_name(fault: &Fault) -> String {
    match *fault {
        Fault::Status {
            quota: Some(Quota::Insufficient),
            ..
        } => "429 insufficient_quota".into(),
        Fault::Status {
            quota: Some(Quota::SpendLimit),
            ..
        } => "429 spend_limit".into(),
        Fault::Status { status, .. } => status.to_string(),
        Fault::Hang => "hang".into(),
        Fault::Reset => "reset".into(),
        Fault::CommitThenLose(mode) => format!("commit_then_lose (then {})", lose_name(mode)),
        Fault::StreamCut { after_chunks } => format!("stream cut after {after_chunks} chunks"),
        Fault::StreamStall { after_chunks, stall } => {
            format!("stream stall of {} after {after_chunks} chunks", human(stall))
        }
        Fault::StreamError { after_chunks } => {
            format!("stream error after {after_chunks} content chunks")
        }
        Fault::Garbage => "garbage (MCP)".into(),
        Fault::IsError => "is_error (MCP)".into(),
        Fault::None => "none".into(),
    }
}

fn lose_name(mode: LoseMode) -> &'static str {
    match mode {
        LoseMode::Hang => "hang",
        LoseMode::Reset => "reset",
    }
}

fn step_name(step: ScriptStep) -> String {
    match step {
        ScriptStep::Ok => "ok".into(),
        ScriptStep::Status(status) => status.to_string(),
        ScriptStep::Hang => "hang".into(),
        ScriptStep::Reset => "reset".into(),
        ScriptStep::CommitThenLose => "commit_then_lose".into(),
        ScriptStep::InsufficientQuota => "insufficient_quota".into(),
        ScriptStep::SpendLimit => "spend_limit".into(),
        ScriptStep::StreamError => "stream_error".into(),
        ScriptStep::Garbage => "garbage".into(),
        ScriptStep::IsError => "is_error".into(),
    }
}
