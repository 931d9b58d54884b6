//! An attempt's span attributes: its number, target and result, and the decision made after it — retried and on
//! what it met, or not and why not (the call's stop reason). The words are the report's own.

use ballast::report::{AttemptRecord, AttemptResult, OutcomeReport};
use opentelemetry::KeyValue;

/// An attempt's attributes: its number, target and result, and what was decided after it.
pub(super) fn attributes(
    attempt: &AttemptRecord,
    report: &OutcomeReport,
    later: Option<&AttemptRecord>,
) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("ballast.attempt", i64::from(attempt.number)),
        KeyValue::new("ballast.target", report.target.clone()),
        KeyValue::new("ballast.attempt.sent", attempt.sent),
    ];
    let result = match &attempt.result {
        AttemptResult::Status(status) => {
            attributes.push(KeyValue::new("http.response.status_code", i64::from(*status)));
            status.to_string()
        }
        AttemptResult::Error(why) => {
            attributes.push(KeyValue::new("ballast.attempt.result", "error"));
            attributes.push(KeyValue::new("ballast.attempt.why", why.clone()));
            why.clone()
        }
        AttemptResult::Refused(why) => {
            attributes.push(KeyValue::new("ballast.attempt.result", "refused"));
            attributes.push(KeyValue::new("ballast.attempt.why", why.clone()));
            why.clone()
        }
        AttemptResult::Pending => {
            attributes.push(KeyValue::new("ballast.attempt.result", "pending"));
            "pending".to_owned()
        }
    };
    if attempt.background {
        attributes.push(KeyValue::new("ballast.attempt.background", true));
    }
    match later {
        Some(_) => {
            attributes.push(KeyValue::new("ballast.retry", true));
            attributes.push(KeyValue::new("ballast.retry.reason", result));
        }
        None => {
            attributes.push(KeyValue::new("ballast.retry", false));
            let why_not = match (&report.stop, report.code) {
                (Some(stop), _) => stop.to_string(),
                (None, Some(code)) => code.as_str().to_owned(),
                (None, None) => "succeeded".to_owned(),
            };
            attributes.push(KeyValue::new("ballast.retry.why_not", why_not));
        }
    }
    attributes
}
