//! What a store keeps and answers: scopes, owner tokens, claims, records and stored responses.

use std::fmt;
use std::time::Duration;

use ballast_core::{Fingerprint, IdempotencyKey};
use bytes::Bytes;
use uuid::Uuid;

/// Whose key this is: principal + route + key. Two scopes that differ in any part never see each other's
/// records, so one principal can never read another's replay or status (DESIGN.md, "Scope").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    principal: String,
    route: String,
    key: IdempotencyKey,
}

impl Scope {
    /// The scope of `key` sent by `principal` (the configured name of its API key, not the key itself, so a key
    /// rotation keeps replays) to `route` (e.g. `POST /v1/tools/refund`).
    pub fn new(principal: impl Into<String>, route: impl Into<String>, key: IdempotencyKey) -> Self {
        Scope {
            principal: principal.into(),
            route: route.into(),
            key,
        }
    }

    /// The principal's name.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// The route.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The idempotency key.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// The three parts as one string that no other scope maps to: each part's byte length, `:`, the part.
    /// (`"a:b" + "c"` and `"a" + "b:c"` stay apart.) Backends with a single key space (Redis) key records by it.
    pub fn storage_key(&self) -> String {
        let key = self.key.as_str();
        let mut out = String::with_capacity(self.principal.len() + self.route.len() + key.len() + 16);
        for part in [self.principal.as_str(), self.route.as_str(), key] {
            out.push_str(&part.len().to_string());
            out.push(':');
            out.push_str(part);
        }
        out
    }
}

/// Who holds a claim: a random token drawn per claim. Every state change names it, and the store applies the
/// change only while the record still carries it (compare-and-set), so a holder whose lease was taken over can
/// no longer write.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerToken(Uuid);

// Some of these are the backends' alone: a build without any backend (a store of your own) leaves them unused.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "redis")),
    allow(dead_code)
)]
impl OwnerToken {
    /// The token a holder's own `outcome_unknown` leaves on its record: the nil UUID, which no random (version 4)
    /// token is, so no later write matches it — the holder's verdict is final for the holder too. (An
    /// `outcome_unknown` a claim made of an expired lease keeps the holder's token: its late answer still lands.)
    pub(crate) const RETIRED: OwnerToken = OwnerToken(Uuid::nil());

    /// This token, if it can hold a record: every holder write checks it first, so nobody can write with the
    /// retired token (which [`from_bytes`](OwnerToken::from_bytes) could otherwise forge) and undo a holder's
    /// own final `outcome_unknown`.
    pub(crate) fn holding(self) -> Result<Self, crate::StoreError> {
        if self == OwnerToken::RETIRED {
            return Err(crate::StoreError::NotHeld);
        }
        Ok(self)
    }

    /// A fresh token from the operating system's random generator (unpredictable: a guessed token could write
    /// another request's record).
    pub fn random() -> Self {
        OwnerToken(Uuid::new_v4())
    }

    /// A token from its 16 bytes (as a backend stored them).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        OwnerToken(Uuid::from_bytes(bytes))
    }

    /// The token's 16 bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }

    /// The token as 32 lowercase hex digits (for backends that store text).
    pub fn to_hex(&self) -> String {
        self.0.simple().to_string()
    }

    /// A token from [`to_hex`](OwnerToken::to_hex)'s form.
    pub fn from_hex(hex: &str) -> Option<Self> {
        Uuid::try_parse(hex).ok().map(OwnerToken)
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerToken({})", self.0.simple())
    }
}

/// What a request asks when it claims a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The request's fingerprint (method, route, canonical body). A later request with the same key and another
    /// fingerprint is refused.
    pub fingerprint: Fingerprint,
    /// The claimer's token.
    pub owner: OwnerToken,
    /// How long the claim is held before a renewal: short and fixed (`IdempotencyLayer`: 10 s). Counted on the
    /// store's own clock, so processes with skewed clocks agree on when it runs out.
    pub lease: Duration,
    /// What an expired `dispatched` record becomes for this claimer.
    pub expired_dispatch: ExpiredDispatch,
}

/// What to do with a `dispatched` record whose lease ran out: its holder sent the request upstream and then
/// vanished (crashed, or lost the store), so nobody knows whether the side effect happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExpiredDispatch {
    /// The upstream does not deduplicate (`upstream_idempotency = "none"`): the record becomes
    /// `outcome_unknown`, for good. Re-sending could perform the side effect twice.
    OutcomeUnknown,
    /// The upstream deduplicates by the key (`keyed*`): the claimer takes the record over and re-sends the same
    /// key; the upstream answers with its first result if it had acted.
    TakeOver,
}

/// The state of a request that holds a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InFlight {
    /// Claimed, nothing sent upstream yet.
    Claimed,
    /// Sent upstream (or about to be): the side effect may be happening.
    Dispatched,
}

/// The answer to a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimOutcome {
    /// No live record held the key: the claimer holds it now, in state `claimed`. Go on and run the request.
    Acquired,
    /// A record whose lease had run out was taken over by compare-and-set on its owner token: the claimer holds
    /// it now, in state `claimed`. `was` = [`InFlight::Claimed`]: the old holder never sent anything, run the
    /// request. `was` = [`InFlight::Dispatched`]: only with [`ExpiredDispatch::TakeOver`]; re-send the same key.
    TookOver {
        /// What the old holder had done.
        was: InFlight,
    },
    /// Another request holds the key and its lease is live: answer 409 and let the caller come back.
    InProgress {
        /// Claimed or dispatched.
        state: InFlight,
        /// Time until its lease runs out, on the store's clock (a hint for `Retry-After`).
        lease_left: Duration,
    },
    /// The key's request completed: replay this response.
    Completed(StoredResponse),
    /// The key's request was sent and its outcome is unknown: never run again automatically.
    OutcomeUnknown,
    /// The key is held or was used by a request with another fingerprint: answer 422, nothing runs.
    FingerprintMismatch,
}

/// A record as [`lookup`](crate::IdempotencyStore::lookup) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Where the record is in its life.
    pub state: RecordState,
    /// The fingerprint of the request that claimed it.
    pub fingerprint: Fingerprint,
    /// Time left on the holder's lease, on the store's clock; zero once it ran out, and for finished records.
    pub lease_left: Duration,
}

/// Where a record is: `claimed` -> `dispatched` -> `completed` | `outcome_unknown`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordState {
    /// Claimed, nothing sent upstream yet.
    Claimed,
    /// Sent upstream; no answer stored yet.
    Dispatched,
    /// The upstream answered; this is what it said.
    Completed(StoredResponse),
    /// Sent upstream, and nobody knows whether it acted.
    OutcomeUnknown,
}

/// A response the upstream itself produced (2xx, 4xx or 5xx), as replayed to a retry with the same key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status code.
    pub status: u16,
    /// The allow-listed headers, in order; values are bytes (HTTP allows non-UTF-8 values).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body, whole.
    pub body: Bytes,
}

/// How a store is set up, whatever its backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// How long a finished record (`completed`, `outcome_unknown`) is kept and replayed after it finished; a
    /// record whose holder vanished is kept this long after its lease ran out. Checked on every read; expired
    /// records are deleted by [`reap`](crate::IdempotencyStore::reap). Default 24 h.
    pub retention: Duration,
}

/// Default [`StoreOptions::retention`]: 24 hours (Stripe keeps keys for at least 24 h).
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            retention: DEFAULT_RETENTION,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> IdempotencyKey {
        IdempotencyKey::parse(k).unwrap()
    }

    #[test]
    fn storage_keys_keep_the_parts_apart() {
        let a = Scope::new("a:b", "c", key("k"));
        let b = Scope::new("a", "b:c", key("k"));
        assert_ne!(a.storage_key(), b.storage_key());
        assert_eq!(a.storage_key(), "3:a:b1:c1:k");
    }

    #[test]
    fn owner_tokens_round_trip_as_hex_and_bytes() {
        let token = OwnerToken::random();
        assert_eq!(OwnerToken::from_hex(&token.to_hex()), Some(token));
        assert_eq!(OwnerToken::from_bytes(*token.as_bytes()), token);
        assert_ne!(OwnerToken::random(), token);
        assert_eq!(OwnerToken::from_hex("not hex"), None);
    }
}
