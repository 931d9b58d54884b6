use serde_json::{Map, Value};

use super::*;
use crate::model::ToolCallRef;

mod properties;

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

#[test]
fn the_system_message_and_the_newest_question_stay_when_older_turns_go() {
    let mut messages = vec![
        text(Role::System, "You are terse."),
        text(Role::User, "first question"),
        text(Role::Assistant, "first answer"),
        text(Role::User, "second question"),
    ];
    let dropped = truncate(&mut messages, TruncationGoal::HalfOfTurns).unwrap();
    assert_eq!((dropped.dropped_turns, dropped.dropped_messages), (1, 2));
    let roles: Vec<&str> = messages.iter().map(|message| message.role.as_str()).collect();
    assert_eq!(roles, ["system", "user"]);
}
