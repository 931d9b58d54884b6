//! One attempt's line in the outcome report: started when the attempt starts, finished however it ends.

use ballast_core::Instant;
use http::Response;

use crate::{AttemptResult, Body, Cancel, Error, Report, clock};

/// Records one attempt. Dropped unfinished — the caller went away, or cancelled the call, and took a read-only
/// attempt with it — it records the attempt as cancelled or abandoned, so a report read later never shows a
/// phantom `pending`.
#[derive(Debug)]
pub(super) struct AttemptRecorder {
    report: Report,
    index: usize,
    started: Instant,
    cancel: Cancel,
    /// A side-effecting attempt sent and unanswered makes the call's outcome unknown.
    side_effect: bool,
    finished: bool,
}

/// A finished attempt's place in the report, for marking it as finished after the caller left.
#[derive(Debug)]
pub(super) struct Recorded {
    pub(super) report: Report,
    pub(super) index: usize,
    /// How it ended (described only when it is logged: most attempts never are).
    pub(super) result: AttemptResult,
}

impl AttemptRecorder {
    /// Records the start, at `started`, of attempt `number` of the call cancelled by `cancel` (a side effect's
    /// when `side_effect`), which sent `span_id` upstream as its trace's parent id.
    pub(super) fn start(
        report: Report,
        (number, span_id): (u32, Option<u64>),
        cancel: Cancel,
        side_effect: bool,
        started: Instant,
    ) -> Self {
        let index = report.start_attempt(number, started, span_id);
        AttemptRecorder {
            report,
            index,
            started,
            cancel,
            side_effect,
            finished: false,
        }
    }

    /// Records how the attempt ended; for a side effect sent and unanswered, that the call's outcome is unknown
    /// (only the edge of the stack, which sees the whole call, can settle it).
    pub(super) fn finish(mut self, outcome: &Result<Response<Body>, Error>) -> Recorded {
        self.finished = true;
        let answered = outcome.is_ok();
        let (result, sent) = match outcome {
            Ok(response) => (AttemptResult::Status(response.status().as_u16()), true),
            Err(error) => (
                AttemptResult::Error(describe(error)),
                error.may_have_reached_upstream(),
            ),
        };
        self.report
            .finish_attempt(self.index, result.clone(), self.elapsed(), sent);
        if self.side_effect && sent && !answered {
            self.report.update(|r| r.outcome_unknown = true);
        }
        Recorded {
            report: self.report.clone(),
            index: self.index,
            result,
        }
    }

    fn elapsed(&self) -> std::time::Duration {
        clock::now().saturating_duration_since(self.started)
    }
}

impl Recorded {
    /// How the attempt ended, for the log: its status, or its error's description.
    pub(super) fn description(&self) -> String {
        match &self.result {
            AttemptResult::Status(status) => status.to_string(),
            AttemptResult::Error(error) | AttemptResult::Refused(error) => error.clone(),
            AttemptResult::Pending => String::new(),
        }
    }
}

impl Drop for AttemptRecorder {
    fn drop(&mut self) {
        if !self.finished {
            let why = if self.cancel.is_cancelled() {
                "cancelled"
            } else {
                "abandoned: the caller left before it ended"
            };
            let result = AttemptResult::Error(why.to_owned());
            self.report
                .finish_attempt(self.index, result, self.elapsed(), true);
        }
    }
}

/// The short description of an attempt's error the report shows (its duration is shown beside it).
fn describe(error: &Error) -> String {
    match error {
        Error::Timeout {
            by_deadline: true, ..
        } => "timeout: the call's deadline".to_owned(),
        Error::Timeout { .. } => "timeout".to_owned(),
        Error::Transport { sent: false, source } => format!("never sent: {source}"),
        Error::Transport { sent: true, source } => format!("transport error: {source}"),
        Error::Cancelled => "cancelled".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_attempt_is_recorded_with_its_result_duration_and_whether_it_was_sent() {
        let report = Report::default();
        let recorder = AttemptRecorder::start(report.clone(), (2, None), Cancel::new(), true, clock::now());
        tokio::time::advance(Duration::from_millis(40)).await;
        let recorded = recorder.finish(&Err(Error::transport(false, "connection refused")));
        assert_eq!(recorded.description(), "never sent: connection refused");
        assert!(!report.snapshot().outcome_unknown, "never sent");
        let attempt = &report.snapshot().attempts[0];
        assert_eq!(attempt.number, 2);
        assert_eq!(attempt.duration, Duration::from_millis(40));
        assert!(!attempt.sent);
        assert_eq!(
            attempt.result,
            AttemptResult::Error("never sent: connection refused".into())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn answers_and_timeouts_count_as_sent() {
        let report = Report::default();
        let ok = Response::builder()
            .status(503)
            .body(Body::from(Bytes::new()))
            .unwrap();
        AttemptRecorder::start(report.clone(), (1, None), Cancel::new(), true, clock::now()).finish(&Ok(ok));
        assert!(!report.snapshot().outcome_unknown, "answered");
        let timeout = Error::timeout(Duration::from_secs(1));
        let recorded = AttemptRecorder::start(report.clone(), (2, None), Cancel::new(), true, clock::now())
            .finish(&Err(timeout));
        assert_eq!(recorded.description(), "timeout");
        assert!(
            report.snapshot().outcome_unknown,
            "a side effect sent and unanswered"
        );
        let attempts = report.snapshot().attempts;
        assert_eq!(attempts[0].result, AttemptResult::Status(503));
        assert_eq!(attempts[1].result, AttemptResult::Error("timeout".into()));
        assert!(attempts.iter().all(|a| a.sent));
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_dropped_unfinished_is_recorded_as_abandoned_or_cancelled() {
        let report = Report::default();
        let recorder = AttemptRecorder::start(report.clone(), (1, None), Cancel::new(), false, clock::now());
        tokio::time::advance(Duration::from_millis(5)).await;
        drop(recorder);
        let cancel = Cancel::new();
        let recorder = AttemptRecorder::start(report.clone(), (2, None), cancel.clone(), false, clock::now());
        cancel.cancel();
        drop(recorder);
        let attempts = report.snapshot().attempts;
        assert!(matches!(&attempts[0].result, AttemptResult::Error(e) if e.starts_with("abandoned")));
        assert_eq!(attempts[0].duration, Duration::from_millis(5));
        assert_eq!(attempts[1].result, AttemptResult::Error("cancelled".into()));
    }
}
