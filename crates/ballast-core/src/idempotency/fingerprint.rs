//! [`Fingerprint`]: what the server side compares to tell a retry from a key reused for another request.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::jcs::{AmbiguousJson, with_canonical_json};

/// Domain separation: a fingerprint is never a hash of something else, and a new scheme gets a new tag. v2
/// hashes the media type and keeps every number exact (v1 did neither).
const DOMAIN: &[u8] = b"ballast.idempotency.fingerprint.v2";
/// Body framing tags: the body was hashed as given, or as its JCS canonical form.
const RAW_BODY: u8 = 0;
const JSON_BODY: u8 = 1;

/// A request's fingerprint: SHA-256 over its method, route, media type and body (JSON bodies in RFC 8785
/// canonical form, numbers exact).
///
/// The server side stores it with the key; a later request with the same key and a different fingerprint is
/// not a retry but a reuse of the key for something else, and gets 422 without running (Stripe compares the
/// parameters the same way; IETF draft-ietf-httpapi-idempotency-key-header §2.4 calls it the fingerprint).
///
/// Not a secret and compared in ordinary time: it is derived from a request its own principal sent.
///
/// ```
/// use ballast_core::{fingerprint, Fingerprint};
///
/// let json = Some("application/json");
/// let a = fingerprint("POST", "/v1/tools/refund", json, br#"{"amount": 10.0, "order": "A-1"}"#).unwrap();
/// let b = fingerprint("POST", "/v1/tools/refund", json, br#"{"order":"A-1","amount":10}"#).unwrap();
/// assert_eq!(a, b); // same request, spelled differently
///
/// let c = fingerprint("POST", "/v1/tools/refund", json, br#"{"order":"A-1","amount":11}"#).unwrap();
/// assert_ne!(a, c); // a different request under the same key: 422
///
/// // A body that names a member twice is no one request: the server answers 400.
/// assert!(fingerprint("POST", "/v1/tools/refund", json, br#"{"amount":1,"amount":9}"#).is_err());
///
/// let stored = a.to_hex();
/// assert_eq!(Fingerprint::from_hex(&stored), Ok(a));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint([u8; 32]);

/// A stored fingerprint that cannot be read back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidFingerprint {
    /// Not 64 characters long.
    #[error("fingerprint is {len} bytes long; expected 64 hex digits")]
    WrongLength {
        /// Its length in bytes.
        len: usize,
    },
    /// A character that is not a hex digit.
    #[error("fingerprint has a non-hex character at byte {position}; expected 64 hex digits")]
    NotHex {
        /// Byte offset of the first such character.
        position: usize,
    },
}

/// The fingerprint of a request.
///
/// - `method` as received; HTTP methods are case-sensitive (RFC 9110 §9.1), so it is not normalised.
/// - `route`: what the caller wants compared besides the body — the path, with the query when the query
///   carries parameters. Hashed as given.
/// - `content_type`: the request's `Content-Type`, hashed normalised ([`media_type`]): the same bytes as
///   `text/plain` and as `application/x-www-form-urlencoded` are two requests. When it names JSON
///   ([`is_json_content_type`]) and the body parses as one JSON text, the body's canonical form is hashed
///   ([`canonical_json`](crate::canonical_json)), so member order, whitespace and number spelling do not matter
///   while every value, however large or precise, does; the `charset` is then left out (the canonical form is
///   the decoded text). Otherwise — another type, no type, or JSON that does not parse — the raw bytes are
///   hashed: a malformed body is still a request that can be retried byte for byte, and the upstream will
///   answer it as it sees fit.
///
/// A JSON body that names a member twice in one object is an error: no reader agrees which value counts, so it
/// is no one request (the idempotency layer answers 400).
///
/// The hash input frames each part by its length (8 bytes, big-endian), after a domain tag, and marks whether
/// the body was canonicalised, so no two different (method, route, media type, body) tuples share an input:
/// `("POST", "/a", "b")` and `("POST", "/ab", "")` differ.
pub fn fingerprint(
    method: &str,
    route: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Fingerprint, AmbiguousJson> {
    let media = content_type.map(media_type).unwrap_or_default();
    if content_type.is_some_and(is_json_content_type) {
        let essence = media.split(';').next().unwrap_or_default();
        let canonical = with_canonical_json(body, |canonical| {
            digest(method, route, essence, JSON_BODY, canonical)
        })?;
        if let Some(fingerprint) = canonical {
            return Ok(fingerprint);
        }
    }
    Ok(digest(method, route, &media, RAW_BODY, body))
}

fn digest(method: &str, route: &str, media: &str, tag: u8, body: &[u8]) -> Fingerprint {
    let mut hasher = Sha256::new();
    update_framed(&mut hasher, DOMAIN);
    update_framed(&mut hasher, method.as_bytes());
    update_framed(&mut hasher, route.as_bytes());
    update_framed(&mut hasher, media.as_bytes());
    hasher.update([tag]);
    update_framed(&mut hasher, body);
    Fingerprint(hasher.finalize().into())
}

/// A `Content-Type` value as the fingerprint hashes it: `type/subtype` in lower case, then `;charset=` and the
/// charset in lower case (unquoted) if the value names one; every other parameter and all whitespace dropped.
/// A value without a `/` is kept as its trimmed, lower-cased text before any `;`.
///
/// ```
/// use ballast_core::media_type;
///
/// let sent = r#"Application/JSON; charset="UTF-8"; boundary=x"#;
/// assert_eq!(media_type(sent), "application/json;charset=utf-8");
/// assert_eq!(media_type("text/plain"), "text/plain");
/// ```
pub fn media_type(content_type: &str) -> String {
    let mut parts = content_type.split(';');
    let mut media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let charset = parts.find_map(|parameter| {
        let (name, value) = parameter.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| value.trim().trim_matches('"').to_ascii_lowercase())
    });
    if let Some(charset) = charset {
        media.push_str(";charset=");
        media.push_str(&charset);
    }
    media
}

fn update_framed(hasher: &mut Sha256, part: &[u8]) {
    // usize -> u64 is lossless on every platform Rust supports (pointers are at most 64 bits).
    hasher.update((part.len() as u64).to_be_bytes());
    hasher.update(part);
}

/// Whether a `Content-Type` value names JSON: `application/json` or any `type/subtype+json` (RFC 6839
/// structured suffix, e.g. `application/problem+json`), case-insensitive, parameters ignored.
pub fn is_json_content_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    let is_token = |s: &str| !s.is_empty() && !s.contains(|c: char| c.is_ascii_whitespace() || c == '/');
    if !is_token(kind) || !is_token(subtype) {
        return false;
    }
    let json_suffix =
        subtype.len() > 5 && subtype.as_bytes()[subtype.len() - 5..].eq_ignore_ascii_case(b"+json");
    (kind.eq_ignore_ascii_case("application") && subtype.eq_ignore_ascii_case("json")) || json_suffix
}

impl Fingerprint {
    /// A fingerprint from its 32 bytes (as stored in a binary column).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Fingerprint(bytes)
    }

    /// The 32 bytes of the SHA-256 digest.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The fingerprint as 64 lowercase hex digits (for storage; the same as [`Display`](fmt::Display)).
    pub fn to_hex(&self) -> String {
        self.to_string()
    }

    /// Reads 64 hex digits (either case) back.
    pub fn from_hex(hex: &str) -> Result<Self, InvalidFingerprint> {
        let bytes = hex.as_bytes();
        if bytes.len() != 64 {
            return Err(InvalidFingerprint::WrongLength { len: bytes.len() });
        }
        let digit = |position: usize| {
            char::from(bytes[position])
                .to_digit(16)
                .map(|d| d as u8) // a hex digit is below 16
                .ok_or(InvalidFingerprint::NotHex { position })
        };
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = (digit(2 * i)? << 4) | digit(2 * i + 1)?;
        }
        Ok(Fingerprint(out))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl FromStr for Fingerprint {
    type Err = InvalidFingerprint;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fingerprint::from_hex(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotency::arb;
    use proptest::prelude::*;

    const JSON: Option<&str> = Some("application/json");

    fn fp(method: &str, route: &str, content_type: Option<&str>, body: &[u8]) -> Fingerprint {
        fingerprint(method, route, content_type, body).expect("no member named twice")
    }

    fn json(body: &str) -> Fingerprint {
        fp("POST", "/v1/tools/t", JSON, body.as_bytes())
    }

    #[test]
    fn reordered_keys_and_whitespace_give_the_same_fp() {
        let a = json(r#"{"b":1,"a":{"y":[1,2],"x":"s"}}"#);
        assert_eq!(a, json(r#"{"a":{"x":"s","y":[1,2]},"b":1}"#));
        assert_eq!(
            a,
            json("{\n  \"a\": { \"x\": \"s\", \"y\": [ 1, 2 ] },\n  \"b\": 1\n}\n")
        );
    }

    #[test]
    fn number_spelling_does_not_matter() {
        assert_eq!(json(r#"{"n":1.0}"#), json(r#"{"n":1}"#));
        assert_eq!(json(r#"{"n":1e2}"#), json(r#"{"n":100}"#));
        assert_eq!(json(r#"{"n":-0}"#), json(r#"{"n":0}"#));
        assert_eq!(json(r#"{"s":"\u00e9"}"#), json(r#"{"s":"é"}"#));
    }

    #[test]
    fn different_values_differ() {
        let a = json(r#"{"amount":10,"to":"A"}"#);
        for other in [
            r#"{"amount":11,"to":"A"}"#,
            r#"{"amount":"10","to":"A"}"#,
            r#"{"amount":10,"to":"a"}"#,
            r#"{"amount":10,"to":"A","extra":null}"#,
            r#"{"amount":10}"#,
            r#"[{"amount":10,"to":"A"}]"#,
        ] {
            assert_ne!(a, json(other), "{other}");
        }
        assert_ne!(json("[1,2]"), json("[2,1]"));
    }

    #[test]
    fn method_and_route_matter() {
        let body = b"{}";
        let base = fp("POST", "/a", JSON, body);
        assert_ne!(base, fp("PUT", "/a", JSON, body));
        assert_ne!(base, fp("post", "/a", JSON, body)); // methods are case-sensitive
        assert_ne!(base, fp("POST", "/b", JSON, body));
        assert_ne!(base, fp("POST", "/a?x=1", JSON, body));
        assert_eq!(base, fp("POST", "/a", JSON, body));
    }

    #[test]
    fn framing_keeps_the_parts_apart() {
        assert_ne!(fp("POST", "/a", None, b"b"), fp("POST", "/ab", None, b""));
        assert_ne!(fp("POS", "T/a", None, b""), fp("POST", "/a", None, b""));
        assert_ne!(fp("", "", None, b""), fp("", "", None, b"\0"));
    }

    #[test]
    fn other_bodies_are_hashed_as_raw_bytes() {
        let form = Some("application/x-www-form-urlencoded");
        assert_ne!(
            fp("POST", "/a", form, b"a=1&b=2"),
            fp("POST", "/a", form, b"b=2&a=1")
        );
        // JSON text without a JSON content type is not canonicalised.
        let text = Some("text/plain");
        assert_ne!(
            fp("POST", "/a", text, b"{\"a\":1}"),
            fp("POST", "/a", text, b"{ \"a\":1}")
        );
        assert_ne!(
            fp("POST", "/a", None, b"{\"a\":1}"),
            fp("POST", "/a", None, b"{ \"a\":1}")
        );
        assert_eq!(
            fp("POST", "/a", text, b"\xff\x00"),
            digest("POST", "/a", "text/plain", RAW_BODY, b"\xff\x00")
        );
    }

    /// Regression (issue 11): the media type was not hashed, so the same bytes sent as `text/plain` and as
    /// `application/x-www-form-urlencoded` replayed each other's answer instead of 422.
    #[test]
    fn the_media_type_is_part_of_the_request() {
        let body = b"a=1";
        let form = fp("POST", "/a", Some("application/x-www-form-urlencoded"), body);
        assert_ne!(form, fp("POST", "/a", Some("text/plain"), body));
        assert_ne!(form, fp("POST", "/a", None, body));
        assert_ne!(
            json("{}"),
            fp("POST", "/v1/tools/t", Some("application/merge-patch+json"), b"{}")
        );
        // Normalised: case, whitespace and parameters other than the charset do not matter...
        let plain = fp("POST", "/a", Some("text/plain"), body);
        for same in [
            "TEXT/Plain",
            " text/plain ; format=flowed",
            "text/plain;delsp=yes",
        ] {
            assert_eq!(fp("POST", "/a", Some(same), body), plain, "{same}");
        }
        // ...the charset does for bytes hashed as they are: it changes what they say...
        let utf8 = fp("POST", "/a", Some("text/plain; charset=utf-8"), body);
        assert_ne!(utf8, plain);
        assert_ne!(
            utf8,
            fp("POST", "/a", Some("text/plain; charset=iso-8859-1"), body)
        );
        assert_eq!(utf8, fp("POST", "/a", Some("text/plain;Charset=\"UTF-8\""), body));
        // ...and not for JSON, whose canonical form is the decoded text.
        assert_eq!(
            json("{}"),
            fp(
                "POST",
                "/v1/tools/t",
                Some("Application/JSON; charset=UTF-8"),
                b"{}"
            )
        );
    }

    #[test]
    fn media_types_normalise() {
        assert_eq!(media_type("Application/JSON"), "application/json");
        assert_eq!(
            media_type(" text/plain ; charset = UTF-8 ; x=1"),
            "text/plain;charset=utf-8"
        );
        assert_eq!(media_type("text/plain; format=flowed"), "text/plain");
        assert_eq!(media_type("garbage"), "garbage");
        assert_eq!(media_type(""), "");
    }

    /// Regression (issue 11): integers beyond 64 bits and decimals beyond a double's precision collided.
    #[test]
    fn numbers_keep_their_exact_value() {
        assert_ne!(json("36893488147419103232"), json("36893488147419103233"));
        assert_ne!(json(r#"{"n":0.1}"#), json(r#"{"n":0.10000000000000000001}"#));
        assert_eq!(
            json(r#"{"n":36893488147419103232}"#),
            json(r#"{"n":3.6893488147419103232e19}"#)
        );
    }

    #[test]
    fn a_member_named_twice_is_an_error() {
        let error = fingerprint("POST", "/a", JSON, br#"{"to":"A","to":"B"}"#).unwrap_err();
        assert_eq!(
            error,
            AmbiguousJson::DuplicateMember {
                name: "to".to_owned()
            }
        );
        // Not JSON by its content type: bytes, however they look.
        assert!(fingerprint("POST", "/a", Some("text/plain"), br#"{"to":"A","to":"B"}"#).is_ok());
    }

    #[test]
    fn invalid_json_falls_back_to_raw_bytes() {
        let broken = b"{\"a\":1,}";
        assert_eq!(
            fp("POST", "/a", JSON, broken),
            digest("POST", "/a", "application/json", RAW_BODY, broken)
        );
        assert_ne!(
            fp("POST", "/a", JSON, broken),
            fp("POST", "/a", JSON, b"{\"a\":1, }")
        );
        assert_eq!(
            fp("POST", "/a", JSON, b""),
            digest("POST", "/a", "application/json", RAW_BODY, b"")
        );
    }

    #[test]
    fn canonical_json_is_not_confused_with_the_same_raw_bytes() {
        // The body's framing tag tells "canonical JSON" from "raw bytes that look like it".
        let body = br#"{"a":1}"#;
        assert_ne!(
            fp("POST", "/a", JSON, body),
            digest("POST", "/a", "application/json", RAW_BODY, body)
        );
    }

    #[test]
    fn empty_request_is_pinned() {
        // Pins the framing and domain tag: stored fingerprints must stay comparable across releases. Computed
        // independently of this code (Python's hashlib over the framed parts).
        let empty = fp("", "", None, b"");
        assert_eq!(
            empty.to_hex(),
            "b43df9611b54ba775b043e8d79922e5747047602b8c534dd8154ebf8ecf0d144"
        );
    }

    #[test]
    fn json_request_is_pinned() {
        // Hashes {"a":1,"b":["é",null]} with the JSON tag and media type `application/json`; computed
        // independently of this code (Python's hashlib over the framed parts).
        let fp = fp(
            "POST",
            "/v1/tools/refund",
            JSON,
            br#"{ "b": ["\u00e9", null], "a": 1.0 }"#,
        );
        assert_eq!(
            fp.to_hex(),
            "8430780a16236ce37ca6514b7b84a4d7be346ffb39fa692e6dc1dc070bae46b9"
        );
    }

    #[test]
    fn json_content_types() {
        for ct in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            " application/json ;charset=UTF-8",
            "application/problem+json",
            "application/merge-patch+json",
            "application/vnd.api+JSON",
        ] {
            assert!(is_json_content_type(ct), "{ct}");
        }
        for ct in [
            "",
            "json",
            "text/plain",
            "application/jsonl",
            "application/x-ndjson",
            "application/json-seq",
            "application/+json",
            "/json",
            "application/",
            "multipart/form-data; boundary=+json",
            "application/json/extra",
            "application/é",
        ] {
            assert!(!is_json_content_type(ct), "{ct}");
        }
    }

    #[test]
    fn hex_round_trip_and_errors() {
        let fp = json("{}");
        let hex = fp.to_hex();
        assert_eq!(hex.len(), 64);
        assert!(hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')), "{hex}");
        assert_eq!(fp.to_string(), hex);
        assert_eq!(format!("{fp:?}"), format!("Fingerprint({hex})"));
        assert_eq!(Fingerprint::from_hex(&hex), Ok(fp));
        assert_eq!(Fingerprint::from_hex(&hex.to_uppercase()), Ok(fp));
        assert_eq!(hex.parse::<Fingerprint>(), Ok(fp));
        assert_eq!(Fingerprint::from_bytes(*fp.as_bytes()), fp);
        assert_eq!(
            Fingerprint::from_hex(&hex[1..]),
            Err(InvalidFingerprint::WrongLength { len: 63 })
        );
        assert_eq!(
            Fingerprint::from_hex(""),
            Err(InvalidFingerprint::WrongLength { len: 0 })
        );
        let bad = format!("{}g{}", &hex[..10], &hex[11..]);
        assert_eq!(
            Fingerprint::from_hex(&bad),
            Err(InvalidFingerprint::NotHex { position: 10 })
        );
        let multibyte = format!("é{}", &hex[2..]);
        assert_eq!(
            Fingerprint::from_hex(&multibyte),
            Err(InvalidFingerprint::NotHex { position: 0 })
        );
    }

    proptest! {
        #[test]
        fn reordering_and_respelling_json_keeps_the_fp(value in arb::json(), seed in any::<u64>()) {
            let a = arb::render(&value, arb::Spelling::Plain, seed);
            let b = arb::render(&value, arb::Spelling::Varied, seed.rotate_left(17));
            prop_assert_eq!(json(&a), json(&b));
        }

        #[test]
        fn different_json_values_give_different_fingerprints(a in arb::json(), b in arb::json()) {
            let (text_a, text_b) = (arb::render(&a, arb::Spelling::Plain, 0), arb::render(&b, arb::Spelling::Plain, 0));
            let same = serde_json::from_str::<serde_json::Value>(&text_a).unwrap()
                == serde_json::from_str::<serde_json::Value>(&text_b).unwrap();
            prop_assert_eq!(json(&text_a) == json(&text_b), same);
        }

        #[test]
        fn hex_round_trips(bytes in any::<[u8; 32]>()) {
            let fp = Fingerprint::from_bytes(bytes);
            prop_assert_eq!(Fingerprint::from_hex(&fp.to_hex()), Ok(fp));
        }
    }
}
