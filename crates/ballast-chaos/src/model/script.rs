//! The script: which turn comes next, given the conversation so far. See the module docs of `model` for the
//! conversation it plays.

use serde_json::{Value, json};

use super::conversation::{message_text, newest_user_turn, tool_reply};
use super::intent::{self, Intent};

/// The read-only lookup every conversation starts with.
pub(super) const LOOKUP: &str = "lookup_order";

/// The amount of the action when the lookup reply carries no numeric `amount`.
pub(super) const DEFAULT_AMOUNT: f64 = 42.5;

/// What the model says in one turn.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Answer {
    /// Call one function (`finish_reason: "tool_calls"`, `content: null`).
    Call {
        /// The tool-call id, stable per op and step: `call_lookup_<op>`, `call_refund_<op>`, `call_payment_<op>`.
        id: String,
        /// The function.
        name: &'static str,
        /// Its arguments, a JSON object serialized to a string as OpenAI sends them.
        arguments: String,
    },
    /// Answer in text (`finish_reason: "stop"`).
    Text(String),
}

/// One turn: the answer and the key its completion id is derived from (the same key always gives the same id).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Turn {
    /// What the model says.
    pub(super) answer: Answer,
    /// Stable per op and step.
    pub(super) key: String,
}

/// The next turn of the conversation `messages`; `declared` is the request's declared functions (`None`: no
/// `tools` field, every function may be called).
pub(super) fn next_turn(messages: &[Value], declared: Option<&[&str]>) -> Turn {
    let Some(user) = newest_user_turn(messages) else {
        return text(
            "greeting",
            "Hello! Tell me which order to refund or pay, with an operation id written as op=<id>.",
        );
    };
    let asked = message_text(&messages[user]);
    let intent = intent::parse(&asked);
    let Some(op) = intent.op.clone() else {
        return text(
            &format!("no-op\u{0}{asked}"),
            &format!(
                "Which operation is this? Please name it as op=<id> so that the {} of order {} is done once.",
                intent.action.noun(),
                intent.order_id
            ),
        );
    };
    let since = &messages[user + 1..];
    let action = intent.action;
    if let Some(outcome) = tool_reply(since, action.tool_name()) {
        return final_answer(&intent, &op, &outcome);
    }
    let (step, name, arguments) = match tool_reply(since, LOOKUP) {
        Some(order) => (
            action.noun(),
            action.tool_name(),
            json!({"order_id": intent.order_id, "amount": amount(&order), "op": op}),
        ),
        None => ("lookup", LOOKUP, json!({"order_id": intent.order_id, "op": op})),
    };
    if declared.is_some_and(|functions| !functions.contains(&name)) {
        return text(
            &format!("{op}\u{0}undeclared-{name}"),
            &format!(
                "I cannot complete the {} of order {} (op {op}): the {name} tool is not available to me.",
                action.noun(),
                intent.order_id
            ),
        );
    }
    Turn {
        answer: Answer::Call {
            id: format!("call_{step}_{op}"),
            name,
            // `Value`'s Display is its compact JSON text (keys sorted: serde_json keeps no insertion order here).
            arguments: arguments.to_string(),
        },
        key: format!("{op}\u{0}{step}"),
    }
}

fn text(key: &str, text: &str) -> Turn {
    Turn {
        answer: Answer::Text(text.to_owned()),
        key: key.to_owned(),
    }
}

/// The `amount` of a lookup reply that is a JSON object with a numeric `amount`; [`DEFAULT_AMOUNT`] otherwise.
fn amount(lookup_reply: &str) -> Value {
    serde_json::from_str::<Value>(lookup_reply)
        .ok()
        .and_then(|order| order.get("amount").filter(|a| a.is_number()).cloned())
        .unwrap_or_else(|| json!(DEFAULT_AMOUNT))
}

/// The error a tool reply reports: a JSON object with a non-null `error` key (its text when it is a string or
/// has a string `message`). Any other reply, JSON or not, looks like success.
fn reported_error(reply: &str) -> Option<String> {
    let parsed = serde_json::from_str::<Value>(reply).ok()?;
    let error = parsed.get("error").filter(|e| !e.is_null())?;
    let text = error
        .as_str()
        .or_else(|| error.get("message").and_then(Value::as_str));
    Some(text.unwrap_or("the tool answered with an error").to_owned())
}

fn final_answer(intent: &Intent, op: &str, outcome: &str) -> Turn {
    let (noun, order) = (intent.action.noun(), &intent.order_id);
    match reported_error(outcome) {
        None => text(
            &format!("{op}\u{0}final-ok"),
            &format!("Done: the {noun} of order {order} went through (op {op})."),
        ),
        Some(error) => text(
            &format!("{op}\u{0}final-error"),
            &format!("The {noun} of order {order} did not go through (op {op}). The tool said: {error}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Value {
        json!({"role": "user", "content": text})
    }

    fn call_of(turn: &Turn) -> (&str, &str, Value) {
        match &turn.answer {
            Answer::Call { id, name, arguments } => {
                (id, name, serde_json::from_str(arguments).expect("JSON"))
            }
            Answer::Text(text) => panic!("expected a tool call, got text {text:?}"),
        }
    }

    fn after_lookup(lookup_reply: &str) -> Vec<Value> {
        vec![
            user("Refund order 1234, op=op-77"),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_lookup_op-77", "type": "function",
                   "function": {"name": "lookup_order", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": "call_lookup_op-77", "content": lookup_reply}),
        ]
    }

    #[test]
    fn amount_comes_from_the_lookup_reply() {
        let turn = next_turn(&after_lookup(r#"{"order_id": "1234", "amount": 19.99}"#), None);
        assert_eq!(call_of(&turn).2["amount"], json!(19.99));
    }

    #[test]
    fn amount_defaults_when_the_lookup_reply_has_none() {
        for reply in [
            "not json",
            r#"{"amount": "12"}"#,
            "[1, 2]",
            r#"{"order_id": "1234"}"#,
        ] {
            let turn = next_turn(&after_lookup(reply), None);
            assert_eq!(call_of(&turn).2["amount"], json!(DEFAULT_AMOUNT), "{reply}");
        }
    }

    #[test]
    fn errors_are_read_from_the_error_key_only() {
        assert_eq!(reported_error(r#"{"status": "refunded"}"#), None);
        assert_eq!(reported_error("an error, in plain text"), None);
        assert_eq!(reported_error(r#"{"error": null}"#), None);
        assert_eq!(
            reported_error(r#"{"error": "card declined"}"#).as_deref(),
            Some("card declined")
        );
        assert_eq!(
            reported_error(r#"{"error": {"message": "gone", "type": "x"}}"#).as_deref(),
            Some("gone")
        );
        assert_eq!(
            reported_error(r#"{"error": {"code": 7}}"#).as_deref(),
            Some("the tool answered with an error")
        );
    }

    #[test]
    fn a_turn_without_op_asks_for_one() {
        let turn = next_turn(&[user("Refund order 5 please")], None);
        let Answer::Text(text) = &turn.answer else {
            panic!("expected text")
        };
        assert!(text.contains("op=<id>") && text.contains("order 5"), "{text}");
    }

    #[test]
    fn a_conversation_without_user_turn_is_greeted() {
        let turn = next_turn(&[json!({"role": "system", "content": "Be brief."})], None);
        assert!(matches!(turn.answer, Answer::Text(_)));
        assert_eq!(turn.key, "greeting");
    }

    #[test]
    fn undeclared_tools_are_not_called() {
        let turn = next_turn(&[user("Refund order 5, op=a")], Some(&["create_refund"]));
        let Answer::Text(text) = &turn.answer else {
            panic!("expected text")
        };
        assert!(text.contains("lookup_order") && text.contains("op a"), "{text}");
        let turn = next_turn(&after_lookup("{}"), Some(&["lookup_order", "process_payment"]));
        let Answer::Text(text) = &turn.answer else {
            panic!("expected text")
        };
        assert!(text.contains("create_refund"), "{text}");
        // Declared: called.
        let turn = next_turn(&after_lookup("{}"), Some(&["lookup_order", "create_refund"]));
        assert_eq!(call_of(&turn).1, "create_refund");
    }

    #[test]
    fn a_new_user_turn_starts_a_new_operation() {
        let mut messages = after_lookup("{}");
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_refund_op-77",
            "type": "function", "function": {"name": "create_refund", "arguments": "{}"}}]}),
        );
        messages.push(json!({"role": "tool", "tool_call_id": "call_refund_op-77", "content": "{}"}));
        messages.push(json!({"role": "assistant", "content": "Done."}));
        messages.push(user("Now pay order 8, op=op-78"));
        let turn = next_turn(&messages, None);
        assert_eq!(call_of(&turn).0, "call_lookup_op-78");
    }
}
