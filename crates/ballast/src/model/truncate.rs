//! Cutting a conversation to fit a context window: [`truncate`].
//!
//! The rule (DESIGN.md, "Fallback and context"), and why each part:
//! - **System and developer messages are kept**, wherever they are: they are the application's instructions;
//!   a model that loses them answers a different question.
//! - **The newest user turn and everything after it are kept**: that is what the model is being asked now,
//!   with the tool calls and replies it already made for it.
//! - **Older turns are dropped whole, oldest first.** A turn is a user message and everything after it up to
//!   the next user message; the messages before the first user message (an assistant's greeting) count as one
//!   more, oldest, unit. Half a turn is a question without its answer or an answer without its question.
//! - **A tool group is never split**: an assistant message with `tool_calls` is kept with every `tool` reply to
//!   it, and a reply with its call — providers refuse a `tool` message whose call is missing and an assistant
//!   call whose replies are missing. When a group spans turns (a malformed but seen conversation: a user
//!   message between a call and its replies), those turns are dropped together, or kept together when one of
//!   them is protected.
//!
//! How much ([`TruncationGoal`]): when the provider's error gave numbers ([`ContextTokens`]), the goal is the
//! fraction they imply — the conversation's estimated size (its JSON bytes, a stand-in proportional enough to
//! tokens) cut to `prompt_allowed / prompt` of what it is, less a 10% margin because bytes are not tokens.
//! Without numbers, the older half of the droppable turns go. Either way at least one turn goes, so a caller
//! that retries after each truncation always makes progress, and when nothing is left to drop the answer is
//! [`CannotTruncate::NothingToDrop`] so it stops instead of looping.

use std::collections::HashMap;
use std::io;
use std::ops::Range;

use serde::Serialize;

use super::{ContextTokens, Message, Role};

#[cfg(test)]
mod tests;

/// How much [`truncate`] must cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TruncationGoal {
    /// The provider measured `prompt` input tokens where the window leaves room for `prompt_allowed`: cut the
    /// conversation's estimated size to `prompt_allowed / prompt` of what it is, less a 10% margin.
    Fit {
        /// Input tokens the provider counted.
        prompt: u64,
        /// Input tokens the window leaves room for (the limit less the tokens reserved for the answer).
        prompt_allowed: u64,
    },
    /// No numbers to go by: drop the older half of the droppable turns (rounded up).
    HalfOfTurns,
}

impl TruncationGoal {
    /// The goal a context-length error implies: [`TruncationGoal::Fit`] when it gave both the input tokens and
    /// the limit, else [`TruncationGoal::HalfOfTurns`].
    pub(crate) fn for_overflow(tokens: Option<&ContextTokens>) -> Self {
        match tokens.and_then(|tokens| Some((tokens.prompt?, tokens.prompt_allowed()?))) {
            Some((prompt, prompt_allowed)) if prompt > 0 => TruncationGoal::Fit {
                prompt,
                prompt_allowed,
            },
            _ => TruncationGoal::HalfOfTurns,
        }
    }
}

/// What a truncation dropped (the gateway reports `dropped_messages` as `ballast-truncated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// Messages removed.
    pub dropped_messages: usize,
    /// User turns removed (the messages before the first user message count as no turn).
    pub dropped_turns: usize,
}

/// Why [`truncate`] dropped nothing: retrying the same request cannot help.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CannotTruncate {
    /// Only system and developer messages and the newest user turn (with what follows it) are left.
    #[error(
        "nothing left to drop: only system and developer messages and the newest user turn remain; shorten them \
         or use a larger-context model"
    )]
    NothingToDrop,
    /// The tokens reserved for the answer fill the whole window: no cut of the input makes room.
    #[error("the tokens reserved for the answer (max_tokens) fill the context window; lower max_tokens")]
    NoRoomForPrompt,
}

/// The margin taken off the fraction the provider's numbers imply, in tenths: the cut aims at 90% of it.
const KEEP_TENTHS: u128 = 9;

/// Drops whole older turns from `messages`, oldest first, as far as `goal` asks (at least one turn); see the
/// module documentation for the rule. The order of what is kept does not change.
///
/// # Errors
/// [`CannotTruncate::NothingToDrop`] when no turn can be dropped (then `messages` is unchanged), and
/// [`CannotTruncate::NoRoomForPrompt`] when the goal leaves no room for any input.
pub(crate) fn truncate(
    messages: &mut Vec<Message>,
    goal: TruncationGoal,
) -> Result<Truncation, CannotTruncate> {
    truncate_turns(messages, goal)
}

/// What the rule needs to know of one item of a conversation (a chat message; a Responses input item).
pub(crate) trait TurnItem: Serialize {
    /// An instruction (a system or developer message): never dropped.
    fn is_instruction(&self) -> bool;
    /// A user message: where a turn starts.
    fn is_user(&self) -> bool;
    /// The ids of the calls it makes, when it makes calls (an assistant message's `tool_calls`, a Responses
    /// `function_call`).
    fn call_ids(&self) -> Option<Vec<&str>>;
    /// When it replies to a call: the call's id, if it names one.
    fn reply_to(&self) -> Option<Option<&str>>;
}

impl TurnItem for Message {
    fn is_instruction(&self) -> bool {
        self.role.is_instruction()
    }

    fn is_user(&self) -> bool {
        self.role == Role::User
    }

    fn call_ids(&self) -> Option<Vec<&str>> {
        self.has_tool_calls().then(|| {
            (self.tool_calls.iter().flatten())
                .filter_map(|call| call.id.as_deref())
                .collect()
        })
    }

    fn reply_to(&self) -> Option<Option<&str>> {
        (self.role == Role::Tool).then_some(self.tool_call_id.as_deref())
    }
}

/// [`truncate`] over any conversation's items.
pub(crate) fn truncate_turns<T: TurnItem>(
    items: &mut Vec<T>,
    goal: TruncationGoal,
) -> Result<Truncation, CannotTruncate> {
    if let TruncationGoal::Fit {
        prompt_allowed: 0, ..
    } = goal
    {
        return Err(CannotTruncate::NoRoomForPrompt);
    }
    let units = droppable_units(items);
    if units.is_empty() {
        return Err(CannotTruncate::NothingToDrop);
    }
    let count = match goal {
        TruncationGoal::HalfOfTurns => units.len().div_ceil(2),
        TruncationGoal::Fit {
            prompt,
            prompt_allowed,
        } => units_to_fit(items, &units, prompt, prompt_allowed),
    };
    let mut dropped = vec![false; items.len()];
    for unit in &units[..count] {
        for index in unit.clone() {
            dropped[index] = !items[index].is_instruction();
        }
    }
    let dropped_turns = items
        .iter()
        .zip(&dropped)
        .filter(|(item, gone)| **gone && item.is_user())
        .count();
    let before = items.len();
    let mut flags = dropped.iter();
    items.retain(|_| !flags.next().copied().unwrap_or(false));
    Ok(Truncation {
        dropped_messages: before - items.len(),
        dropped_turns,
    })
}

/// How many of `units` (oldest first) to drop so the estimated size falls to the goal: at least one.
fn units_to_fit<T: TurnItem>(items: &[T], units: &[Range<usize>], prompt: u64, prompt_allowed: u64) -> usize {
    let droppable_size = |unit: &Range<usize>| -> u64 {
        items[unit.clone()]
            .iter()
            .filter(|item| !item.is_instruction())
            .map(estimated_size)
            .sum()
    };
    let total: u64 = items.iter().map(estimated_size).sum();
    let target =
        u128::from(total) * u128::from(prompt_allowed) * KEEP_TENTHS / (u128::from(prompt.max(1)) * 10);
    let mut size = u128::from(total);
    let mut count = 0;
    while count < units.len() && (count == 0 || size > target) {
        size -= u128::from(droppable_size(&units[count]));
        count += 1;
    }
    count
}

/// The droppable units, oldest first: index ranges of whole turns (merged where a tool group spans them),
/// before the protected tail, each holding at least one message that is not an instruction.
fn droppable_units<T: TurnItem>(items: &[T]) -> Vec<Range<usize>> {
    let Some(newest_user) = items.iter().rposition(TurnItem::is_user) else {
        return Vec::new();
    };
    // Where each unit starts: the preamble at 0, then every older user message.
    let mut starts = vec![0];
    starts.extend((1..newest_user).filter(|&index| items[index].is_user()));
    let unit_of = |index: usize| starts.partition_point(|&start| start <= index) - 1;
    let links = tool_links(items);

    // A group reaching into the protected tail protects the turn its call is in (and so on, to a fixpoint).
    let mut protected = newest_user;
    while let Some(call) = links
        .iter()
        .find(|&&(call, reply)| call < protected && reply >= protected)
        .map(|l| l.0)
    {
        protected = starts[unit_of(call)];
    }
    // A group spanning turns joins them into one unit.
    let mut joined_with_next = vec![false; starts.len()];
    for &(call, reply) in links.iter().filter(|&&(_, reply)| reply < protected) {
        joined_with_next[unit_of(call)..unit_of(reply)]
            .iter_mut()
            .for_each(|joined| *joined = true);
    }
    let mut units: Vec<Range<usize>> = Vec::new();
    for (unit, &start) in starts
        .iter()
        .enumerate()
        .take_while(|&(_, &start)| start < protected)
    {
        let end = starts.get(unit + 1).copied().unwrap_or(protected).min(protected);
        match units.last_mut() {
            Some(last) if unit > 0 && joined_with_next[unit - 1] => last.end = end,
            _ => units.push(start..end),
        }
    }
    units.retain(|unit| items[unit.clone()].iter().any(|item| !item.is_instruction()));
    units
}

/// Every reply linked to the item that made its call: `(call index, reply index)`.
///
/// A reply is linked by its call id to the latest earlier item whose calls hold that id; a reply without an id,
/// or with one no earlier call holds, to the nearest earlier item with calls (so a malformed pair still stays
/// together). A reply with no earlier call at all is linked to nothing.
fn tool_links<T: TurnItem>(items: &[T]) -> Vec<(usize, usize)> {
    let mut call_by_id: HashMap<&str, usize> = HashMap::new();
    let mut latest_call = None;
    let mut links = Vec::new();
    for (index, item) in items.iter().enumerate() {
        if let Some(id) = item.reply_to() {
            let by_id = id.and_then(|id| call_by_id.get(id).copied());
            if let Some(call) = by_id.or(latest_call) {
                links.push((call, index));
            }
        }
        if let Some(ids) = item.call_ids() {
            latest_call = Some(index);
            call_by_id.extend(ids.into_iter().map(|id| (id, index)));
        }
    }
    links
}

/// An item's estimated size: the length of its JSON.
pub(super) fn estimated_size<T: Serialize>(item: &T) -> u64 {
    let mut counter = ByteCounter(0);
    // Writing to a counter cannot fail, and an item (strings and JSON values) always serialises.
    let _ = serde_json::to_writer(&mut counter, item);
    counter.0
}

/// An `io::Write` that only counts.
struct ByteCounter(u64);

impl io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len() as u64;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
