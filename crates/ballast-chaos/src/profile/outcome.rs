//! What an endpoint can do with one attempt ([`Fault`]), and its mutually exclusive outcomes in the one order the
//! draw, the validation and the summary all use.

use std::time::Duration;

use super::{EndpointProfile, LoseMode, RetryAfterForm, ScriptStep};

/// An error answer that no wait fixes: the account's money is spent. Each API answers it in its own words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quota {
    /// The credit is spent. Chat and Responses: OpenAI's 429 `insufficient_quota`; Messages: Anthropic's 400
    /// `invalid_request_error` "Your credit balance is too low to access the Anthropic API. ...".
    Insufficient,
    /// A spend limit is reached. Messages: Anthropic's 429 `rate_limit_error` whose `error.details.error_code`
    /// is `enforced_spend_limit_reached`; chat and Responses: OpenAI's 429 `insufficient_quota` (what OpenAI
    /// answers when a project's budget is spent). Never a `Retry-After`.
    SpendLimit,
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
        /// A 429 that no wait fixes (a spent quota, a spend limit): see [`Quota`]. `None`: a plain error.
        quota: Option<Quota>,
    },
    /// Never answer, execute nothing.
    Hang,
    /// Reset the connection before any answer, execute nothing.
    Reset,
    /// Execute the side effect, then lose the response.
    CommitThenLose(LoseMode),
    /// Stream normally but cut the connection after this many chunks (no `[DONE]`). Drawn only from stream
    /// rates; an answer that is not streamed has no chunks to cut and is served as [`Fault::None`].
    StreamCut {
        /// Chunks sent first.
        after_chunks: u32,
    },
    /// Stream normally but stall after this many chunks, then go on. As with a cut, an answer that is not
    /// streamed is served as [`Fault::None`].
    StreamStall {
        /// Chunks sent first.
        after_chunks: u32,
        /// How long the stall lasts.
        stall: Duration,
    },
    /// Stream normally, then after this many *content* chunks (text or arguments; at least one) send the API's
    /// own overload error in the stream and end it without its end marker: the failure a client cannot hide by
    /// retrying, since part of the answer is already out. As with a cut, an answer that is not streamed is served
    /// as [`Fault::None`].
    StreamError {
        /// Content chunks sent first.
        after_chunks: u32,
    },
    /// Answer with something that is not a protocol answer, executing nothing: over MCP, a `200` whose body is
    /// not JSON-RPC (a broken proxy, a truncated write). Only MCP answers it; a request over any other API is
    /// served as [`Fault::None`].
    Garbage,
    /// The tool's own error, executing nothing: over MCP, a result with `isError: true` (an error the model is
    /// meant to read, not a failure of the transport). Only MCP answers it; a request over any other API is
    /// served as [`Fault::None`].
    IsError,
}

impl Fault {
    /// An error answer with `status`, carrying `faults.retry_after` when the status is 429 or 503 (the two
    /// statuses `Retry-After` is defined for), none otherwise.
    pub fn status(status: u16, faults: &EndpointProfile) -> Fault {
        Fault::Status {
            status,
            retry_after: matches!(status, 429 | 503)
                .then_some(faults.retry_after)
                .flatten(),
            quota: None,
        }
    }

    /// The 429 with OpenAI's `insufficient_quota` code (on Messages, Anthropic's 400 for a credit balance too
    /// low): no `Retry-After`, since waiting does not fix a quota.
    pub const INSUFFICIENT_QUOTA: Fault = Fault::Status {
        status: 429,
        retry_after: None,
        quota: Some(Quota::Insufficient),
    };

    /// The 429 of a spend limit reached (Anthropic's `enforced_spend_limit_reached`): no `Retry-After`.
    pub const SPEND_LIMIT: Fault = Fault::Status {
        status: 429,
        retry_after: None,
        quota: Some(Quota::SpendLimit),
    };
}

/// The mutually exclusive faults of an endpoint with their rates, in the order the draw tries them. The one
/// place that order is written: validation sums these rates and the summary lists them in it.
pub(crate) fn exclusive_outcomes(faults: &EndpointProfile) -> impl Iterator<Item = (f64, Fault)> + '_ {
    let errors = faults
        .errors
        .iter()
        .map(|e| (e.rate, Fault::status(e.status, faults)));
    let stream = &faults.stream;
    errors.chain([
        (faults.insufficient_quota, Fault::INSUFFICIENT_QUOTA),
        (faults.spend_limit, Fault::SPEND_LIMIT),
        (faults.hang, Fault::Hang),
        (faults.reset, Fault::Reset),
        (faults.commit_then_lose, Fault::CommitThenLose(faults.lose_with)),
        (
            stream.cut,
            Fault::StreamCut {
                after_chunks: stream.cut_after_chunks,
            },
        ),
        (
            stream.stall,
            Fault::StreamStall {
                after_chunks: stream.stall_after_chunks,
                stall: stream.stall_for,
            },
        ),
        (
            stream.error,
            Fault::StreamError {
                after_chunks: stream.error_after_chunks,
            },
        ),
        (faults.garbage, Fault::Garbage),
        (faults.is_error, Fault::IsError),
    ])
}

impl ScriptStep {
    pub(crate) fn fault(self, faults: &EndpointProfile) -> Fault {
        match self {
            ScriptStep::Ok => Fault::None,
            ScriptStep::Status(status) => Fault::status(status, faults),
            ScriptStep::Hang => Fault::Hang,
            ScriptStep::Reset => Fault::Reset,
            ScriptStep::CommitThenLose => Fault::CommitThenLose(faults.lose_with),
            ScriptStep::InsufficientQuota => Fault::INSUFFICIENT_QUOTA,
            ScriptStep::SpendLimit => Fault::SPEND_LIMIT,
            ScriptStep::StreamError => Fault::StreamError {
                after_chunks: faults.stream.error_after_chunks,
            },
            ScriptStep::Garbage => Fault::Garbage,
            ScriptStep::IsError => Fault::IsError,
        }
    }
}
