//! The script's answer as Responses output items: an optional `reasoning` item, then a `function_call` or a
//! `message`; their usage; and the cut that `max_output_tokens` makes.

use serde_json::{Value, json};

use crate::model::completion::tokens;
use crate::model::script::Answer;

/// One output item, as produced (possibly cut by `max_output_tokens`).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct OutputItem {
    /// The item's `id` (`rs_...`, `fc_...`, `msg_...`).
    pub(super) id: String,
    /// What it is.
    pub(super) kind: ItemKind,
    /// False when `max_output_tokens` cut it: its `status` is `incomplete`.
    pub(super) complete: bool,
}

/// The three kinds of item the mock produces.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum ItemKind {
    /// A `reasoning` item with one summary part.
    Reasoning { summary: String },
    /// A `function_call`.
    Call {
        call_id: String,
        name: String,
        arguments: String,
    },
    /// An assistant `message` with one `output_text` part.
    Message { text: String },
}

impl OutputItem {
    /// The item as `response.output` holds it (and `response.output_item.done` carries it).
    pub(super) fn done(&self) -> Value {
        let status = if self.complete { "completed" } else { "incomplete" };
        self.render(status, true)
    }

    /// The item as `response.output_item.added` carries it: in progress, with nothing generated yet.
    pub(super) fn added(&self) -> Value {
        self.render("in_progress", false)
    }

    fn render(&self, status: &str, full: bool) -> Value {
        let id = &self.id;
        match &self.kind {
            ItemKind::Reasoning { summary } => {
                let summary = if full {
                    json!([summary_part(summary)])
                } else {
                    json!([])
                };
                json!({"id": id, "type": "reasoning", "status": status, "summary": summary})
            }
            ItemKind::Call {
                call_id,
                name,
                arguments,
            } => json!({
                "id": id,
                "type": "function_call",
                "status": status,
                "call_id": call_id,
                "name": name,
                "arguments": if full { arguments.as_str() } else { "" },
            }),
            ItemKind::Message { text } => {
                let content = if full { json!([text_part(text)]) } else { json!([]) };
                json!({"id": id, "type": "message", "status": status, "role": "assistant", "content": content})
            }
        }
    }
}

/// A reasoning summary part.
pub(super) fn summary_part(text: &str) -> Value {
    json!({"type": "summary_text", "text": text})
}

/// An `output_text` content part.
pub(super) fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// The short summary of the reasoning item: what the model is about to do.
fn reasoning_summary(answer: &Answer) -> String {
    match answer {
        Answer::Call { name, .. } => format!("The conversation needs {name} next, so I call it."),
        Answer::Text(_) => "Nothing is left to call, so I answer in text.".to_owned(),
    }
}

/// An item id: `prefix`, then the response id's own part and the item's index, so item ids are as unique as the
/// response's (`fc_<hex>01` is item 1 of `resp_<hex>`).
fn item_id(prefix: &str, response_id: &str, index: usize) -> String {
    let own = response_id.strip_prefix("resp_").unwrap_or(response_id);
    format!("{prefix}_{own}{index:02x}")
}

/// What one turn produces: the items, and its usage.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Produced {
    pub(super) items: Vec<OutputItem>,
    /// `max_output_tokens` cut the output.
    pub(super) incomplete: bool,
    /// The Responses `usage` object.
    pub(super) usage: Value,
}

/// The output of `answer` for response `response_id`: with a reasoning item first when `reasoning`, cut at
/// `max_output_tokens`.
///
/// Tokens follow chat's rule, characters / 4 rounded up: the answer counts its text, or a call's name and
/// arguments; the reasoning summary counts as reasoning tokens; `output_tokens` is the tokens of both together.
/// When that is over `max_output_tokens`, the output is cut at `max_output_tokens` x 4 characters — the summary
/// first, then the answer (a call's name before its arguments) — an item cut short is `incomplete`, an item with
/// nothing left is left out, and the response is `incomplete` (`max_output_tokens`).
pub(super) fn produce(
    answer: &Answer,
    response_id: &str,
    reasoning: bool,
    max_output_tokens: Option<u64>,
    input_tokens: usize,
) -> Produced {
    let summary = reasoning.then(|| reasoning_summary(answer));
    let (name_chars, body) = match answer {
        Answer::Call { name, arguments, .. } => (name.chars().count(), arguments.as_str()),
        Answer::Text(text) => (0, text.as_str()),
    };
    let summary_chars = summary.as_deref().map_or(0, |s| s.chars().count());
    let wanted = summary_chars + name_chars + body.chars().count();
    let incomplete = max_output_tokens.is_some_and(|max| tokens(wanted) as u64 > max);
    let mut left = match max_output_tokens {
        Some(max) if incomplete => usize::try_from(max.saturating_mul(4)).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    let mut produced = 0;
    let mut items = Vec::with_capacity(2);
    if let Some(summary) = &summary {
        let (text, complete) = cut(summary, &mut left);
        produced += text.chars().count();
        items.push(OutputItem {
            id: item_id("rs", response_id, items.len()),
            kind: ItemKind::Reasoning { summary: text },
            complete,
        });
    }
    let reasoning_tokens = tokens(produced);
    if !incomplete || left > name_chars {
        left -= name_chars;
        let (body, complete) = cut(body, &mut left);
        produced += name_chars + body.chars().count();
        let index = items.len();
        let kind = match answer {
            Answer::Call { id, name, .. } => ItemKind::Call {
                call_id: id.clone(),
                name: (*name).to_owned(),
                arguments: body,
            },
            Answer::Text(_) => ItemKind::Message { text: body },
        };
        let prefix = if matches!(kind, ItemKind::Call { .. }) {
            "fc"
        } else {
            "msg"
        };
        items.push(OutputItem {
            id: item_id(prefix, response_id, index),
            kind,
            complete,
        });
    }
    let output_tokens = tokens(produced);
    Produced {
        items,
        incomplete,
        usage: json!({
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + output_tokens,
        }),
    }
}

/// `text` cut to the `left` characters of the budget (which it spends), and whether it is whole.
fn cut(text: &str, left: &mut usize) -> (String, bool) {
    let chars = text.chars().count();
    if chars <= *left {
        *left -= chars;
        return (text.to_owned(), true);
    }
    let kept = text.chars().take(*left).collect();
    *left = 0;
    (kept, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Answer {
        Answer::Call {
            id: "call_lookup_a".into(),
            name: "lookup_order",
            arguments: r#"{"op":"a","order_id":"1"}"#.into(),
        }
    }

    #[test]
    fn a_call_is_one_function_call_item() {
        let produced = produce(&call(), "resp_ab", false, None, 7);
        assert!(!produced.incomplete);
        assert_eq!(
            produced.items[0].done(),
            json!({"id": "fc_ab00", "type": "function_call", "status": "completed", "call_id": "call_lookup_a",
                   "name": "lookup_order", "arguments": r#"{"op":"a","order_id":"1"}"#})
        );
        // lookup_order (12) + 25 characters of arguments: 37 characters, 10 tokens.
        assert_eq!(
            produced.usage,
            json!({"input_tokens": 7, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
                   "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 17})
        );
    }

    #[test]
    fn reasoning_comes_first_and_counts_as_reasoning_tokens() {
        let produced = produce(&Answer::Text("Done.".into()), "resp_ab", true, None, 0);
        assert_eq!(produced.items.len(), 2);
        assert_eq!(produced.items[0].id, "rs_ab00");
        assert_eq!(produced.items[1].id, "msg_ab01");
        let summary = reasoning_summary(&Answer::Text(String::new()));
        assert_eq!(
            produced.usage["output_tokens_details"]["reasoning_tokens"],
            tokens(summary.chars().count())
        );
        assert_eq!(
            produced.usage["output_tokens"],
            tokens(summary.chars().count() + 5)
        );
        assert_eq!(produced.items[0].added()["summary"], json!([]));
    }

    #[test]
    fn max_output_tokens_cuts_the_output_and_marks_it_incomplete() {
        let text = Answer::Text("one two three four five six seven eight".into()); // 39 characters, 10 tokens
        assert!(!produce(&text, "resp_a", false, Some(10), 0).incomplete);
        let cut = produce(&text, "resp_a", false, Some(3), 0);
        assert!(cut.incomplete);
        assert_eq!(cut.items[0].done()["content"][0]["text"], "one two thre");
        assert_eq!(cut.items[0].done()["status"], "incomplete");
        assert_eq!(cut.usage["output_tokens"], 3);
        // A call's name is spent before its arguments; with no room for it the call is left out.
        let short = produce(&call(), "resp_a", false, Some(4), 0);
        assert_eq!(short.items[0].done()["arguments"], r#"{"op"#);
        assert!(produce(&call(), "resp_a", false, Some(3), 0).items.is_empty());
        // Reasoning spends the budget first.
        let reasoned = produce(&call(), "resp_a", true, Some(1), 0);
        assert_eq!(reasoned.items.len(), 1);
        assert_eq!(reasoned.items[0].done()["status"], "incomplete");
    }
}
