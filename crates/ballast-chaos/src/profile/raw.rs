//! Phase one: the profile as written. Serde structs that mirror the TOML one to one (docs/chaos.md).
//!
//! Every table rejects keys it does not know (`deny_unknown_fields`), so a typo (`hnag = 0.1`) is an error that
//! names the key and its table, not a fault that silently never happens. Values that have rules (rates, statuses,
//! durations, steps) are kept as written here — durations, `retry_after` and steps as plain TOML values — so that
//! phase two ([`validate`](super::validate)) can report every broken rule at once, each with its path.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{ErrorDelivery, KeyMode, LoseMode, OutageAnswer};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    /// `seed` (default 0).
    #[serde(default)]
    pub(super) seed: u64,
    /// `[model]`.
    #[serde(default)]
    pub(super) model: RawModel,
    /// `[mcp]`.
    #[serde(default)]
    pub(super) mcp: RawMcp,
    /// `[default]`.
    #[serde(default)]
    pub(super) default: RawEndpoint,
    /// `[endpoints.<name>]`.
    #[serde(default)]
    pub(super) endpoints: BTreeMap<String, RawEndpoint>,
    /// `[[scripts]]`.
    #[serde(default)]
    pub(super) scripts: Vec<RawScript>,
    /// `closed = [{ start, end }]`.
    #[serde(default)]
    pub(super) closed: Vec<RawWindow>,
}

/// `[model]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModel {
    pub(super) context_limit_chars: Option<usize>,
    pub(super) chunk_interval: Option<toml::Value>,
}

/// `[mcp]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    pub(super) lying_annotations: Option<bool>,
}

/// `[default]` or `[endpoints.<name>]`: every key optional; an endpoint's table overrides `[default]` key by key.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEndpoint {
    pub(super) latency: Option<RawLatency>,
    /// Status (as written, a TOML key) to rate.
    pub(super) errors: Option<BTreeMap<String, f64>>,
    pub(super) retry_after: Option<toml::Value>,
    pub(super) insufficient_quota: Option<f64>,
    pub(super) spend_limit: Option<f64>,
    pub(super) hang: Option<f64>,
    pub(super) reset: Option<f64>,
    pub(super) commit_then_lose: Option<f64>,
    pub(super) lose_with: Option<RawLoseMode>,
    pub(super) outages: Option<Vec<RawOutage>>,
    pub(super) capacity: Option<RawCapacity>,
    pub(super) stream: Option<RawStream>,
    pub(super) garbage: Option<f64>,
    pub(super) is_error: Option<f64>,
    pub(super) key_mode: Option<RawKeyMode>,
}

impl RawEndpoint {
    /// Whether this table sets any of the mutually exclusive rates (and so owns the check of their sum).
    pub(super) fn sets_a_rate(&self) -> bool {
        self.errors.is_some()
            || self.insufficient_quota.is_some()
            || self.spend_limit.is_some()
            || self.hang.is_some()
            || self.reset.is_some()
            || self.commit_then_lose.is_some()
            || self.stream.is_some()
            || self.garbage.is_some()
            || self.is_error.is_some()
    }
}

/// `latency = { p50 = "40ms", p99 = "200ms" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLatency {
    pub(super) p50: toml::Value,
    pub(super) p99: toml::Value,
}

/// `lose_with = "hang" | "reset"`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawLoseMode {
    Hang,
    Reset,
}

impl From<RawLoseMode> for LoseMode {
    fn from(mode: RawLoseMode) -> Self {
        match mode {
            RawLoseMode::Hang => LoseMode::Hang,
            RawLoseMode::Reset => LoseMode::Reset,
        }
    }
}

/// `{ start = "20s", end = "23s", answer = "no_retry_after" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOutage {
    pub(super) start: toml::Value,
    pub(super) end: toml::Value,
    #[serde(default)]
    pub(super) answer: Option<RawOutageAnswer>,
}

/// `answer = "retry_after" | "no_retry_after" | "hang"`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawOutageAnswer {
    RetryAfter,
    NoRetryAfter,
    Hang,
}

impl From<RawOutageAnswer> for OutageAnswer {
    fn from(answer: RawOutageAnswer) -> Self {
        match answer {
            RawOutageAnswer::RetryAfter => OutageAnswer::RetryAfter,
            RawOutageAnswer::NoRetryAfter => OutageAnswer::NoRetryAfter,
            RawOutageAnswer::Hang => OutageAnswer::Hang,
        }
    }
}

/// `{ start = "5s", end = "15s" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWindow {
    pub(super) start: toml::Value,
    pub(super) end: toml::Value,
}

/// `capacity = { concurrent = 64, queue = 64 }`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCapacity {
    pub(super) concurrent: usize,
    #[serde(default)]
    pub(super) queue: usize,
}

/// `stream = { cut = 0.01, cut_after_chunks = 3, stall = 0.01, stall_after_chunks = 2, stall_for = "2s",
/// keep_alive = "500ms", error = 0.01, error_after_chunks = 2, error_delivery = "events" }`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStream {
    pub(super) cut: Option<f64>,
    pub(super) cut_after_chunks: Option<u32>,
    pub(super) stall: Option<f64>,
    pub(super) stall_after_chunks: Option<u32>,
    pub(super) stall_for: Option<toml::Value>,
    pub(super) keep_alive: Option<toml::Value>,
    pub(super) error: Option<f64>,
    pub(super) error_after_chunks: Option<u32>,
    pub(super) error_delivery: Option<RawErrorDelivery>,
}

/// `error_delivery = "status" | "events"`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawErrorDelivery {
    Status,
    Events,
}

impl From<RawErrorDelivery> for ErrorDelivery {
    fn from(delivery: RawErrorDelivery) -> Self {
        match delivery {
            RawErrorDelivery::Status => ErrorDelivery::Status,
            RawErrorDelivery::Events => ErrorDelivery::Events,
        }
    }
}

/// `key_mode = "none" | "keyed" | "keyed_replays_errors"`.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawKeyMode {
    None,
    Keyed,
    KeyedReplaysErrors,
}

impl From<RawKeyMode> for KeyMode {
    fn from(mode: RawKeyMode) -> Self {
        match mode {
            RawKeyMode::None => KeyMode::None,
            RawKeyMode::Keyed => KeyMode::Keyed,
            RawKeyMode::KeyedReplaysErrors => KeyMode::KeyedReplaysErrors,
        }
    }
}

/// `[[scripts]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScript {
    pub(super) endpoint: String,
    pub(super) op: String,
    /// `"ok"`, `"hang"`, `"reset"`, `"commit_then_lose"`, `"insufficient_quota"`, `"spend_limit"`,
    /// `"stream_error"`, `"garbage"`, `"is_error"`, or a status (`"503"` or `503`).
    pub(super) steps: Vec<toml::Value>,
}
