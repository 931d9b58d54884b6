//! Where a chat completions stream commits (DESIGN.md, "Streaming"): what each event read before that point means.
//!
//! The transport reads a streamed 2xx event by event until this rule says one commits; until then the stream is
//! an attempt like any other, retried or moved to the next deployment when it fails. A first event that is an
//! error object (`data: {"error": ...}`, sent by some providers inside a 200 stream) is no first chunk: the
//! attempt fails as a transport error after sending, retried like a reset. A stream whose first event is `[DONE]`
//! (no chunk at all) or is not a chunk (not JSON, no `choices`: a proxy's page, a truncated event) is the same.

use serde_json::Value;

use super::ChatChunk;
use crate::sse::DONE;
use crate::transport::Commit;

/// What event `data` of a chat stream means before the commit point: its first chunk commits it.
pub(super) fn commit(data: &str) -> Commit {
    if data.trim() == DONE {
        // No chunk at all: committing would give the caller an empty answer that ends as if it went well.
        return Commit::Fail("the stream ended ([DONE]) before its first chunk".into());
    }
    if is_error_event(data) {
        return Commit::Fail(format!("the stream's first event is an error: {data}"));
    }
    match serde_json::from_str::<ChatChunk>(data) {
        Ok(_) => Commit::Now,
        // Not a chunk: nothing the caller could be handed yet, so no commit — retried like a reset.
        Err(error) => Commit::Fail(format!(
            "the stream's first event is not a chunk ({error}): {data}"
        )),
    }
}

/// Whether an event's data is an error object rather than a chunk.
pub(super) fn is_error_event(data: &str) -> bool {
    serde_json::from_str::<Value>(data).is_ok_and(|v| v.get("error").is_some_and(|e| !e.is_null()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_chunk_commits() {
        assert_eq!(commit(r#"{"choices":[]}"#), Commit::Now);
    }

    /// A stream that says `[DONE]` before any chunk has no answer in it: committing it would hand the caller an
    /// empty answer that ends as if it went well. It fails before the commit point, so it is retried.
    #[test]
    fn a_stream_done_before_its_first_chunk_is_a_failed_attempt_not_a_commit() {
        assert!(matches!(commit("[DONE]"), Commit::Fail(_)));
    }

    /// Regression: a first event that is not a chunk (a proxy's text, JSON without `choices`) was committed, so
    /// the stream failed at once as `Malformed` with no retry and no fallback — although nothing had reached the
    /// caller yet. It is a failed attempt before the commit point, retried like a reset.
    #[test]
    fn a_first_event_that_is_not_a_chunk_is_a_failed_attempt_not_a_commit() {
        for first in [
            "upstream busy, try later",
            r#"{"object": "chat.completion.chunk"}"#,
            r#"{"error": {"message": "quota"}}"#,
        ] {
            assert!(matches!(commit(first), Commit::Fail(_)), "{first}");
        }
    }
}
