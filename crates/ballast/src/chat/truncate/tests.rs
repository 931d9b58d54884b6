use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::*;
use crate::chat::ToolCallRef;

fn text(role: Role, content: &str) -> Message {
    Message::text(role, content)
}

fn call(ids: &[&str]) -> Message {
    let calls = ids
        .iter()
        .map(|id| ToolCallRef {
            id: Some((*id).to_owned()),
            extra: Map::new(),
        })
        .collect();
    Message {
        tool_calls: Some(calls),
        ..text(Role::Assistant, "")
    }
}

fn reply(id: &str) -> Message {
    Message {
        tool_call_id: Some(id.to_owned()),
        ..text(Role::Tool, "{\"ok\":true}")
    }
}

fn contents(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(
            |message| match (&message.content, &message.tool_call_id, message.has_tool_calls()) {
                (_, Some(id), _) => format!("reply {id}"),
                (_, _, true) => format!(
                    "call {}",
                    message.tool_calls.as_ref().unwrap()[0].id.as_deref().unwrap()
                ),
                (Some(Value::String(text)), _, _) => text.clone(),
                _ => String::new(),
            },
        )
        .collect()
}

#[test]
fn half_of_turns_drops_the_oldest_whole_turns_and_keeps_instructions() {
    let mut messages = vec![
        text(Role::System, "sys"),
        text(Role::Assistant, "hello"),
        text(Role::User, "u1"),
        call(&["a", "b"]),
        reply("b"),
        text(Role::Developer, "dev"),
        reply("a"),
        text(Role::Assistant, "a1"),
        text(Role::User, "u2"),
        text(Role::Assistant, "a2"),
        text(Role::User, "u3"),
        call(&["c"]),
        reply("c"),
    ];
    // Units: the preamble ("hello"), turn u1, turn u2; the older half rounded up is two.
    let dropped = truncate(&mut messages, TruncationGoal::HalfOfTurns).unwrap();
    assert_eq!(
        dropped,
        Truncation {
            dropped_messages: 6,
            dropped_turns: 1
        }
    );
    assert_eq!(
        contents(&messages),
        ["sys", "dev", "u2", "a2", "u3", "call c", "reply c"]
    );

    let dropped = truncate(&mut messages, TruncationGoal::HalfOfTurns).unwrap();
    assert_eq!(
        dropped,
        Truncation {
            dropped_messages: 2,
            dropped_turns: 1
        }
    );
    assert_eq!(contents(&messages), ["sys", "dev", "u3", "call c", "reply c"]);

    let unchanged = messages.clone();
    assert_eq!(
        truncate(&mut messages, TruncationGoal::HalfOfTurns),
        Err(CannotTruncate::NothingToDrop)
    );
    assert_eq!(messages, unchanged);
}

#[test]
fn a_tool_group_reaching_into_the_newest_turn_protects_its_older_turn() {
    // Malformed (a user message between a call and its reply) but seen: the call's turn must stay.
    let mut messages = vec![
        text(Role::User, "u1"),
        text(Role::Assistant, "a1"),
        text(Role::User, "u2"),
        call(&["x"]),
        text(Role::User, "u3"),
        reply("x"),
    ];
    let dropped = truncate(&mut messages, TruncationGoal::HalfOfTurns).unwrap();
    assert_eq!(
        dropped,
        Truncation {
            dropped_messages: 2,
            dropped_turns: 1
        }
    );
    assert_eq!(contents(&messages), ["u2", "call x", "u3", "reply x"]);
    assert_eq!(
        truncate(&mut messages, TruncationGoal::HalfOfTurns),
        Err(CannotTruncate::NothingToDrop)
    );
}

#[test]
fn a_tool_group_spanning_older_turns_joins_them() {
    let mut messages = vec![
        text(Role::User, "u1"),
        call(&["x"]),
        text(Role::User, "u2"),
        reply("x"),
        text(Role::User, "u3"),
        text(Role::Assistant, "a3"),
        text(Role::User, "u4"),
    ];
    // Units: [u1 + u2] (joined by x), [u3]: the older half is the joined unit.
    let dropped = truncate(&mut messages, TruncationGoal::HalfOfTurns).unwrap();
    assert_eq!(
        dropped,
        Truncation {
            dropped_messages: 4,
            dropped_turns: 2
        }
    );
    assert_eq!(contents(&messages), ["u3", "a3", "u4"]);
}

#[test]
fn nothing_to_drop_without_an_older_turn_or_a_user_message() {
    for conversation in [
        vec![
            text(Role::System, "s"),
            text(Role::User, "u"),
            text(Role::Assistant, "a"),
        ],
        vec![
            text(Role::System, "s"),
            text(Role::Developer, "d"),
            text(Role::User, "u"),
        ],
        vec![text(Role::Assistant, "no user at all"), call(&["x"]), reply("x")],
        vec![],
    ] {
        let mut messages = conversation.clone();
        assert_eq!(
            truncate(&mut messages, TruncationGoal::HalfOfTurns),
            Err(CannotTruncate::NothingToDrop)
        );
        assert_eq!(messages, conversation);
    }
}

/// `turns` user turns of `size` bytes each, then a short newest question.
fn uniform(turns: usize, size: usize) -> Vec<Message> {
    let mut messages = vec![text(Role::System, "sys")];
    for turn in 0..turns {
        messages.push(text(Role::User, &format!("{turn:03}{}", "q".repeat(size))));
        messages.push(text(Role::Assistant, &"a".repeat(size)));
    }
    messages.push(text(Role::User, "now"));
    messages
}

fn size_of(messages: &[Message]) -> u64 {
    messages.iter().map(estimated_size).sum()
}

#[test]
fn fit_cuts_to_the_fraction_the_numbers_imply_less_the_margin() {
    let mut messages = uniform(10, 1000);
    let before = size_of(&messages);
    // The provider counted 2000 tokens where 1000 fit: keep at most 45% of the size.
    let dropped = truncate(
        &mut messages,
        TruncationGoal::Fit {
            prompt: 2000,
            prompt_allowed: 1000,
        },
    )
    .unwrap();
    let after = size_of(&messages);
    assert!(after * 100 <= before * 45, "{after} of {before}");
    // ... and no more than needed: one turn fewer would not have been enough.
    assert_eq!(dropped.dropped_turns, 6, "{after} of {before}");
    assert_eq!(messages.len(), 1 + 2 * 4 + 1);
}

#[test]
fn fit_drops_at_least_one_turn_even_when_the_numbers_say_it_fits() {
    let mut messages = uniform(3, 10);
    let dropped = truncate(
        &mut messages,
        TruncationGoal::Fit {
            prompt: 100,
            prompt_allowed: 1000,
        },
    )
    .unwrap();
    assert_eq!(
        dropped,
        Truncation {
            dropped_messages: 2,
            dropped_turns: 1
        }
    );
}

#[test]
fn fit_drops_everything_droppable_when_even_that_is_not_enough() {
    let mut messages = uniform(3, 10);
    let dropped = truncate(
        &mut messages,
        TruncationGoal::Fit {
            prompt: 1_000_000,
            prompt_allowed: 1,
        },
    )
    .unwrap();
    assert_eq!(dropped.dropped_turns, 3);
    assert_eq!(contents(&messages), ["sys", "now"]);
}

#[test]
fn no_room_for_the_prompt_drops_nothing() {
    // vLLM's captured body: 568 tokens of messages, 6048 reserved for the answer, a 6048-token window.
    let tokens = ContextTokens {
        limit: Some(6048),
        prompt: Some(568),
        completion: Some(6048),
    };
    let goal = TruncationGoal::for_overflow(Some(&tokens));
    assert_eq!(
        goal,
        TruncationGoal::Fit {
            prompt: 568,
            prompt_allowed: 0
        }
    );
    let mut messages = uniform(3, 10);
    assert_eq!(
        truncate(&mut messages, goal),
        Err(CannotTruncate::NoRoomForPrompt)
    );
    assert_eq!(messages, uniform(3, 10));
}

#[test]
fn the_goal_follows_the_numbers_the_error_gave() {
    let full = ContextTokens {
        limit: Some(200_000),
        prompt: Some(208_310),
        completion: None,
    };
    assert_eq!(
        TruncationGoal::for_overflow(Some(&full)),
        TruncationGoal::Fit {
            prompt: 208_310,
            prompt_allowed: 200_000
        }
    );
    let with_completion = ContextTokens {
        limit: Some(131_072),
        prompt: Some(122_942),
        completion: Some(8192),
    };
    assert_eq!(
        TruncationGoal::for_overflow(Some(&with_completion)),
        TruncationGoal::Fit {
            prompt: 122_942,
            prompt_allowed: 122_880
        }
    );
    for partial in [
        ContextTokens {
            limit: Some(4096),
            prompt: None,
            completion: None,
        },
        ContextTokens {
            limit: None,
            prompt: Some(5000),
            completion: None,
        },
        ContextTokens {
            limit: Some(4096),
            prompt: Some(0),
            completion: None,
        },
        ContextTokens::default(),
    ] {
        assert_eq!(
            TruncationGoal::for_overflow(Some(&partial)),
            TruncationGoal::HalfOfTurns,
            "{partial:?}"
        );
    }
    assert_eq!(TruncationGoal::for_overflow(None), TruncationGoal::HalfOfTurns);
}

#[test]
fn a_reply_without_an_id_stays_with_the_nearest_call() {
    let anonymous = Message {
        tool_call_id: None,
        ..reply("ignored")
    };
    let mut messages = vec![
        text(Role::User, "u1"),
        Message {
            tool_calls: Some(vec![ToolCallRef {
                id: None,
                extra: Map::new(),
            }]),
            ..text(Role::Assistant, "")
        },
        text(Role::User, "u2"),
        anonymous,
        text(Role::User, "u3"),
    ];
    let dropped = truncate(&mut messages, TruncationGoal::HalfOfTurns).unwrap();
    assert_eq!(
        dropped.dropped_messages,
        4,
        "both turns go together: {:?}",
        contents(&messages)
    );
}

// The property test: generated conversations, every invariant of the module's rule.

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
