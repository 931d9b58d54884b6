//! Token accounting: what the upstream reported in `usage`, written in the deployment's report as spent on the
//! answer or on a failed attempt (reference/002: tokens of failed attempts are paid for too).

use serde_json::Value;

use super::Usage;
use crate::{Report, TokenUsage, Tokens};

/// The counts of `usage`; the total as reported, else the sum.
pub(crate) fn token_usage(usage: &Usage) -> TokenUsage {
    TokenUsage {
        prompt_tokens: usage.prompt_tokens.unwrap_or(0),
        completion_tokens: usage.completion_tokens.unwrap_or(0),
        total_tokens: usage.total(),
    }
}

/// Adds `usage` (when there is one) to `report`'s tokens: the answer's when `answered`, else a failed attempt's.
pub(crate) fn record_tokens(report: &Report, usage: Option<&Usage>, answered: bool) {
    let Some(usage) = usage else { return };
    let counted = token_usage(usage);
    report.update(|r| {
        crate::metrics::tokens(&r.target, answered, counted.total_tokens);
        let tokens = r.tokens.get_or_insert_with(Tokens::default);
        if answered {
            tokens.answered = tokens.answered.plus(counted);
        } else {
            tokens.failed = tokens.failed.plus(counted);
        }
    });
}

/// The `usage` object of a JSON body, if it has one that reads as usage.
pub(crate) fn usage_of_body(body: &[u8]) -> Option<Usage> {
    let json: Value = serde_json::from_slice(body).ok()?;
    serde_json::from_value(json.get("usage")?.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answered_and_failed_tokens_add_up_apart() {
        let report = Report::default();
        let usage = |p, c| -> Usage {
            serde_json::from_value(serde_json::json!({"prompt_tokens": p, "completion_tokens": c})).unwrap()
        };
        record_tokens(&report, Some(&usage(10, 5)), false);
        record_tokens(&report, Some(&usage(10, 7)), false);
        record_tokens(&report, Some(&usage(12, 3)), true);
        record_tokens(&report, None, true);
        let tokens = report.snapshot().tokens.expect("tokens");
        assert_eq!(
            tokens.failed,
            TokenUsage {
                prompt_tokens: 20,
                completion_tokens: 12,
                total_tokens: 32
            }
        );
        assert_eq!(tokens.answered.total_tokens, 15);
        assert_eq!(
            usage_of_body(br#"{"usage": {"prompt_tokens": 3, "total_tokens": 4}}"#).map(|u| u.total()),
            Some(4)
        );
        assert_eq!(usage_of_body(b"not json").map(|u| u.total()), None);
    }
}
