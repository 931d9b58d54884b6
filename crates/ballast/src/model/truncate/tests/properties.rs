//! The property tests: generated conversations, every invariant of the module's rule.

use proptest::prelude::*;
use serde_json::json;

use super::*;

/// One piece of a generated conversation.
#[derive(Clone, Debug)]
enum Piece {
    Instruction(bool),
    User,
    Assistant,
    /// An assistant call with this many tool calls; the replies follow in the order of the permutation seed,
    /// with an instruction after reply `interleave` (if in range) and, when `spans_user`, a user message
    /// between the call and its replies.
    ToolGroup {
        calls: usize,
        seed: u64,
        interleave: usize,
        spans_user: bool,
    },
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        1 => any::<bool>().prop_map(Piece::Instruction),
        3 => Just(Piece::User),
        2 => Just(Piece::Assistant),
        2 => (1usize..4, any::<u64>(), 0usize..5, prop::bool::weighted(0.15))
            .prop_map(|(calls, seed, interleave, spans_user)| Piece::ToolGroup { calls, seed, interleave, spans_user }),
    ]
}

/// The messages of `pieces`; each carries its position in `extra["n"]` so the output can be traced back.
fn conversation(pieces: &[Piece]) -> Vec<Message> {
    let mut messages = Vec::new();
    for (group, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Instruction(system) => messages.push(text(
                if *system { Role::System } else { Role::Developer },
                "rules",
            )),
            Piece::User => messages.push(text(Role::User, &"question ".repeat(group % 7 + 1))),
            Piece::Assistant => messages.push(text(Role::Assistant, &"answer ".repeat(group % 5 + 1))),
            Piece::ToolGroup {
                calls,
                seed,
                interleave,
                spans_user,
            } => {
                let ids: Vec<String> = (0..*calls).map(|call| format!("call_{group}_{call}")).collect();
                messages.push(call(&ids.iter().map(String::as_str).collect::<Vec<_>>()));
                if *spans_user {
                    messages.push(text(Role::User, "meanwhile"));
                }
                let mut order: Vec<usize> = (0..*calls).collect();
                order.rotate_left((*seed % *calls as u64) as usize);
                for (position, &call) in order.iter().enumerate() {
                    messages.push(reply(&ids[call]));
                    if position == *interleave {
                        messages.push(text(Role::Developer, "note"));
                    }
                }
            }
        }
    }
    for (index, message) in messages.iter_mut().enumerate() {
        message.extra.insert("n".to_owned(), json!(index));
    }
    messages
}

fn position(message: &Message) -> usize {
    message.extra["n"].as_u64().unwrap() as usize
}

/// The turn each message of `before` belongs to: 0 for the preamble, then one per user message.
fn turn_of(before: &[Message]) -> Vec<usize> {
    let mut turn = 0;
    before
        .iter()
        .map(|message| {
            turn += usize::from(message.role == Role::User);
            turn
        })
        .collect()
}

/// What must hold between any conversation and any truncation of it, however many steps it took.
fn check_structure(before: &[Message], after: &[Message]) {
    let kept: Vec<usize> = after.iter().map(position).collect();
    assert!(
        kept.windows(2).all(|pair| pair[0] < pair[1]),
        "order preserved: {kept:?}"
    );
    // Whether `before[index]` is still there (messages are traced by their original position).
    let is_kept = |index: usize| kept.binary_search(&position(&before[index])).is_ok();
    for (index, message) in before.iter().enumerate() {
        if message.role.is_instruction() {
            assert!(is_kept(index), "instruction {index} kept");
        }
    }
    if let Some(newest_user) = before.iter().rposition(|message| message.role == Role::User) {
        assert!(
            (newest_user..before.len()).all(is_kept),
            "the newest user turn and what follows kept"
        );
    }
    for (index, message) in after.iter().enumerate() {
        if let Some(id) = &message.tool_call_id {
            let has_call = after[..index].iter().any(|earlier| {
                earlier
                    .tool_calls
                    .iter()
                    .flatten()
                    .any(|call| call.id.as_deref() == Some(id.as_str()))
            });
            assert!(has_call, "reply {id} has its call");
        }
        for id in message
            .tool_calls
            .iter()
            .flatten()
            .filter_map(|call| call.id.as_deref())
        {
            let answered_before = before
                .iter()
                .filter(|reply| reply.tool_call_id.as_deref() == Some(id))
                .count();
            let answered_after = after
                .iter()
                .filter(|reply| reply.tool_call_id.as_deref() == Some(id))
                .count();
            assert_eq!(answered_before, answered_after, "call {id} keeps all its replies");
        }
    }
    let turns = turn_of(before);
    for turn in 0..=turns.last().copied().unwrap_or(0) {
        let members: Vec<usize> = (0..before.len())
            .filter(|&index| turns[index] == turn && !before[index].role.is_instruction())
            .collect();
        let kept_members = members.iter().filter(|&&index| is_kept(index)).count();
        assert!(
            kept_members == 0 || kept_members == members.len(),
            "turn {turn} is kept or dropped whole"
        );
    }
}

/// One truncation step: its structure, and a result that says what it did.
fn check_step(before: &[Message], after: &[Message], result: Result<Truncation, CannotTruncate>) {
    check_structure(before, after);
    let kept: Vec<usize> = after.iter().map(position).collect();
    // Whether `before[index]` is still there (messages are traced by their original position).
    let is_kept = |index: usize| kept.binary_search(&position(&before[index])).is_ok();
    match result {
        Ok(truncation) => {
            assert!(truncation.dropped_messages > 0, "progress");
            assert_eq!(truncation.dropped_messages, before.len() - after.len());
            let users_dropped = (0..before.len())
                .filter(|&i| before[i].role == Role::User && !is_kept(i))
                .count();
            assert_eq!(truncation.dropped_turns, users_dropped);
        }
        Err(CannotTruncate::NothingToDrop) => assert_eq!(before, after),
        Err(other) => panic!("unexpected {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Truncating again and again: every step keeps every invariant, makes progress, and ends in NothingToDrop.
    #[test]
    fn truncation_keeps_every_rule(pieces in prop::collection::vec(piece(), 0..30), half in any::<bool>(),
                                   prompt in 1u64..100_000, allowed in 0u64..100_000) {
        let original = conversation(&pieces);
        let goal = if half { TruncationGoal::HalfOfTurns } else { TruncationGoal::Fit { prompt, prompt_allowed: allowed } };
        let mut messages = original.clone();
        for _ in 0..=original.len() {
            let before = messages.clone();
            let result = truncate(&mut messages, goal);
            if result == Err(CannotTruncate::NoRoomForPrompt) {
                prop_assert_eq!(allowed, 0);
                prop_assert_eq!(&messages, &before);
                break;
            }
            check_step(&before, &messages, result);
            check_structure(&original, &messages);
            if result.is_err() {
                break;
            }
            prop_assert!(messages.len() < before.len());
        }
    }

    /// With numbers, one turn fewer would not have reached the goal (the cut is no deeper than needed), unless
    /// only one turn went.
    #[test]
    fn fit_cuts_no_deeper_than_needed(turns in 1usize..12, size in 1usize..200, prompt in 1u64..10_000,
                                      allowed in 1u64..10_000) {
        let mut messages = uniform(turns, size);
        let total = u128::from(size_of(&messages));
        let target = total * u128::from(allowed) * KEEP_TENTHS / (u128::from(prompt) * 10);
        let truncation = truncate(&mut messages, TruncationGoal::Fit { prompt, prompt_allowed: allowed }).unwrap();
        let after = u128::from(size_of(&messages));
        prop_assert!(after <= target || truncation.dropped_turns == turns);
        if truncation.dropped_turns > 1 {
            let mut one_fewer = uniform(turns, size);
            let keep_from = 1 + 2 * (truncation.dropped_turns - 1);
            one_fewer.drain(1..keep_from);
            prop_assert!(u128::from(size_of(&one_fewer)) > target);
        }
    }
}
