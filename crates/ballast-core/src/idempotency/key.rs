//! [`IdempotencyKey`]: validation, random (UUIDv4) and derived (UUIDv5) keys.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

/// The longest key accepted, in characters (DESIGN.md; Stripe's limit too).
const MAX_LEN: usize = 255;

/// A key that cannot be an idempotency key. Answered with 400 by the server side.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidKey {
    /// The key is empty.
    #[error("idempotency key is empty; keys are 1-255 printable ASCII characters")]
    Empty,
    /// The key is longer than 255 bytes.
    #[error("idempotency key is {len} bytes long; keys are at most 255 printable ASCII characters")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The key holds a character outside `!`..=`~` (0x21-0x7E): a space, a control character or non-ASCII.
    #[error(
        "idempotency key has {character:?} (U+{:04X}) at byte {position}; keys are printable ASCII \
         characters from 0x21 to 0x7E, without spaces",
        u32::from(*character)
    )]
    NonPrintable {
        /// Byte offset of the first such character.
        position: usize,
        /// The character.
        character: char,
    },
}

/// An `Idempotency-Key`: 1 to 255 printable ASCII characters, space excluded.
///
/// One key names one logical operation, and every retry of it carries the same key, so the upstream (or
/// Ballast's server side) can tell a retry from a new request (Stripe's idempotent requests; IETF
/// draft-ietf-httpapi-idempotency-key-header). Generate it once, outside the retry loop: [`random`] for a
/// one-off call, [`derived`] for an agent step that may be re-run and must re-send the same key.
///
/// The accepted characters are RFC 5234's VCHAR (0x21-0x7E). DESIGN.md says "printable ASCII"; the space is
/// left out because HTTP trims it from the ends of a header value (so `"k "` would arrive as `"k"`), it needs
/// escaping in `/v1/operations/{key}`, and no key generator (UUIDs, Stripe's, ours) produces one.
///
/// Keys carry no personal data: generated keys are random or a one-way hash of their inputs. Callers should
/// not put personal data in run or step ids in the first place.
///
/// ```
/// use ballast_core::{IdempotencyKey, InvalidKey};
/// use rand::rand_core::UnwrapErr;
///
/// let key: IdempotencyKey = "order-1234".parse().unwrap();
/// assert_eq!(key.as_str(), "order-1234");
/// assert_eq!(IdempotencyKey::parse(""), Err(InvalidKey::Empty));
///
/// // One key for the operation, reused by every retry; drawn from the operating system's CSPRNG.
/// let key = IdempotencyKey::random(&mut UnwrapErr(rand::rngs::SysRng));
/// assert_eq!(key.as_str().len(), 36);
///
/// // A re-run step re-sends the same key; the next call in the step gets another.
/// let first = IdempotencyKey::derived("run-7", "step-3", "refund", 0);
/// assert_eq!(first, IdempotencyKey::derived("run-7", "step-3", "refund", 0));
/// assert_ne!(first, IdempotencyKey::derived("run-7", "step-3", "refund", 1));
/// ```
///
/// [`random`]: IdempotencyKey::random
/// [`derived`]: IdempotencyKey::derived
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The UUIDv5 namespace of [`derived`](IdempotencyKey::derived) keys. Fixed forever: changing it would
    /// give every re-run step a new key, and the upstream would run the side effect again.
    pub const NAMESPACE: Uuid = Uuid::from_u128(0x71e8_94a5_cd16_4ea3_ab0e_64b8_6132_0913);

    /// Checks `key` against the rules (1-255 characters, each in 0x21-0x7E) and wraps it.
    pub fn parse(key: &str) -> Result<Self, InvalidKey> {
        validate(key)?;
        Ok(IdempotencyKey(key.to_owned()))
    }

    /// A fresh random key: a UUIDv4 (RFC 9562) from `rng`'s bytes, hyphenated lowercase.
    ///
    /// Pass a cryptographically secure RNG: RFC 9562 (section 6.9) asks for a CSPRNG for UUIDv4, and a key
    /// that can be predicted or collides lets one operation be answered with another's stored response. The
    /// operating system's generator is one — `rand::rand_core::UnwrapErr(rand::rngs::SysRng)`, or `rand::rng()`
    /// and `rand::make_rng::<rand::rngs::StdRng>()` where rand's `thread_rng` / `std_rng` features are enabled. Not [`DefaultRng`](crate::DefaultRng) (`default_rng`): it is a small, fast,
    /// predictable generator meant for jitter, not for identifiers. A fixed seed is for tests only: two
    /// processes seeded alike draw the same keys.
    pub fn random<R: rand::Rng + ?Sized>(rng: &mut R) -> Self {
        let mut bytes = [0u8; 16];
        rng.fill_bytes(&mut bytes);
        IdempotencyKey::from_uuid(uuid::Builder::from_random_bytes(bytes).into_uuid())
    }

    /// The key of the `ordinal`-th side-effecting call (from 0) to `tool` in step `step_id` of run `run_id`:
    /// a UUIDv5 (SHA-1 name-based, RFC 9562) in [`NAMESPACE`](IdempotencyKey::NAMESPACE), hyphenated
    /// lowercase.
    ///
    /// The same four inputs always give the same key, so a re-run step re-sends it and the upstream
    /// deduplicates; a different ordinal gives a different key, so two calls in one step do not collide. The
    /// step id is the agent framework's step, not the model's tool-call id (which changes when the model is
    /// asked again).
    ///
    /// The UUID's name is each text field as its UTF-8 length (8 bytes, big-endian) followed by its bytes, in
    /// the order run, step, tool, then the ordinal as 4 big-endian bytes. The lengths keep fields apart:
    /// `("a:b", "c")` and `("a", "b:c")` name different keys. This encoding is fixed forever, like the
    /// namespace.
    pub fn derived(run_id: &str, step_id: &str, tool: &str, ordinal: u32) -> Self {
        let mut name = Vec::with_capacity(3 * 8 + run_id.len() + step_id.len() + tool.len() + 4);
        for field in [run_id, step_id, tool] {
            // usize -> u64 is lossless on every platform Rust supports (pointers are at most 64 bits).
            name.extend_from_slice(&(field.len() as u64).to_be_bytes());
            name.extend_from_slice(field.as_bytes());
        }
        name.extend_from_slice(&ordinal.to_be_bytes());
        IdempotencyKey::from_uuid(Uuid::new_v5(&IdempotencyKey::NAMESPACE, &name))
    }

    /// The UUIDv5 namespace of [`for_principal`](IdempotencyKey::for_principal) keys. Fixed forever, like
    /// [`NAMESPACE`](IdempotencyKey::NAMESPACE): changing it would send every operation's retry to its upstream
    /// under a new key.
    pub const PRINCIPAL_NAMESPACE: Uuid = Uuid::from_u128(0xd5f4_8ff3_cd84_46d0_b576_fe32_837e_575d);

    /// The key an upstream is sent for the operation this key names on behalf of `principal`: a UUIDv5 in
    /// [`PRINCIPAL_NAMESPACE`](IdempotencyKey::PRINCIPAL_NAMESPACE) of the principal's name and the key,
    /// hyphenated lowercase (36 characters).
    ///
    /// Why: a gateway serves several principals through one upstream account, and an upstream deduplicates by
    /// key alone. Sent verbatim, two principals' keys share one key space there — principal B reusing A's key
    /// (`"dev"`, `"order-1234"`) gets A's refund back as its own while nothing ran for it, or A's stored error.
    /// Scoped, the upstream sees one key per (principal, key): the same after a restart and after the
    /// principal's API key is rotated (its name is the input, never its secret), different for two principals,
    /// and never the caller's raw key (which may carry what the caller put in it).
    ///
    /// The UUID's name is the principal's UTF-8 length (8 bytes, big-endian) followed by its bytes, then the
    /// key's bytes: `("a", "bc")` and `("ab", "c")` name different keys. Fixed forever, like the namespace.
    ///
    /// ```
    /// use ballast_core::IdempotencyKey;
    ///
    /// let key: IdempotencyKey = "order-1234".parse().unwrap();
    /// assert_eq!(key.for_principal("agents"), key.for_principal("agents"));
    /// assert_ne!(key.for_principal("agents"), key.for_principal("other"));
    /// assert_eq!(key.for_principal("agents").as_str().len(), 36);
    /// ```
    pub fn for_principal(&self, principal: &str) -> IdempotencyKey {
        let mut name = Vec::with_capacity(8 + principal.len() + self.0.len());
        // usize -> u64 is lossless on every platform Rust supports (pointers are at most 64 bits).
        name.extend_from_slice(&(principal.len() as u64).to_be_bytes());
        name.extend_from_slice(principal.as_bytes());
        name.extend_from_slice(self.0.as_bytes());
        IdempotencyKey::from_uuid(Uuid::new_v5(&IdempotencyKey::PRINCIPAL_NAMESPACE, &name))
    }

    /// The key as sent in the `Idempotency-Key` header.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }

    fn from_uuid(uuid: Uuid) -> Self {
        // 36 characters of [0-9a-f-]: always a valid key.
        IdempotencyKey(uuid.hyphenated().to_string())
    }
}

fn validate(key: &str) -> Result<(), InvalidKey> {
    if key.is_empty() {
        return Err(InvalidKey::Empty);
    }
    if key.len() > MAX_LEN {
        return Err(InvalidKey::TooLong { len: key.len() });
    }
    match key.char_indices().find(|&(_, c)| !matches!(c, '!'..='~')) {
        Some((position, character)) => Err(InvalidKey::NonPrintable { position, character }),
        None => Ok(()),
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for IdempotencyKey {
    type Err = InvalidKey;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IdempotencyKey::parse(s)
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = InvalidKey;
    /// Like [`parse`](IdempotencyKey::parse), reusing the string's allocation.
    fn try_from(key: String) -> Result<Self, Self::Error> {
        validate(&key)?;
        Ok(IdempotencyKey(key))
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::default_rng;
    use proptest::prelude::*;

    #[test]
    fn length_edges() {
        assert_eq!(IdempotencyKey::parse(""), Err(InvalidKey::Empty));
        assert_eq!(IdempotencyKey::parse("a").unwrap().as_str(), "a");
        let max = "k".repeat(255);
        assert_eq!(IdempotencyKey::parse(&max).unwrap().as_str(), max);
        assert_eq!(
            IdempotencyKey::parse(&"k".repeat(256)),
            Err(InvalidKey::TooLong { len: 256 })
        );
    }

    #[test]
    fn every_visible_ascii_character_is_accepted() {
        let all: String = ('!'..='~').collect();
        assert_eq!(all.len(), 94);
        assert_eq!(IdempotencyKey::parse(&all).unwrap().as_str(), all);
    }

    #[test]
    fn spaces_controls_and_non_ascii_are_refused_at_their_position() {
        let cases = [
            ("a b", 1, ' '),
            (" ab", 0, ' '),
            ("ab\t", 2, '\t'),
            ("a\nb", 1, '\n'),
            ("\0", 0, '\0'),
            ("ab\u{7f}", 2, '\u{7f}'),
            ("ké", 1, 'é'),
            ("k€y", 1, '€'),
        ];
        for (key, position, character) in cases {
            assert_eq!(
                IdempotencyKey::parse(key),
                Err(InvalidKey::NonPrintable { position, character }),
                "{key:?}"
            );
        }
    }

    #[test]
    fn non_ascii_counts_bytes_for_the_limit() {
        // 128 two-byte characters = 256 bytes: refused for length before the characters are looked at.
        assert_eq!(
            IdempotencyKey::parse(&"é".repeat(128)),
            Err(InvalidKey::TooLong { len: 256 })
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let error = IdempotencyKey::parse("a\tb").unwrap_err().to_string();
        assert!(error.contains("U+0009") && error.contains("byte 1"), "{error}");
        let error = IdempotencyKey::parse(&"x".repeat(300)).unwrap_err().to_string();
        assert!(error.contains("300 bytes"), "{error}");
    }

    #[test]
    fn from_str_display_and_try_from_agree_with_parse() {
        let key: IdempotencyKey = "abc-123".parse().unwrap();
        assert_eq!(key.to_string(), "abc-123");
        assert_eq!(IdempotencyKey::try_from("abc-123".to_owned()), Ok(key.clone()));
        assert_eq!(IdempotencyKey::try_from(String::new()), Err(InvalidKey::Empty));
        assert_eq!(key.as_ref(), "abc-123");
        assert_eq!(key.into_string(), "abc-123");
    }

    #[test]
    fn random_keys_are_lowercase_hyphenated_uuid_v4() {
        let mut rng = default_rng(Some(1));
        for _ in 0..100 {
            let key = IdempotencyKey::random(&mut rng);
            let text = key.as_str();
            assert_eq!(text.len(), 36);
            assert!(
                text.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f' | '-')),
                "{text}"
            );
            assert_eq!([8, 13, 18, 23].map(|i| &text[i..=i]), ["-"; 4]);
            assert_eq!(&text[14..15], "4", "version nibble: {text}");
            assert!(
                matches!(&text[19..20], "8" | "9" | "a" | "b"),
                "RFC 4122 variant: {text}"
            );
            let uuid = Uuid::parse_str(text).unwrap();
            assert_eq!(uuid.get_version(), Some(uuid::Version::Random));
            assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
            assert_eq!(IdempotencyKey::parse(text), Ok(key));
        }
    }

    #[test]
    fn random_keys_follow_the_seed() {
        let draw = |seed| {
            let mut rng = default_rng(Some(seed));
            [IdempotencyKey::random(&mut rng), IdempotencyKey::random(&mut rng)]
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
        let [first, second] = draw(42);
        assert_ne!(first, second);
    }

    #[test]
    fn random_works_with_an_unsized_rng() {
        let mut rng = default_rng(Some(5));
        let dyn_rng: &mut dyn rand::Rng = &mut rng;
        let key = IdempotencyKey::random(dyn_rng);
        assert_eq!(key, IdempotencyKey::random(&mut default_rng(Some(5))));
    }

    #[test]
    fn namespace_never_changes() {
        assert_eq!(
            IdempotencyKey::NAMESPACE.to_string(),
            "71e894a5-cd16-4ea3-ab0e-64b861320913"
        );
    }

    #[test]
    fn derived_key_is_pinned() {
        // Computed once from the namespace and name encoding above. If this fails, every re-run step would
        // send a new key and upstreams would repeat side effects: do not "fix" the expected value.
        let key = IdempotencyKey::derived("run-1", "step-1", "refund", 0);
        assert_eq!(key.as_str(), "83cd7787-fac2-5de9-97d4-bd316f6c481c");
        let uuid = Uuid::parse_str(key.as_str()).unwrap();
        assert_eq!(uuid.get_version(), Some(uuid::Version::Sha1));
        assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122);
    }

    #[test]
    fn derived_name_encoding_keeps_fields_apart() {
        let key = |run, step, tool| IdempotencyKey::derived(run, step, tool, 0);
        assert_ne!(key("a:b", "c", "t"), key("a", "b:c", "t"));
        assert_ne!(key("ab", "", "t"), key("a", "b", "t"));
        assert_ne!(key("", "ab", "t"), key("a", "b", "t"));
        assert_ne!(key("r", "s", "t"), key("r", "st", ""));
        assert_ne!(key("", "", ""), key("", "", "\0"));
    }

    #[test]
    fn derived_keys_depend_on_every_input() {
        let base = IdempotencyKey::derived("run", "step", "tool", 0);
        assert_eq!(base, IdempotencyKey::derived("run", "step", "tool", 0));
        assert_ne!(base, IdempotencyKey::derived("run", "step", "tool", 1));
        assert_ne!(base, IdempotencyKey::derived("run2", "step", "tool", 0));
        assert_ne!(base, IdempotencyKey::derived("run", "step2", "tool", 0));
        assert_ne!(base, IdempotencyKey::derived("run", "step", "tool2", 0));
        assert_ne!(
            IdempotencyKey::derived("run", "step", "tool", 1),
            IdempotencyKey::derived("run", "step", "tool", 1 << 8)
        );
    }

    #[test]
    fn a_principals_key_is_pinned_and_its_encoding_keeps_principal_and_key_apart() {
        // Pinned like the derived key: if this changes, every retry after an upgrade reaches its upstream under a
        // new key and runs again. Do not "fix" the expected value.
        assert_eq!(
            IdempotencyKey::PRINCIPAL_NAMESPACE.to_string(),
            "d5f48ff3-cd84-46d0-b576-fe32837e575d"
        );
        let key = IdempotencyKey::parse("dev").unwrap().for_principal("agents");
        assert_eq!(key.as_str(), "b09b4960-e6c4-56a2-81e2-c05fa06d02bc");
        let uuid = Uuid::parse_str(key.as_str()).unwrap();
        assert_eq!(uuid.get_version(), Some(uuid::Version::Sha1));
        let scoped =
            |principal: &str, key: &str| IdempotencyKey::parse(key).unwrap().for_principal(principal);
        assert_ne!(scoped("a", "bc"), scoped("ab", "c"));
        assert_ne!(scoped("agents", "dev"), scoped("other", "dev"));
        assert_ne!(scoped("agents", "dev"), scoped("agents", "dev2"));
    }

    proptest! {
        #[test]
        fn a_principals_keys_are_valid_and_distinct_per_principal_and_key(
            a in ("[A-Za-z0-9_-]{1,8}", "[!-~]{1,40}"),
            b in ("[A-Za-z0-9_-]{1,8}", "[!-~]{1,40}"),
        ) {
            let key_a = IdempotencyKey::parse(&a.1).unwrap().for_principal(&a.0);
            let key_b = IdempotencyKey::parse(&b.1).unwrap().for_principal(&b.0);
            prop_assert_eq!(IdempotencyKey::parse(key_a.as_str()), Ok(key_a.clone()));
            prop_assert_eq!(key_a == key_b, a == b);
        }

        #[test]
        fn derived_keys_are_valid_and_distinct_per_input(
            a in (".{0,8}", ".{0,8}", ".{0,8}", any::<u32>()),
            b in (".{0,8}", ".{0,8}", ".{0,8}", any::<u32>()),
        ) {
            let key_a = IdempotencyKey::derived(&a.0, &a.1, &a.2, a.3);
            let key_b = IdempotencyKey::derived(&b.0, &b.1, &b.2, b.3);
            prop_assert_eq!(IdempotencyKey::parse(key_a.as_str()), Ok(key_a.clone()));
            prop_assert_eq!(key_a == key_b, a == b);
        }

        #[test]
        fn parse_accepts_exactly_the_rule(
            key in prop_oneof!["[!-~]{0,300}", "[ -~]{0,260}", "[\\x00-\\x7f]{0,8}", ".{0,260}"]
        ) {
            let valid = (1..=255).contains(&key.len()) && key.bytes().all(|b| (0x21..=0x7e).contains(&b));
            prop_assert_eq!(IdempotencyKey::parse(&key).is_ok(), valid);
        }
    }
}
