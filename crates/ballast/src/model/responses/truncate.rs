//! Cutting a Responses input to fit a context window: [`truncate_input`], the chat rule (`model/truncate.rs`)
//! over input items.
//!
//! - **Instructions are kept**: `system` and `developer` messages (the request's `instructions` field is not an
//!   item and is never touched).
//! - **The newest user message and everything after it are kept**, with the calls and outputs made for it.
//! - **Older turns are dropped whole, oldest first**: a user message and everything after it up to the next one.
//!   A turn holds its assistant messages, its reasoning items (which the provider wants sent with the items they
//!   reasoned for) and its calls with their outputs, so dropping whole turns never separates them.
//! - **A call is never apart from its output**: a `function_call` (any `*_call` item with a `call_id`) stays with
//!   the `function_call_output` (`*_call_output`) that names its `call_id`, even when a malformed input puts a
//!   user message between them.
//!
//! State the provider keeps (`previous_response_id`, `conversation`) is not in the input and is not cut here.

use super::InputItem;
use crate::model::truncate::{TurnItem, truncate_turns};
use crate::model::{CannotTruncate, Truncation, TruncationGoal};

/// Drops whole older turns from a Responses `input`, oldest first, as far as `goal` asks (at least one turn);
/// see the module documentation for the rule. `dropped_messages` counts every item dropped.
///
/// # Errors
/// [`CannotTruncate::NothingToDrop`] when no turn can be dropped (then `input` is unchanged), and
/// [`CannotTruncate::NoRoomForPrompt`] when the goal leaves no room for any input.
pub(crate) fn truncate_input(
    input: &mut Vec<InputItem>,
    goal: TruncationGoal,
) -> Result<Truncation, CannotTruncate> {
    truncate_turns(input, goal)
}

impl TurnItem for InputItem {
    fn is_instruction(&self) -> bool {
        self.kind() == "message" && matches!(self.role(), Some("system" | "developer"))
    }

    fn is_user(&self) -> bool {
        self.kind() == "message" && self.role() == Some("user")
    }

    fn call_ids(&self) -> Option<Vec<&str>> {
        let kind = self.kind();
        (kind.ends_with("_call") && !kind.ends_with("_output")).then(|| self.call_id().into_iter().collect())
    }

    fn reply_to(&self) -> Option<Option<&str>> {
        self.kind().ends_with("_call_output").then(|| self.call_id())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn item(value: Value) -> InputItem {
        serde_json::from_value(value).unwrap()
    }

    fn call(id: &str) -> InputItem {
        item(json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"}))
    }

    fn kinds(input: &[InputItem]) -> Vec<String> {
        (input.iter())
            .map(|i| match i.role() {
                Some(role) => role.to_owned(),
                None => format!("{}:{}", i.kind(), i.call_id().unwrap_or("")),
            })
            .collect()
    }

    #[test]
    fn a_call_is_never_apart_from_its_output() {
        // A malformed input: a user message between a call and its output. The turns around it go together.
        let mut input = vec![
            InputItem::message("user", "one"),
            call("a"),
            InputItem::message("user", "two"),
            InputItem::function_call_output("a", "x"),
            InputItem::message("user", "three"),
            InputItem::message("user", "now"),
        ];
        let dropped = truncate_input(&mut input, TruncationGoal::HalfOfTurns).unwrap();
        assert_eq!(kinds(&input), ["user", "user"], "{dropped:?}");
        assert!(
            !input.iter().any(|i| i.kind().starts_with("function_call")),
            "the call and its output went together"
        );
    }

    #[test]
    fn a_call_answered_in_the_newest_turn_keeps_its_turn() {
        let mut input = vec![
            InputItem::message("user", "old"),
            InputItem::message("assistant", "ok"),
            InputItem::message("user", "older question"),
            call("a"),
            InputItem::message("user", "newest"),
            InputItem::function_call_output("a", "x"),
        ];
        truncate_input(&mut input, TruncationGoal::HalfOfTurns).unwrap();
        assert_eq!(
            kinds(&input),
            ["user", "function_call:a", "user", "function_call_output:a"]
        );
    }

    #[test]
    fn instructions_and_the_newest_turn_are_never_dropped() {
        let mut input = vec![
            InputItem::message("system", "rules"),
            InputItem::message("user", "now"),
            call("a"),
            InputItem::function_call_output("a", "x"),
        ];
        let before = input.clone();
        assert_eq!(
            truncate_input(&mut input, TruncationGoal::HalfOfTurns),
            Err(CannotTruncate::NothingToDrop)
        );
        assert_eq!(input, before);
    }

    #[test]
    fn a_turns_reasoning_call_and_output_go_with_it() {
        let mut input = vec![
            InputItem::message("developer", "Be brief."),
            InputItem::message("user", "Look up order 1"),
            item(json!({"type": "reasoning", "id": "rs_1", "summary": []})),
            call("c1"),
            InputItem::function_call_output("c1", "{\"amount\": 5}"),
            InputItem::message("assistant", "It is 5."),
            InputItem::message("user", "Refund it"),
        ];
        let dropped = truncate_input(&mut input, TruncationGoal::HalfOfTurns).unwrap();
        assert_eq!((dropped.dropped_turns, dropped.dropped_messages), (1, 5));
        assert_eq!(kinds(&input), ["developer", "user"]);
    }
}
