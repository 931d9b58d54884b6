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

/// Anthropic's, both 400 `invalid_request_error`: "Your credit balance is too low to access the Anthropic API.
/// Please go to Plans & Billing to upgrade or purchase credits."; a spend limit, "You have reached your
/// specified workspace API usage limits. You will regain access on 2026-06-01 at 00:00 UTC." (or "your
/// specified API usage limits").
fn anthropic(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("credit balance is too low") || message.contains("api usage limits")
}
