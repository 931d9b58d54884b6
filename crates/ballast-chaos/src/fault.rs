//! What one attempt meets, drawn deterministically. (Skeleton: `draw` is being written.)

use std::time::Duration;

pub use crate::profile::LoseMode;
use crate::profile::{EndpointProfile, RetryAfterForm};

/// What one attempt meets: how long the endpoint takes, then what it does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Draw {
    /// Time before the endpoint acts (answers, executes, hangs or resets).
    pub latency: Duration,
    /// What it does.
    pub fault: Fault,
}

/// What an endpoint does with one attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Fault {
    /// Serve it normally.
    #[default]
    None,
    /// Answer with an error status, without executing anything.
    Status {
        /// The status.
        status: u16,
        /// `Retry-After` on the answer.
        retry_after: Option<RetryAfterForm>,
        /// A 429 with OpenAI's `insufficient_quota` code (a quota that waiting does not fix).
        insufficient_quota: bool,
    },
    /// Never answer, execute nothing.
    Hang,
    /// Reset the connection before any answer, execute nothing.
    Reset,
    /// Execute the side effect, then lose the response.
    CommitThenLose(LoseMode),
    /// Stream normally but cut the connection after this many chunks (no `[DONE]`).
    StreamCut {
        /// Chunks sent first.
        after_chunks: u32,
    },
    /// Stream normally but stall after this many chunks, then go on.
    StreamStall {
        /// Chunks sent first.
        after_chunks: u32,
        /// How long the stall lasts.
        stall: Duration,
    },
}

/// The draw of attempt `attempt` (1-based) of operation `op` on `endpoint` under `seed`: a pure function of its
/// arguments.
pub fn draw(seed: u64, endpoint: &str, op: &str, attempt: u32, faults: &EndpointProfile) -> Draw {
    let _ = (seed, endpoint, op, attempt, faults);
    Draw {
        latency: Duration::ZERO,
        fault: Fault::None,
    }
}
