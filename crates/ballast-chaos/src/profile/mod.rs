//! The fault profile: per endpoint, what goes wrong and how often.
//!
//! A profile comes from a TOML file ([`Profile::from_toml_str`], [`Profile::load`]; the schema is in
//! docs/chaos.md) or a named preset ([`Profile::preset`]). Files are read in two phases, as every Ballast
//! configuration is: raw serde structs that reject unknown keys, then a validation that reports every broken rule
//! with its path — a profile that loads is a profile that works, and a typo is never a fault that silently does
//! not happen. The typed structs below are what the rest of the crate uses; nothing downstream re-checks them.

mod error;
mod load;
mod outcome;
mod presets;
mod raw;
mod summary;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

pub use ballast_human::DurationError;
pub use error::{FieldError, Problem, ProfileError};
pub(crate) use outcome::exclusive_outcomes;
pub use outcome::{Fault, Quota};

/// A complete fault profile: a seed, per-endpoint faults, the mock model's settings and scripted sequences.
///
/// Endpoints are named `model` (`/v1/chat/completions`, `/v1/responses` and `/v1/messages`), `embeddings`
/// (`/v1/embeddings`) and by tool name (`lookup_order`, `create_refund`,
/// `process_payment`, ...). An endpoint without its own entry uses `default`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// The seed every fault is drawn from.
    pub seed: u64,
    /// Faults of endpoints without their own entry.
    pub default: EndpointProfile,
    /// Faults per endpoint name.
    pub endpoints: BTreeMap<String, EndpointProfile>,
    /// The mock model's behaviour.
    pub model: ModelSettings,
    /// The MCP server's behaviour (`POST /mcp`).
    pub mcp: McpSettings,
    /// Scripted sequences, checked before any random draw ("op X: 503, 503, then ok").
    pub scripts: Vec<Script>,
    /// Windows, from the server's start, during which it accepts no connection at all: connecting is refused,
    /// and the connections open when one starts are reset (only under [`serve`](crate::serve) and
    /// [`spawn`](crate::spawn); a bare [`router`](crate::router) has no listener).
    pub closed: Vec<Window>,
}

impl Profile {
    /// The same profile with its clock running `scale` times as fast as real time (`0.1`: ten times faster):
    /// every latency, outage and closed window, stall, keep-alive interval, chunk interval and `Retry-After` is
    /// multiplied by
    /// `scale` (a `Retry-After` in whole seconds becomes one in milliseconds). Rates, capacities and scripts are
    /// unchanged. A benchmark scales its own durations (timeouts, deadlines, backoff) by the same factor, so a
    /// run takes a fraction of the time and meets the same faults in the same order.
    ///
    /// # Panics
    /// When `scale` is not a positive finite number.
    pub fn scaled(&self, scale: f64) -> Profile {
        assert!(
            scale.is_finite() && scale > 0.0,
            "a time scale is a positive number, got {scale}"
        );
        let by = |d: Duration| d.mul_f64(scale);
        let mut scaled = self.clone();
        for faults in std::iter::once(&mut scaled.default).chain(scaled.endpoints.values_mut()) {
            if let Some(latency) = &mut faults.latency {
                latency.p50 = by(latency.p50);
                latency.p99 = by(latency.p99);
            }
            faults.retry_after = faults.retry_after.map(|form| match form {
                RetryAfterForm::Seconds(s) => {
                    RetryAfterForm::Millis(by(Duration::from_secs(s)).as_millis() as u64)
                }
                RetryAfterForm::Millis(ms) => {
                    RetryAfterForm::Millis(by(Duration::from_millis(ms)).as_millis() as u64)
                }
                RetryAfterForm::HttpDate(delay) => RetryAfterForm::HttpDate(by(delay)),
            });
            for outage in &mut faults.outages {
                (outage.start, outage.end) = (by(outage.start), by(outage.end));
            }
            faults.stream.stall_for = by(faults.stream.stall_for);
            faults.stream.keep_alive = faults.stream.keep_alive.map(by);
        }
        for window in &mut scaled.closed {
            (window.start, window.end) = (by(window.start), by(window.end));
        }
        scaled.model.chunk_interval = by(scaled.model.chunk_interval);
        scaled
    }

    /// The faults of `endpoint` (its own entry, else `default`).
    pub fn endpoint(&self, endpoint: &str) -> &EndpointProfile {
        self.endpoints.get(endpoint).unwrap_or(&self.default)
    }
}

/// What can go wrong on one endpoint, and how often. Rates are probabilities in `0..=1` per attempt; the rates
/// of the mutually exclusive faults (errors, insufficient quota, spend limit, hang, reset, commit-then-lose,
/// stream cut, stream stall, stream error, garbage, is-error) sum to at most 1.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointProfile {
    /// Latency of every answer (log-normal from p50 and p99); `None`: answer at once.
    pub latency: Option<Latency>,
    /// Error answers and their rates (500, 502, 503, 529, 429, ...).
    pub errors: Vec<ErrorRate>,
    /// How 429 and 503 answers carry `Retry-After`; `None`: they carry none.
    pub retry_after: Option<RetryAfterForm>,
    /// Rate of 429 answers with OpenAI's `insufficient_quota` code (the model endpoint; no `Retry-After`; on
    /// Messages, Anthropic's 400 for a credit balance too low): [`Quota::Insufficient`].
    pub insufficient_quota: f64,
    /// Rate of 429 answers for a spend limit reached (Anthropic's `enforced_spend_limit_reached`; on chat and
    /// Responses, OpenAI's `insufficient_quota`; no `Retry-After`): [`Quota::SpendLimit`].
    pub spend_limit: f64,
    /// Rate of hangs before anything is done (the request is never answered; no side effect).
    pub hang: f64,
    /// Rate of connection resets before any answer (no side effect).
    pub reset: f64,
    /// Rate of commit-then-lose: the side effect executes (ledger), then the response is lost.
    pub commit_then_lose: f64,
    /// How a commit-then-lose loses the response.
    pub lose_with: LoseMode,
    /// Windows, measured from the server's start, during which the endpoint answers 503 to everything.
    pub outages: Vec<Outage>,
    /// At most this many requests at once, with a bounded queue; excess answered 503 at once.
    pub capacity: Option<Capacity>,
    /// Faults of streamed answers (the model endpoint with `stream: true`).
    pub stream: StreamFaults,
    /// Rate of answers that are not protocol answers: over MCP, a `200` whose body is not JSON-RPC; nothing
    /// executes. Only a tool called over MCP meets it ([`Fault::Garbage`]).
    pub garbage: f64,
    /// Rate of the tool's own errors: over MCP, a result with `isError: true`; nothing executes. Only a tool
    /// called over MCP meets it ([`Fault::IsError`]).
    pub is_error: f64,
    /// What the endpoint does with `Idempotency-Key` (side-effecting tools).
    pub key_mode: KeyMode,
}

/// A log-normal latency distribution, fitted to its median and 99th percentile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    /// The median.
    pub p50: Duration,
    /// The 99th percentile (at least `p50`).
    pub p99: Duration,
}

/// One error status and the rate it is answered with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorRate {
    /// The status (4xx or 5xx).
    pub status: u16,
    /// Its rate per attempt.
    pub rate: f64,
}

/// The form of `Retry-After` on 429 and 503 answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAfterForm {
    /// Delta-seconds: `Retry-After: 1`.
    Seconds(u64),
    /// Milliseconds: `retry-after-ms: 250` (OpenAI's header), with `Retry-After` in whole seconds rounded up for
    /// clients that read only that.
    Millis(u64),
    /// An HTTP-date this far in the future: `Retry-After: Sun, 29 Nov 2026 17:02:03 GMT`.
    HttpDate(Duration),
}

/// How a commit-then-lose loses the response after the side effect executed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LoseMode {
    /// The response never comes (the client's timeout fires).
    #[default]
    Hang,
    /// The connection is reset.
    Reset,
}

/// A window during which an endpoint is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outage {
    /// Start, after the server's start.
    pub start: Duration,
    /// End, after the server's start (later than `start`).
    pub end: Duration,
    /// What a request meets meanwhile.
    pub answer: OutageAnswer,
}

/// What an endpoint that is down answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutageAnswer {
    /// 503 with `Retry-After` (and `retry-after-ms`): the time left of the window.
    #[default]
    RetryAfter,
    /// 503 without any `Retry-After`: a dead upstream that does not say when it will be back.
    NoRetryAfter,
    /// Nothing: the request hangs (no side effect) until the client gives up or the server stops.
    Hang,
}

/// A window of time, from the server's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Start, after the server's start.
    pub start: Duration,
    /// End, after the server's start (later than `start`).
    pub end: Duration,
}

/// A capacity limit: `concurrent` requests served at once, `queue` more waiting; the rest get 503 at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Requests served at once (at least 1).
    pub concurrent: usize,
    /// Requests waiting for a slot.
    pub queue: usize,
}

/// Faults of a streamed answer, and how a streamed request meets the endpoint's other faults.
///
/// A cut and a stall count every event a stream sends, its preamble included: a chat stream's role chunk, a
/// Responses stream's `response.created` and `response.in_progress`, a Messages stream's `message_start` and
/// `ping`. A stream error counts content chunks only (see [`StreamFaults::error_after_chunks`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamFaults {
    /// Rate of streams cut after `cut_after_chunks` chunks (no `[DONE]`, no `response.completed`).
    pub cut: f64,
    /// Chunks sent before a cut.
    pub cut_after_chunks: u32,
    /// Rate of streams that stall for `stall_for` after `stall_after_chunks` chunks.
    pub stall: f64,
    /// Chunks sent before a stall (0: the stall comes before the first chunk, after the status line).
    pub stall_after_chunks: u32,
    /// How long a stall lasts.
    pub stall_for: Duration,
    /// While a stream stalls, an SSE comment (`: keep-alive`) every this long; `None`: a stall is silent.
    pub keep_alive: Option<Duration>,
    /// Rate of streams that fail with the API's own overload error after `error_after_chunks` content chunks.
    pub error: f64,
    /// Content chunks sent before a stream error (at least 1; default 1): chat chunks with content or arguments,
    /// Responses' `*.delta` events, Messages' `content_block_delta` events. Fewer in the answer: the error comes
    /// after the last of them.
    pub error_after_chunks: u32,
    /// How an injected error status reaches a streamed request.
    pub error_delivery: ErrorDelivery,
}

impl Default for StreamFaults {
    fn default() -> Self {
        StreamFaults {
            cut: 0.0,
            cut_after_chunks: 0,
            stall: 0.0,
            stall_after_chunks: 0,
            stall_for: Duration::ZERO,
            keep_alive: None,
            error: 0.0,
            error_after_chunks: 1,
            error_delivery: ErrorDelivery::default(),
        }
    }
}

/// How an injected error status (an `errors` rate, `insufficient_quota`, a scripted status) reaches a request
/// that asked for a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ErrorDelivery {
    /// As the HTTP status and its JSON body, before any byte of a stream.
    #[default]
    Status,
    /// In the stream, after a `200` and the stream's preamble, as some providers do: a Responses stream sends
    /// `response.created`, `response.in_progress`, then `event: error` and `response.failed`; a chat stream
    /// sends its role chunk, then `data: {"error": {...}}`; a Messages stream sends `message_start`, `ping`,
    /// then `event: error`. Then the stream ends (no `[DONE]`, no `message_stop`).
    Events,
}

/// What a side-effecting tool does with `Idempotency-Key` (DESIGN.md's `upstream_idempotency`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyMode {
    /// Ignores the key: every request executes.
    #[default]
    None,
    /// Deduplicates by key and stores successes: a retry of a success is replayed, of a failure re-executes.
    Keyed,
    /// Stores every answer per key (Stripe) and replays it with `Idempotent-Replayed: true`.
    KeyedReplaysErrors,
}

/// The MCP server's behaviour (`POST /mcp`), beside the faults of its tools (which are the tools' endpoints').
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct McpSettings {
    /// `create_refund` is annotated `readOnlyHint: true` — a lie, for testing a client that must not trust an
    /// untrusted server's annotations (it has side effects, and every call executes).
    pub lying_annotations: bool,
}

/// The mock model's behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSettings {
    /// A conversation longer than this many characters (all message contents) is refused with
    /// `context_length_exceeded` (400).
    pub context_limit_chars: usize,
    /// Time between streamed chunks.
    pub chunk_interval: Duration,
}

impl Default for ModelSettings {
    fn default() -> Self {
        ModelSettings {
            context_limit_chars: 32_000,
            chunk_interval: Duration::from_millis(5),
        }
    }
}

/// A scripted sequence: attempt N of operation `op` on `endpoint` meets `steps[N-1]`; attempts past the end
/// meet the random draw again.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    /// The endpoint.
    pub endpoint: String,
    /// The operation id.
    pub op: String,
    /// One step per attempt.
    pub steps: Vec<ScriptStep>,
}

/// One scripted attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptStep {
    /// Answer normally.
    Ok,
    /// Answer with this status (with the endpoint's `Retry-After` form on 429 and 503).
    Status(u16),
    /// Hang.
    Hang,
    /// Reset the connection.
    Reset,
    /// Execute, then lose the response as the endpoint's `lose_with` says.
    CommitThenLose,
    /// A 429 with OpenAI's `insufficient_quota` code and no `Retry-After` ([`Fault::INSUFFICIENT_QUOTA`]).
    InsufficientQuota,
    /// A 429 for a spend limit reached, no `Retry-After` ([`Fault::SPEND_LIMIT`]).
    SpendLimit,
    /// A stream that fails with the API's overload error after the endpoint's `stream.error_after_chunks`
    /// content chunks ([`Fault::StreamError`]); an answer not streamed is served normally.
    StreamError,
    /// Over MCP, a `200` whose body is not JSON-RPC ([`Fault::Garbage`]); elsewhere served normally.
    Garbage,
    /// Over MCP, a result with `isError: true` ([`Fault::IsError`]); elsewhere served normally.
    IsError,
}
