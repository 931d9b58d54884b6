//! Token accounting: what the upstream reported in `usage`, written in the deployment's report as spent on the
//! answer or on a failed attempt (reference/002: tokens of failed attempts are paid for too).
//!
//! One reading for every API: Chat Completions and embeddings say `prompt_tokens` and `completion_tokens`, the
//! Responses API `input_tokens` and `output_tokens`; each counts as the prompt and the completion.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::{Report, TokenUsage, Tokens};

/// The counts of a `usage` object, whichever API's names it uses; the total as reported, else the sum. `None`
/// when it holds no count at all.
pub(crate) fn token_usage_of(usage: &Value) -> Option<TokenUsage> {
    let count = |names: &[&str]| names.iter().find_map(|name| usage.get(*name)?.as_u64());
    let prompt = count(&["prompt_tokens", "input_tokens"]);
    let completion = count(&["completion_tokens", "output_tokens"]);
    let total = count(&["total_tokens"]);
    if prompt.is_none() && completion.is_none() && total.is_none() {
        return None;
    }
    let (prompt, completion) = (prompt.unwrap_or(0), completion.unwrap_or(0));
    Some(TokenUsage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: total.unwrap_or(prompt + completion),
    })
}

/// Adds `usage` (when there is one) to `report`'s tokens: the answer's when `answered`, else a failed attempt's.
pub(crate) fn record_tokens(report: &Report, usage: Option<TokenUsage>, answered: bool) {
    let Some(counted) = usage else { return };
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

/// The counts of a JSON body's `usage` (an answer, an error answer), or of a Responses event's
/// `response.usage`. Only the counts are read into values; the rest of the body (the choices, the output) is
/// skipped over as raw text.
pub(crate) fn usage_of_body(body: &[u8]) -> Option<TokenUsage> {
    counts_of_body(body, token_usage_of)
}

/// [`usage_of_body`], the `usage` object read by `read` (an API's own names: Anthropic's cache counts).
pub(crate) fn counts_of_body(body: &[u8], read: fn(&Value) -> Option<TokenUsage>) -> Option<TokenUsage> {
    let Ok(top) = Counted::of(body) else {
        return usage_of_value(body, read);
    };
    let top = top?;
    let usage = match top.usage {
        Some(usage) => usage,
        None => match Counted::of(top.response?.get().as_bytes()) {
            Ok(response) => response?.usage?,
            Err(_) => return usage_of_value(body, read),
        },
    };
    read(&serde_json::from_str(usage.get()).ok()?)
}

/// [`usage_of_body`] the slow way, the whole body read into a value: for what the raw reading refuses though it
/// is JSON — a key given twice, where the last one counts (as when the answer itself is read).
fn usage_of_value(body: &[u8], read: fn(&Value) -> Option<TokenUsage>) -> Option<TokenUsage> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let usage = json.get("usage").or_else(|| json.get("response")?.get("usage"))?;
    read(usage)
}

/// The two places a body's counts are found, kept as raw JSON until read.
#[derive(Deserialize)]
struct Counted<'a> {
    #[serde(borrow)]
    usage: Option<&'a RawValue>,
    #[serde(borrow)]
    response: Option<&'a RawValue>,
}

impl<'a> Counted<'a> {
    /// `json`'s: `None` when it is not an object (a struct would also be read from an array, by position), an
    /// error when it does not read.
    fn of(json: &'a [u8]) -> Result<Option<Self>, serde_json::Error> {
        if json.trim_ascii_start().first() != Some(&b'{') {
            return Ok(None);
        }
        serde_json::from_slice(json).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn answered_and_failed_tokens_add_up_apart() {
        let report = Report::default();
        let usage = |p, c| token_usage_of(&json!({"prompt_tokens": p, "completion_tokens": c}));
        record_tokens(&report, usage(10, 5), false);
        record_tokens(&report, usage(10, 7), false);
        record_tokens(&report, usage(12, 3), true);
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
            usage_of_body(br#"{"usage": {"prompt_tokens": 3, "total_tokens": 4}}"#).map(|u| u.total_tokens),
            Some(4)
        );
        assert_eq!(usage_of_body(b"not json"), None);
    }

    /// The counts are found without reading the rest of the body into values: whatever else it holds (strings that
    /// say `usage`, nested objects, escapes) is skipped, and only an object has counts.
    #[test]
    fn only_the_bodys_own_usage_counts() {
        let total = |body: &[u8]| usage_of_body(body).map(|u| u.total_tokens);
        let answer = br#" {"choices": [{"message": {"content": "\"usage\": {\"total_tokens\": 99}",
            "tool_calls": [{"function": {"arguments": "{\"usage\": 1}"}}]}}], "model": "m",
            "usage": {"prompt_tokens": 7, "completion_tokens": 5}} "#;
        assert_eq!(total(answer), Some(12));
        let event =
            br#"{"type": "response.completed", "response": {"output": [{"usage": {"total_tokens": 99}}],
            "usage": {"input_tokens": 4, "output_tokens": 1}}}"#;
        assert_eq!(total(event), Some(5));
        // A key given twice: the last one counts, as when the answer is read.
        let twice = br#"{"usage": {"total_tokens": 1}, "choices": [], "usage": {"total_tokens": 2}}"#;
        assert_eq!(total(twice), Some(2));
        let twice = br#"{"response": {"usage": {"total_tokens": 3}, "usage": {"total_tokens": 4}}}"#;
        assert_eq!(total(twice), Some(4));
        for none in [
            &br#"[{"usage": {"total_tokens": 3}}]"#[..],
            br#"{"response": "done"}"#,
            br#"{"response": [{"total_tokens": 3}]}"#,
            br#"{"usage": null}"#,
            br#"{"usage": {"total_tokens": 3}"#,
            b"",
        ] {
            assert_eq!(total(none), None, "{}", String::from_utf8_lossy(none));
        }
    }

    #[test]
    fn the_responses_apis_names_count_alike() {
        let responses = json!({"input_tokens": 36, "output_tokens": 87, "total_tokens": 123,
                               "output_tokens_details": {"reasoning_tokens": 0}});
        assert_eq!(
            token_usage_of(&responses),
            Some(TokenUsage {
                prompt_tokens: 36,
                completion_tokens: 87,
                total_tokens: 123
            })
        );
        let event = br#"{"type": "response.completed", "response": {"usage": {"input_tokens": 1, "output_tokens": 2}}}"#;
        assert_eq!(usage_of_body(event).map(|u| u.total_tokens), Some(3));
        assert_eq!(token_usage_of(&json!({"other": 1})), None);
    }
}
