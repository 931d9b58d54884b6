//! Idempotency keys and request fingerprints: the pure half of "a retried side effect happens once".
//!
//! Why: a call that timed out may have run. Retried without a key — or with a new key each try — a refund is
//! paid twice (reference/001, DESIGN.md "What goes wrong"). The fix every payment API converged on (Stripe's
//! idempotent requests, the IETF draft-ietf-httpapi-idempotency-key-header) is one key per logical operation,
//! sent with every retry, and a server that runs the first request, stores its answer, and replays it for
//! the same key.
//!
//! - Client side: [`IdempotencyKey`] — [`IdempotencyKey::random`] (UUIDv4 from a cryptographically secure RNG,
//!   as RFC 9562 asks), generated once, outside the retry loop; or [`IdempotencyKey::derived`] (UUIDv5 in a fixed Ballast namespace) from (run id, step id, tool,
//!   call ordinal), so an agent step that is re-run re-sends the same key and two calls in one step do not
//!   collide.
//! - Server side: [`IdempotencyKey::parse`] validates the header (1-255 printable ASCII characters, else 400);
//!   [`fingerprint`] hashes (method, route, media type, body) with SHA-256, JSON bodies in RFC 8785
//!   canonical form with exact numbers ([`canonical_json`]), so a retry that re-serialises its arguments in another key order is still the same
//!   request, while a key reused for a different request gets 422 (Stripe: "keys are compared with the
//!   original request's parameters").
//!
//! The store, the claim and the replay live in `ballast-store` and the gateway; this module only names and
//! compares requests.

mod fingerprint;
mod jcs;
mod key;

#[cfg(test)]
mod arb;

pub use fingerprint::{Fingerprint, InvalidFingerprint, fingerprint, is_json_content_type, media_type};
pub use jcs::{AmbiguousJson, canonical_json};
pub use key::{IdempotencyKey, InvalidKey};
