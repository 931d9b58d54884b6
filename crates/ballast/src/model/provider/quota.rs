//! Spent quota that a provider reports only in words, one function per provider (STYLE.md, convention 5).
//!
//! OpenAI says `insufficient_quota` in its structured code, which `kind_of_code` reads. Anthropic answers a spent
//! credit balance with a 400 whose type is the generic `invalid_request_error`: only the message tells it apart
//! from a bad request — and it matters, because no retry or wait on that deployment can succeed, while the next
//! deployment (another account or provider) can.

/// Whether `message` is a provider's spent-quota wording.
pub(super) fn recognise(message: &str) -> bool {
    anthropic(message)
}

/// "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or
/// purchase credits." (400 `invalid_request_error`).
fn anthropic(message: &str) -> bool {
    message.to_ascii_lowercase().contains("credit balance is too low")
}
