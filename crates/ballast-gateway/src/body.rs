//! A request's body, read the one way every route reads it, and a tool's JSON arguments checked by one rule.
//!
//! - **Bounded in size**: a body announced (`content-length`) over `server.body_limit` is refused before a byte
//!   of it is read, one that grows past the limit as soon as it does: 413.
//! - **Bounded in time**: the whole body within `server.body_timeout` (408 `body_timeout`) and within the
//!   request's deadline less its reserve (504 `deadline_exceeded`, which the caller would otherwise meet
//!   without an answer). A caller that sends a body slowly, or announces one and never sends it, is answered and
//!   its connection closed, never held.
//! - **Tool arguments**: JSON, and no object names a member twice (400 `json_duplicate_member`), whether or not
//!   the call is keyed — one rule, the idempotency fingerprint's: readers disagree on which of two members
//!   counts (the gateway, the upstream and a replay could each take another), so such a body is no one request.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use axum::body::Body;
use ballast::policy::Deadline;
use ballast_config::ServerConfig;
use ballast_core::{ErrorCode, Instant};
use bytes::Bytes;
use http::StatusCode;
use http_body::Body as _;
use http_body_util::BodyExt as _;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::AppError;

/// The whole body (module docs): 413 over the limit, 408 after `server.body_timeout`, 504 once `deadline` (its
/// usable part, from `now`) is spent first.
pub(crate) async fn read_body(
    body: Body,
    server: &ServerConfig,
    deadline: Deadline,
    now: Instant,
) -> Result<Bytes, AppError> {
    let limit = server.body_limit;
    if body.size_hint().lower() > limit {
        return Err(AppError::BodyTooLarge { limit });
    }
    let usable = deadline.usable(now);
    let bound = server.body_timeout.min(usable);
    let limited = http_body_util::Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match tokio::time::timeout(bound, limited.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            Err(AppError::BodyTooLarge { limit })
        }
        Ok(Err(_)) => Err(AppError::BodyUnreadable),
        Err(_) if usable < server.body_timeout => Err(body_past_deadline(bound)),
        Err(_) => Err(AppError::BodyTimeout {
            timeout: server.body_timeout,
        }),
    }
}

/// The 504 of a body still arriving when the request's deadline (less its reserve) was spent.
fn body_past_deadline(waited: Duration) -> AppError {
    AppError::Call {
        code: ErrorCode::DeadlineExceeded,
        status: StatusCode::GATEWAY_TIMEOUT,
        message: format!(
            "the request's body was still arriving after {} ms, all its deadline left (less server.reserve); \
             nothing was sent",
            waited.as_millis()
        ),
        retry_after: None,
        should_retry: false,
        shed: None,
    }
}

/// A tool's JSON arguments, checked and kept as they came (every number exact, the key order kept); an empty
/// body is `{}`: a tool without arguments.
pub(crate) fn json_arguments(bytes: Bytes) -> Result<Bytes, AppError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Bytes::from_static(b"{}"));
    }
    let repeated = RefCell::new(None);
    let mut reader = serde_json::Deserializer::from_slice(&bytes);
    let checked = Checked { repeated: &repeated }
        .deserialize(&mut reader)
        .and_then(|()| reader.end());
    match checked {
        Ok(()) => Ok(bytes),
        Err(_) if repeated.borrow().is_some() => Err(AppError::DuplicateMember {
            name: repeated.take().unwrap_or_default(),
        }),
        Err(error) => Err(AppError::MalformedJson {
            line: error.line(),
            column: error.column(),
            reason: json_reason(&error),
        }),
    }
}

/// serde_json's message without its " at line L column C" tail (said separately).
fn json_reason(error: &serde_json::Error) -> String {
    let text = error.to_string();
    text.rsplit_once(" at line ")
        .map_or(text.clone(), |(reason, _)| reason.to_owned())
}

/// A member name is quoted in the 400 up to this many characters.
const QUOTED_NAME: usize = 64;

/// Objects of up to this many members are checked for a repeated name by a scan; larger ones with a set (a
/// hostile object of a million members costs a million lookups, not a trillion comparisons).
const SCANNED_MEMBERS: usize = 16;

/// Reads one JSON value, building nothing, and fails at the first object naming a member twice (the name is
/// left in `repeated`, so the failure is told apart from malformed JSON without reading its message).
#[derive(Clone, Copy)]
struct Checked<'a> {
    repeated: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Checked<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut names: Vec<Cow<'de, str>> = Vec::new();
        let mut many: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(Name(name)) = map.next_key::<Name<'de>>()? {
            let seen = if names.len() < SCANNED_MEMBERS {
                names.contains(&name)
            } else {
                if many.is_empty() {
                    many.extend(names.iter().cloned());
                }
                many.contains(&name)
            };
            if seen {
                *self.repeated.borrow_mut() = Some(name.chars().take(QUOTED_NAME).collect());
                return Err(de::Error::custom("a member named twice"));
            }
            if names.len() < SCANNED_MEMBERS {
                names.push(name);
            } else {
                many.insert(name);
            }
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// A member's name, borrowed from the body unless it holds an escape.
struct Name<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(name)))
            }
            fn visit_str<E>(self, name: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(name.to_owned())))
            }
        }
        deserializer.deserialize_str(NameVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &str) -> Result<Bytes, AppError> {
        json_arguments(Bytes::copy_from_slice(body.as_bytes()))
    }

    #[test]
    fn malformed_json_says_where() {
        let err = check("{\n  \"order_id\": 12,\n}").unwrap_err();
        let AppError::MalformedJson { line, column, reason } = err else {
            panic!("{err:?}")
        };
        assert_eq!((line, column), (3, 1));
        assert!(reason.contains("trailing comma"), "{reason}");
        assert!(matches!(check("{} {}"), Err(AppError::MalformedJson { .. })));
        assert_eq!(check("  ").unwrap(), "{}");
        let exact = r#"{"z": 1, "amount": 123456789012345678901234.50}"#;
        assert_eq!(check(exact).unwrap(), exact, "sent as it came");
    }

    /// Regression: a duplicate member passed on a call without a key and failed with one.
    #[test]
    fn a_member_named_twice_is_refused_at_any_depth_however_it_is_spelled() {
        for body in [
            r#"{"amount": 1, "amount": 1000}"#,
            r#"{"refund": {"amount": 1, "to": "a", "amount": 2}}"#,
            r#"[{"a": 1}, {"amount": 1, "\u0061mount": 2}]"#,
        ] {
            assert!(
                matches!(check(body), Err(AppError::DuplicateMember { ref name }) if name == "amount"),
                "{body}"
            );
        }
        // The same name in two objects, or as a value, is no repetition.
        assert!(check(r#"{"a": {"a": "a"}, "b": [{"a": 1}, {"a": 2}]}"#).is_ok());
        // A large object: the set takes over from the scan, and still finds the repetition.
        let members: Vec<String> = (0..100).map(|i| format!("\"m{i}\": {i}")).collect();
        let large = format!("{{{}}}", members.join(", "));
        assert!(check(&large).is_ok());
        let repeated = format!("{{{}, \"m3\": 0}}", members.join(", "));
        assert!(matches!(check(&repeated), Err(AppError::DuplicateMember { ref name }) if name == "m3"));
    }
}
