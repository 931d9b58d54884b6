//! The idempotency store of the side-effecting tools in the `keyed` modes: what a real upstream that honours
//! `Idempotency-Key` does, so that a client's key handling is tested against it.
//!
//! Scope is (tool, key). A key is claimed while its request executes: the same key meanwhile gets 409
//! (`idempotency_key_in_use`, as Stripe answers). The answer is then stored (per the key mode, decided by the
//! caller) or the claim is released so that a retry executes again. A key reused with a different body is 422
//! (`idempotency_key_reused`, the IETF draft's status) whatever the key's state. Bodies are compared as parsed
//! JSON (`serde_json::Value` equality), so a retry that reorders object keys or reformats whitespace is the same
//! request — what a fingerprint over canonical JSON gives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use serde_json::Value;

use super::answer::Answer;
use super::lock::lock;

/// A key's state.
#[derive(Debug)]
enum Entry {
    /// Its first request is executing.
    Executing { body: Value },
    /// Its answer is stored.
    Stored { body: Value, answer: Answer },
}

/// The keys of one server epoch.
#[derive(Clone, Debug, Default)]
pub(crate) struct Keys(Arc<Mutex<HashMap<(String, String), Entry>>>);

/// What a keyed request may do.
#[derive(Debug)]
pub(crate) enum KeyCheck {
    /// The key is new: execute, holding the claim.
    Claimed(Claim),
    /// The key's answer is stored: replay it.
    Replay(Answer),
    /// The key's first request is still executing.
    InUse,
    /// The key was used with a different body.
    Reused,
}

impl Keys {
    /// Checks `key` of `tool` for a request with `body`, claiming it when it is new.
    pub(crate) fn check(&self, tool: &str, key: &str, body: &Value) -> KeyCheck {
        let scope = (tool.to_owned(), key.to_owned());
        let mut keys = lock(&self.0);
        match keys.get(&scope) {
            Some(Entry::Executing { body: first } | Entry::Stored { body: first, .. }) if first != body => {
                KeyCheck::Reused
            }
            Some(Entry::Executing { .. }) => KeyCheck::InUse,
            Some(Entry::Stored { answer, .. }) => KeyCheck::Replay(answer.clone().replayed()),
            None => {
                keys.insert(scope.clone(), Entry::Executing { body: body.clone() });
                KeyCheck::Claimed(Claim {
                    keys: self.clone(),
                    scope,
                    body: body.clone(),
                    settled: false,
                })
            }
        }
    }
}

/// A claimed key. [`Claim::store`] keeps the answer for replays; dropping the claim unstored releases the key, so
/// that a retry executes again (the request failed, hung or was reset before anything was stored).
#[derive(Debug)]
pub(crate) struct Claim {
    keys: Keys,
    scope: (String, String),
    body: Value,
    settled: bool,
}

impl Claim {
    /// Stores `answer` as the key's answer.
    pub(crate) fn store(&mut self, answer: &Answer) {
        let stored = Entry::Stored {
            body: self.body.clone(),
            answer: answer.clone(),
        };
        lock(&self.keys.0).insert(self.scope.clone(), stored);
        self.settled = true;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.settled {
            lock(&self.keys.0).remove(&self.scope);
        }
    }
}

/// A malformed `Idempotency-Key`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Idempotency-Key must be 1 to 255 printable ASCII characters; got {0:?}")]
pub(crate) struct BadKey(pub(crate) String);

/// The request's `Idempotency-Key`, if any (the IETF draft's rules: 1 to 255 printable ASCII characters).
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, BadKey> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
    let printable = text.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    if text.is_empty() || text.len() > 255 || !printable {
        return Err(BadKey(text));
    }
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_stored_answer_is_replayed_for_the_same_body_in_any_key_order() {
        let keys = Keys::default();
        let KeyCheck::Claimed(mut claim) = keys.check("create_refund", "k", &json!({"a": 1, "b": 2})) else {
            panic!("a new key is claimed");
        };
        claim.store(&Answer::ok(json!({"refund": 1})));
        drop(claim);
        let reordered: Value = serde_json::from_str(r#"{ "b": 2, "a": 1 }"#).expect("json");
        let KeyCheck::Replay(answer) = keys.check("create_refund", "k", &reordered) else {
            panic!("the stored answer is replayed");
        };
        assert!(answer.replayed);
        assert_eq!(answer.body, json!({"refund": 1}));
    }

    #[test]
    fn a_key_is_in_use_while_claimed_and_free_again_when_released() {
        let keys = Keys::default();
        let body = json!({"op": "x"});
        let claim = keys.check("t", "k", &body);
        assert!(matches!(keys.check("t", "k", &body), KeyCheck::InUse));
        drop(claim);
        assert!(matches!(keys.check("t", "k", &body), KeyCheck::Claimed(_)));
    }

    #[test]
    fn a_different_body_is_reused_whatever_the_state() {
        let keys = Keys::default();
        let KeyCheck::Claimed(mut claim) = keys.check("t", "k", &json!({"amount": 1})) else {
            panic!("claimed");
        };
        assert!(matches!(
            keys.check("t", "k", &json!({"amount": 2})),
            KeyCheck::Reused
        ));
        claim.store(&Answer::ok(json!({})));
        assert!(matches!(
            keys.check("t", "k", &json!({"amount": 2})),
            KeyCheck::Reused
        ));
    }

    #[test]
    fn keys_are_scoped_per_tool() {
        let keys = Keys::default();
        let _claim = keys.check("create_refund", "k", &json!({}));
        assert!(matches!(
            keys.check("process_payment", "k", &json!({})),
            KeyCheck::Claimed(_)
        ));
    }

    #[test]
    fn malformed_keys_are_refused() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("idempotency-key", HeaderValue::from_str(value).expect("header"));
            idempotency_key(&headers)
        };
        assert_eq!(with("abc-123"), Ok(Some("abc-123".into())));
        assert!(with("").is_err());
        assert!(with(&"x".repeat(256)).is_err());
        assert_eq!(idempotency_key(&HeaderMap::new()), Ok(None));
    }
}
