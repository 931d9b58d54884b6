//! What the newest user turn asks for: the operation id, the order and the action.
//!
//! The op is read first and its span blanked out, so an op such as `op=pay-order-7` neither makes the turn a
//! payment nor gives it an order number.

use std::ops::Range;

/// The side effect a conversation ends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// `create_refund`.
    CreateRefund,
    /// `process_payment`.
    ProcessPayment,
}

impl Action {
    /// The function the model calls.
    pub(super) fn tool_name(self) -> &'static str {
        match self {
            Action::CreateRefund => "create_refund",
            Action::ProcessPayment => "process_payment",
        }
    }

    /// The noun of the final answer and of the tool-call id (`call_refund_<op>`).
    pub(super) fn noun(self) -> &'static str {
        match self {
            Action::CreateRefund => "refund",
            Action::ProcessPayment => "payment",
        }
    }
}

/// What a user turn asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Intent {
    /// The `op=`/`op:` token, if the turn names one.
    pub(super) op: Option<String>,
    /// The digits after the word `order`; `"0"` when there are none.
    pub(super) order_id: String,
    /// Payment when the turn speaks of paying and not of refunding; refund otherwise.
    pub(super) action: Action,
}

/// The order id of a turn that names none.
pub(super) const DEFAULT_ORDER_ID: &str = "0";

/// Reads the intent of a user turn's text.
pub(super) fn parse(text: &str) -> Intent {
    let (op, rest) = match find_op(text) {
        Some((span, op)) => {
            let mut rest = text.to_owned();
            rest.replace_range(span, " ");
            (Some(op), rest)
        }
        None => (None, text.to_owned()),
    };
    Intent {
        op,
        order_id: find_order_id(&rest).unwrap_or_else(|| DEFAULT_ORDER_ID.to_owned()),
        action: find_action(&rest),
    }
}

/// The operation id a turn names, without the rest of its intent.
pub(super) fn operation_id(text: &str) -> Option<String> {
    find_op(text).map(|(_, op)| op)
}

/// A byte that continues a word (so `stop:` holds no `op:` and `reorder` no `order`).
fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// A byte of an op token: `[A-Za-z0-9_.:-]`.
fn is_op_byte(byte: u8) -> bool {
    is_word_byte(byte) || matches!(byte, b'.' | b':' | b'-')
}

/// Byte offsets where `word` starts a word, ASCII case-insensitively. Offsets are valid in `text` because ASCII
/// lowercasing keeps every byte where it is.
fn word_starts<'a>(text: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let bytes = text.as_bytes();
    (0..bytes.len()).filter(move |&at| {
        bytes[at..].len() >= word.len()
            && bytes[at..at + word.len()].eq_ignore_ascii_case(word.as_bytes())
            && (at == 0 || !is_word_byte(bytes[at - 1]))
    })
}

/// The end of the run of bytes from `from` that satisfy `keep`.
fn skip_while(bytes: &[u8], from: usize, keep: impl Fn(u8) -> bool) -> usize {
    from + bytes[from..].iter().take_while(|&&b| keep(b)).count()
}

/// The first `op=<token>` or `op: <token>` (spaces allowed around the separator), with the span it covers.
/// A trailing `.` or `:` is sentence punctuation, not part of the token ("... op=op-77.").
fn find_op(text: &str) -> Option<(Range<usize>, String)> {
    let bytes = text.as_bytes();
    word_starts(text, "op").find_map(|start| {
        let at = skip_while(bytes, start + 2, |b| b == b' ' || b == b'\t');
        if !matches!(bytes.get(at), Some(b'=' | b':')) {
            return None;
        }
        let token_start = skip_while(bytes, at + 1, |b| b == b' ' || b == b'\t');
        let mut token_end = skip_while(bytes, token_start, is_op_byte);
        while token_end > token_start && matches!(bytes[token_end - 1], b'.' | b':') {
            token_end -= 1;
        }
        // Every byte of the token is ASCII, so the slice is on char boundaries.
        (token_end > token_start).then(|| (start..token_end, text[token_start..token_end].to_owned()))
    })
}

/// The digits after the first word `order` that has digits after it, separated only by spaces, `#`, `:`, `=`
/// or `-` ("order 1234", "order #1234", "order: 1234", "Order-1234").
fn find_order_id(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    word_starts(text, "order").find_map(|start| {
        let after = start + "order".len();
        if bytes.get(after).copied().is_some_and(is_word_byte) {
            return None; // "orders", "order_id", "ordering": not the word
        }
        let digits_start = skip_while(bytes, after, |b| b.is_ascii_whitespace() || b"#:=-".contains(&b));
        let digits_end = skip_while(bytes, digits_start, |b| b.is_ascii_digit());
        (digits_end > digits_start).then(|| text[digits_start..digits_end].to_owned())
    })
}

/// Payment when a word of the turn is a form of "pay" and none is a form of "refund" ("Refund the payment of
/// order 5" is a refund); refund otherwise.
fn find_action(text: &str) -> Action {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .collect();
    let refund = words.iter().any(|w| w.starts_with("refund"));
    let pay = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "pay" | "pays" | "paying" | "paid" | "payment" | "payments"
        )
    });
    if pay && !refund {
        Action::ProcessPayment
    } else {
        Action::CreateRefund
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(text: &str) -> Option<String> {
        parse(text).op
    }

    #[test]
    fn op_follows_equals_or_colon() {
        assert_eq!(op("Refund order 1234, op=op-77").as_deref(), Some("op-77"));
        assert_eq!(op("Pay order 99 (op: op-5)").as_deref(), Some("op-5"));
        assert_eq!(
            op("OP = run_1.step:2-x please").as_deref(),
            Some("run_1.step:2-x")
        );
        assert_eq!(op("op:\tA-9").as_deref(), Some("A-9"));
    }

    #[test]
    fn op_drops_trailing_sentence_punctuation() {
        assert_eq!(op("Refund order 1, op=op-77.").as_deref(), Some("op-77"));
        assert_eq!(op("op=v1.2: done").as_deref(), Some("v1.2"));
    }

    #[test]
    fn op_must_be_a_word_with_a_token() {
        assert_eq!(op("stop: now, crop=5, shop=x"), None);
        assert_eq!(op("op= , op: )"), None);
        assert_eq!(op("op-77 is the op"), None);
        assert_eq!(op("no operation here"), None);
        // The first well-formed occurrence wins.
        assert_eq!(op("op=, then op=second op=third").as_deref(), Some("second"));
    }

    #[test]
    fn op_is_found_after_non_ascii_text() {
        // A token is ASCII only: `ü` ends it before it starts.
        assert_eq!(op("Rückerstattung für order 5 — op=ü-1"), None);
        assert_eq!(op("Rückerstattung für order 5 — op=x-1").as_deref(), Some("x-1"));
        assert_eq!(parse("Rückerstattung für order 5 — op=x-1").order_id, "5");
    }

    #[test]
    fn order_is_the_first_number_after_the_word_order() {
        assert_eq!(parse("Refund order 1234, op=op-77").order_id, "1234");
        assert_eq!(parse("refund ORDER #0042 op=a").order_id, "0042");
        assert_eq!(parse("Order-17: refund it").order_id, "17");
        assert_eq!(parse("the order: 9 and order 10").order_id, "9");
        assert_eq!(parse("an order for Bob, then order 12").order_id, "12");
    }

    #[test]
    fn order_defaults_and_ignores_other_words_and_the_op() {
        assert_eq!(parse("Refund it, op=op-77").order_id, DEFAULT_ORDER_ID);
        assert_eq!(parse("Refund reorder 5 and orders 6").order_id, DEFAULT_ORDER_ID);
        assert_eq!(parse("Refund my order, op=order-55").order_id, DEFAULT_ORDER_ID);
        assert_eq!(parse("Refund the order (op=op-77) 31").order_id, DEFAULT_ORDER_ID);
    }

    #[test]
    fn payment_versus_refund() {
        assert_eq!(parse("Pay order 99 (op: op-5)").action, Action::ProcessPayment);
        assert_eq!(
            parse("Process the PAYMENT for order 3, op=a").action,
            Action::ProcessPayment
        );
        assert_eq!(parse("Refund order 1234, op=op-77").action, Action::CreateRefund);
        assert_eq!(
            parse("Refund the payment of order 5, op=a").action,
            Action::CreateRefund
        );
        assert_eq!(parse("Handle order 5, op=a").action, Action::CreateRefund);
        assert_eq!(parse("Repay order 5, op=a").action, Action::CreateRefund);
        // The op's own words do not count.
        assert_eq!(parse("Handle order 5, op=pay-5").action, Action::CreateRefund);
    }

    #[test]
    fn operation_id_matches_parse() {
        let text = "Pay order 99 (op: op-5)";
        assert_eq!(operation_id(text), parse(text).op);
    }
}
