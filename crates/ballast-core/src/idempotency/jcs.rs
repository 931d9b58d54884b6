//! RFC 8785 JSON Canonicalization Scheme (JCS), with exact numbers: one byte string per JSON value, whatever
//! its key order, whitespace or number spelling — and two values that differ never share one.
//!
//! The rules, as RFC 8785 states them:
//! - no whitespace between tokens;
//! - object members sorted by their names compared as arrays of UTF-16 code units (RFC 8785 §3.2.3), which is
//!   not the same as UTF-8 byte order: `"\u{1F600}"` (surrogates `D83D DE00`) sorts before `"\u{FB33}"`;
//! - strings as ECMAScript's `JSON.stringify` writes them: `"` and `\` escaped, `\b \t \n \f \r` in short
//!   form, other controls below U+0020 as `\u00xx` (lowercase hex), everything else (DEL, U+2028, non-ASCII)
//!   literal UTF-8; `\/` in the input becomes `/`;
//! - numbers in ECMAScript's `Number.prototype.toString` layout (RFC 8785 §3.2.2.3): `1.0` -> `1`, `-0` -> `0`,
//!   `1e21` -> `1e+21`, `0.000001` -> `0.000001`, `1e-7` -> `1e-7`.
//!
//! One deliberate departure (DESIGN.md, "Fingerprint"): every number keeps its exact value. JCS reads numbers
//! as IEEE 754 doubles, so `9007199254740993` and `9007199254740992`, or `36893488147419103232` and
//! `36893488147419103233`, or `0.1` and `0.10000000000000000001`, would canonicalise alike — and a request
//! naming one would be answered with the other's stored response. Here a number's digits are its value: the
//! literal's significant digits (leading and trailing zeros dropped) and its decimal exponent, written in the
//! ECMAScript layout. For the numbers JCS can represent — a double's shortest round-trip spelling, which is what
//! JSON serialisers write — the output is exactly JCS's; beyond them it keeps what JCS would lose.
//!
//! Also stricter than JCS's "last one wins": an object that names a member twice is [`AmbiguousJson`] (a 400
//! at the idempotency layer), since readers disagree on which value counts and the fingerprint could not say
//! which request it is of.
//!
//! Parsing is [`jiter`]'s (pydantic's JSON iterator): it hands over a number's text, which serde_json does only
//! under its `arbitrary_precision` feature — a build-wide switch that would change every other number in the
//! program. Nesting is limited to 128 levels; anything jiter rejects (trailing text, comments, lone
//! surrogates, control characters in strings, `NaN`), deeper nesting, and an exponent past 18 digits are "not
//! JSON" to the caller, whose raw bytes are then hashed as they are.
//!
//! Why not a JCS crate: `serde_json_canonicalizer` 0.4 and `serde_jcs` 0.2 both produce correct JCS, but buffer
//! every member of every object separately and read numbers as doubles.

use std::cmp::Ordering;
use std::ops::Range;

use jiter::{Jiter, Peek};

/// Deepest nesting of arrays and objects read (serde_json's default limit).
const MAX_DEPTH: u32 = 128;
/// Longest member name quoted in an [`AmbiguousJson`] message.
const QUOTED_NAME: usize = 64;

/// A JSON text that parses but names no one value, so it has no canonical form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AmbiguousJson {
    /// An object names a member twice.
    #[error(
        "the JSON body names the member {name:?} twice in one object; readers disagree on which value counts, \
         so send each name once"
    )]
    DuplicateMember {
        /// The name (its first 64 characters).
        name: String,
    },
}

/// The canonical form of a JSON text (see the module docs): `Ok(None)` when `body` is not one JSON text, an
/// error when it is one but names a member twice.
///
/// Two bodies that differ only in member order, whitespace, escapes or number spelling (`1.0`, `1`, `1e0`,
/// `10e-1`) give the same bytes; two that differ in any value, however large or precise, never do.
///
/// ```
/// use ballast_core::canonical_json;
///
/// let canonical = canonical_json(br#"{ "b": [1.0, 2e1], "a": "\u00e9" }"#).unwrap().unwrap();
/// assert_eq!(canonical, r#"{"a":"é","b":[1,20]}"#.as_bytes());
/// assert_eq!(canonical_json(b"{not json"), Ok(None));
/// assert!(canonical_json(br#"{"a": 1, "a": 2}"#).is_err());
/// ```
pub fn canonical_json(body: &[u8]) -> Result<Option<Vec<u8>>, AmbiguousJson> {
    with_canonical_json(body, <[u8]>::to_vec)
}

/// Hands the canonical form of `body` to `use_canonical` (see [`canonical_json`]).
pub(super) fn with_canonical_json<T>(
    body: &[u8],
    use_canonical: impl FnOnce(&[u8]) -> T,
) -> Result<Option<T>, AmbiguousJson> {
    let mut reader = Reader {
        jiter: Jiter::new(body),
        atoms: Vec::with_capacity(body.len()),
    };
    let tree = match reader.top() {
        Ok(tree) => tree,
        Err(Stop::NotJson) => return Ok(None),
        Err(Stop::Ambiguous(ambiguous)) => return Err(ambiguous),
    };
    let mut out = Vec::with_capacity(reader.atoms.len() + body.len() / 4);
    write_node(&tree, &reader.atoms, &mut out);
    Ok(Some(use_canonical(&out)))
}

/// A value read: scalars already in canonical form (a range of the reader's atoms), containers as trees.
enum Node {
    Atom(Range<usize>),
    Array(Vec<Node>),
    /// Members sorted by name, names unique.
    Object(Vec<(String, Node)>),
}

/// Why reading stopped.
enum Stop {
    NotJson,
    Ambiguous(AmbiguousJson),
}

impl From<jiter::JiterError> for Stop {
    fn from(_: jiter::JiterError) -> Self {
        Stop::NotJson
    }
}

struct Reader<'j> {
    jiter: Jiter<'j>,
    /// The canonical text of every scalar, one after another.
    atoms: Vec<u8>,
}

impl Reader<'_> {
    /// The one value of the text, and nothing after it.
    fn top(&mut self) -> Result<Node, Stop> {
        let peek = self.jiter.peek()?;
        let node = self.value(peek, 0)?;
        self.jiter.finish()?;
        Ok(node)
    }

    fn value(&mut self, peek: Peek, depth: u32) -> Result<Node, Stop> {
        let start = self.atoms.len();
        match peek {
            Peek::Null => {
                self.jiter.known_null()?;
                self.atoms.extend_from_slice(b"null");
            }
            Peek::True | Peek::False => {
                let value = self.jiter.known_bool(peek)?;
                self.atoms
                    .extend_from_slice(if value { b"true" } else { b"false" });
            }
            Peek::String => {
                let string = self.jiter.known_str()?;
                write_string(string, &mut self.atoms);
            }
            Peek::Array => return self.array(depth + 1),
            Peek::Object => return self.object(depth + 1),
            _ => {
                let text = self.jiter.known_number_bytes(peek)?;
                write_number(text, &mut self.atoms).ok_or(Stop::NotJson)?;
            }
        }
        Ok(Node::Atom(start..self.atoms.len()))
    }

    fn array(&mut self, depth: u32) -> Result<Node, Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::NotJson);
        }
        let mut items = Vec::new();
        let mut next = self.jiter.known_array()?;
        while let Some(peek) = next {
            items.push(self.value(peek, depth)?);
            next = self.jiter.array_step()?;
        }
        Ok(Node::Array(items))
    }

    fn object(&mut self, depth: u32) -> Result<Node, Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::NotJson);
        }
        let mut members = Vec::new();
        let mut name = self.jiter.known_object()?.map(str::to_owned);
        while let Some(current) = name {
            let peek = self.jiter.peek()?;
            members.push((current, self.value(peek, depth)?));
            name = self.jiter.next_key()?.map(str::to_owned);
        }
        members.sort_unstable_by(|a, b| utf16_cmp(&a.0, &b.0));
        // Sorted, a repeated name sits next to itself.
        if let Some(pair) = members.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            let name = pair[0].0.chars().take(QUOTED_NAME).collect();
            return Err(Stop::Ambiguous(AmbiguousJson::DuplicateMember { name }));
        }
        Ok(Node::Object(members))
    }
}

/// Appends the canonical form of `node`. Recursion is bounded by [`MAX_DEPTH`].
fn write_node(node: &Node, atoms: &[u8], out: &mut Vec<u8>) {
    match node {
        Node::Atom(range) => out.extend_from_slice(&atoms[range.clone()]),
        Node::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_node(item, atoms, out);
            }
            out.push(b']');
        }
        Node::Object(members) => {
            out.push(b'{');
            for (i, (name, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(name, out);
                out.push(b':');
                write_node(item, atoms, out);
            }
            out.push(b'}');
        }
    }
}

/// Appends the exact value of a JSON number literal (`text`, valid by RFC 8259's grammar) in ECMAScript's
/// `Number.prototype.toString` layout; `None` when its exponent does not fit 18 digits.
///
/// The value is `0.d1d2…dk × 10^n` with `d1..dk` the literal's significant digits (no leading or trailing
/// zeros); ECMAScript's layout then depends only on `k` and `n` (ECMA-262, Number::toString, steps 6-10).
fn write_number(text: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let (negative, unsigned) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (mantissa, exponent) = match unsigned.iter().position(|&b| b == b'e' || b == b'E') {
        Some(e) => (&unsigned[..e], exponent(&unsigned[e + 1..])?),
        None => (unsigned, 0),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(dot) => (&mantissa[..dot], &mantissa[dot + 1..]),
        None => (mantissa, &[][..]),
    };
    // The digits of int and frac as one sequence, and where its significant part starts and ends.
    let digit = |i: usize| {
        if i < int.len() {
            int[i]
        } else {
            frac[i - int.len()]
        }
    };
    let all = int.len() + frac.len();
    let Some(first) = (0..all).find(|&i| digit(i) != b'0') else {
        out.push(b'0'); // every zero, -0 included
        return Some(());
    };
    let last = (0..all).rev().find(|&i| digit(i) != b'0')?;
    let k = i64::try_from(last - first + 1).ok()?;
    let n = i64::try_from(int.len())
        .ok()?
        .checked_sub(i64::try_from(first).ok()?)?
        .checked_add(exponent)?;
    let digits = (first..=last).map(digit);
    if negative {
        out.push(b'-');
    }
    if k <= n && n <= 21 {
        out.extend(digits);
        out.extend(std::iter::repeat_n(b'0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        let mut digits = digits;
        out.extend(digits.by_ref().take(n as usize));
        out.push(b'.');
        out.extend(digits);
    } else if -6 < n && n <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-n) as usize));
        out.extend(digits);
    } else {
        let mut digits = digits;
        out.extend(digits.by_ref().take(1));
        if k > 1 {
            out.push(b'.');
            out.extend(digits);
        }
        let e = n - 1;
        out.push(b'e');
        out.push(if e < 0 { b'-' } else { b'+' });
        out.extend_from_slice(e.unsigned_abs().to_string().as_bytes());
    }
    Some(())
}

/// A number's exponent (after the `e`): an optional sign and digits; `None` past 18 significant digits.
fn exponent(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let significant = &digits[digits.iter().position(|&b| b != b'0').unwrap_or(digits.len())..];
    if significant.len() > 18 {
        return None;
    }
    let magnitude = significant
        .iter()
        .fold(0i64, |value, &d| value * 10 + i64::from(d - b'0'));
    Some(if negative { -magnitude } else { magnitude })
}

/// A JSON string as ECMAScript's `JSON.stringify` writes it (RFC 8785 §3.2.2.2).
fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.push(b'"');
    let mut copied = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0C => b"\\f",
            b'\r' => b"\\r",
            0x00..=0x1F => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0x0F)],
            ],
            _ => continue,
        };
        // Escaped bytes are ASCII, so `copied..i` always ends on a character boundary.
        out.extend_from_slice(&bytes[copied..i]);
        out.extend_from_slice(escape);
        copied = i + 1;
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

/// Orders two member names by their UTF-16 code units (RFC 8785 §3.2.3).
///
/// UTF-8 byte order is code point order, and UTF-16 order agrees with it except between a character above
/// U+FFFF (surrogates D800..DFFF) and one in U+E000..U+FFFF. So the bytes decide whenever the first
/// difference involves an ASCII byte, which is almost always; otherwise the UTF-16 units are compared.
fn utf16_cmp(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    match x.iter().zip(y).position(|(p, q)| p != q) {
        None => x.len().cmp(&y.len()),
        Some(i) if x[i] < 0x80 || y[i] < 0x80 => x[i].cmp(&y[i]),
        Some(_) => a.encode_utf16().cmp(b.encode_utf16()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotency::arb;
    use proptest::prelude::*;
    use serde_json::Value;

    fn canon(text: &str) -> String {
        let bytes = canonical_json(text.as_bytes())
            .expect("test input names no member twice")
            .expect("test input is JSON");
        String::from_utf8(bytes).expect("canonical JSON is UTF-8")
    }

    #[test]
    fn rfc8785_appendix_b_numbers() {
        // RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text. Spelled with JCS's digits (in any
        // layout), a double canonicalises to JCS's text: exact values agree with JCS on every double's shortest
        // spelling. (A serialiser may pick other shortest digits on a tie: Rust writes the last one as
        // ...206.3, ECMAScript rounds half to even, ...206.2. Those are two decimals, and stay two here.)
        let vectors: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        // The significant digits of a number's text.
        let digits = |text: &str| {
            let mantissa = text.split(['e', 'E']).next().unwrap().replace(['-', '.'], "");
            mantissa.trim_matches('0').to_owned()
        };
        for &(bits, expected) in vectors {
            let double = f64::from_bits(bits);
            assert_eq!(
                expected.parse::<f64>().unwrap(),
                double,
                "{expected} spells its double"
            );
            assert_eq!(canon(expected), expected, "JCS's text is its own canonical form");
            // Rust's spelling of the double, in its other layout, where it chose the same digits.
            let rust = format!("{double:e}");
            if digits(&rust) == digits(expected) {
                assert_eq!(canon(&rust), expected, "{rust}");
            }
        }
    }

    #[test]
    fn rfc8785_section_3_2_2_example() {
        // As the RFC's, except `333333333.33333329`: JCS reads it as the double 333333333.3333333; its exact
        // value is kept here (the module's one departure).
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        let expected = concat!(
            r#"{"literals":[null,true,false],"numbers":[333333333.33333329,1e+30,4.5,0.002,1e-27],"#,
            r#""string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
        assert_eq!(canon(input), expected);
    }

    #[test]
    fn rfc8785_section_3_2_3_sorts_by_utf16_code_units() {
        let input = r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",
            "1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control",
            "\u00f6":"Latin Small Letter O With Diaeresis"}"#;
        let canonical = canon(input);
        let values: Vec<&str> = [
            "Carriage Return",
            "One",
            "Control",
            "Latin Small",
            "Euro",
            "Emoji",
            "Hebrew",
        ]
        .into_iter()
        .collect();
        let positions: Vec<usize> = values.iter().map(|v| canonical.find(v).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{canonical}");
    }

    #[test]
    fn numbers_take_their_shortest_ecmascript_form() {
        assert_eq!(canon("[1.0, 1, 1e0, 10e-1, 100, 1E2]"), "[1,1,1,1,100,100]");
        assert_eq!(canon("[-0, -0.0, 0.0, 0]"), "[0,0,0,0]");
        assert_eq!(
            canon("[1e21, 1e20, 1e-7, 0.000001, 4.50]"),
            "[1e+21,100000000000000000000,1e-7,0.000001,4.5]"
        );
        assert_eq!(
            canon("[-1, -1.5, -9223372036854775808]"),
            "[-1,-1.5,-9223372036854775808]"
        );
    }

    /// Regression (issue 11): beyond 64 bits, and beyond a double's precision, two different numbers
    /// canonicalised alike, so a request naming one replayed the other's answer.
    #[test]
    fn every_number_keeps_its_exact_value() {
        for (a, b) in [
            ("36893488147419103232", "36893488147419103233"),
            ("9007199254740993", "9007199254740992"),
            ("0.1", "0.10000000000000000001"),
            ("333333333.33333329", "333333333.3333333"),
            ("1e400", "1e401"),
            ("-1e-400", "0"),
        ] {
            assert_ne!(canon(a), canon(b), "{a} and {b}");
        }
        assert_eq!(canon("36893488147419103232"), "36893488147419103232");
        assert_eq!(canon("18446744073709551616"), "18446744073709551616");
        assert_eq!(canon("0.10000000000000000001"), "0.10000000000000000001");
        assert_eq!(canon("1e400"), "1e+400");
        assert_eq!(canon("-1.50E-400"), "-1.5e-400");
        assert_eq!(
            canon("123456789012345678901234567890"),
            "1.2345678901234567890123456789e+29"
        );
    }

    #[test]
    fn one_value_spelled_many_ways_is_one_text() {
        for (spellings, canonical) in [
            (
                &["1", "1.0", "1e0", "10e-1", "0.001e3", "100E-2", "1.000e+0"][..],
                "1",
            ),
            (&["0", "-0", "0.0", "-0.0e5", "0e-7"][..], "0"),
            (
                &["-684699619174717950000000000000e105", "-6.8469961917471795e134"][..],
                "-6.8469961917471795e+134",
            ),
            (&["0.0000001", "1e-7", "100e-9"][..], "1e-7"),
            (&["0.000001", "1e-6"][..], "0.000001"),
            (&["1e21", "1000000000000000000000"][..], "1e+21"),
            (&["1e20", "100000000000000000000"][..], "100000000000000000000"),
            (&["12.5e1", "125"][..], "125"),
        ] {
            for spelling in spellings {
                assert_eq!(canon(spelling), canonical, "{spelling}");
            }
        }
    }

    #[test]
    fn an_exponent_past_18_digits_is_not_canonicalised() {
        assert_eq!(canonical_json(b"1e1000000000000000000"), Ok(None));
        assert_eq!(canon("1e000000000000000000000000005"), "100000");
    }

    #[test]
    fn strings_escape_like_json_stringify() {
        assert_eq!(
            canon(r#""\u0000\u0007\b\t\n\u000b\f\r\u001f""#),
            r#""\u0000\u0007\b\t\n\u000b\f\r\u001f""#
        );
        assert_eq!(canon(r#""\u007f\u2028\u00e9\/ok""#), "\"\u{7f}\u{2028}é/ok\"");
        assert_eq!(
            canon(r#""\ud83d\ude00 \"q\" \\""#),
            "\"\u{1F600} \\\"q\\\" \\\\\""
        );
    }

    #[test]
    fn whitespace_and_member_order_do_not_matter() {
        let a = canon(r#"{"b": {"y": [1, {"q": 2, "p": 3}], "x": null}, "a": true}"#);
        let b = canon("{\n\t\"a\":true,\r\n \"b\":{\"x\":null,\"y\":[1,{\"p\":3,\"q\":2}]}}");
        assert_eq!(a, b);
        assert_eq!(a, r#"{"a":true,"b":{"x":null,"y":[1,{"p":3,"q":2}]}}"#);
    }

    #[test]
    fn array_order_matters() {
        assert_ne!(canon("[1,2]"), canon("[2,1]"));
    }

    /// Regression (issue 11): `{"a":1,"a":2}` canonicalised as `{"a":2}`, so it shared a fingerprint with a
    /// request its upstream may read as `{"a":1}`. A repeated name, at any depth, has no canonical form.
    #[test]
    fn a_member_named_twice_is_ambiguous() {
        let duplicate = |name: &str| {
            Err(AmbiguousJson::DuplicateMember {
                name: name.to_owned(),
            })
        };
        assert_eq!(canonical_json(br#"{"a":1,"a":2}"#), duplicate("a"));
        assert_eq!(
            canonical_json(br#"{"a":1,"b":[{"c":1,"\u0063":2}]}"#),
            duplicate("c")
        );
        let long = "n".repeat(500);
        let text = format!(r#"{{"{long}":1,"{long}":1}}"#);
        assert_eq!(canonical_json(text.as_bytes()), duplicate(&long[..64]));
        // One name in two objects is two members.
        assert_eq!(canon(r#"[{"a":1},{"a":2}]"#), r#"[{"a":1},{"a":2}]"#);
        let message = canonical_json(br#"{"a":1,"a":2}"#).unwrap_err().to_string();
        assert!(
            message.contains("\"a\"") && message.contains("twice"),
            "{message}"
        );
    }

    #[test]
    fn what_is_not_one_json_text_is_not_json() {
        for text in [
            "",
            "{",
            "{\"a\":1} x",
            "[1,]",
            "NaN",
            "Infinity",
            "01",
            "1.",
            ".5",
            "+1",
            "\"\\ud800\"",
            "\"a\u{1}b\"",
            "// c\n1",
            "\u{feff}{}",
        ] {
            assert_eq!(canonical_json(text.as_bytes()), Ok(None), "{text:?}");
        }
        assert_eq!(canonical_json(b"\"\xff\""), Ok(None));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(canonical_json(deep.as_bytes()), Ok(None));
        let deep = format!("{}1{}", "{\"a\":".repeat(129), "}".repeat(129));
        assert_eq!(canonical_json(deep.as_bytes()), Ok(None));
        let fits = format!("{}1{}", "[".repeat(128), "]".repeat(128));
        assert_eq!(canon(&fits), fits);
    }

    #[test]
    fn scalars_at_top_level_are_json() {
        assert_eq!(canon(" 2.50 "), "2.5");
        assert_eq!(canon("\"x\""), "\"x\"");
        assert_eq!(canon("null"), "null");
    }

    proptest! {
        #[test]
        fn utf16_cmp_agrees_with_utf16_units(a in any::<String>(), b in any::<String>()) {
            prop_assert_eq!(utf16_cmp(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
        }

        #[test]
        fn utf16_cmp_on_shared_prefixes(prefix in any::<String>(), a in any::<char>(), b in any::<char>()) {
            let (a, b) = (format!("{prefix}{a}"), format!("{prefix}{b}"));
            prop_assert_eq!(utf16_cmp(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
        }

        #[test]
        fn integers_match_std_formatting(n in any::<i64>(), u in any::<u64>()) {
            prop_assert_eq!(canon(&n.to_string()), n.to_string());
            prop_assert_eq!(canon(&u.to_string()), u.to_string());
        }

        #[test]
        fn exact_values_decide(m in any::<u64>(), e in -40i32..40, shift in 0usize..5, other in any::<u64>()) {
            // m × 10^e spelled with its digits moved by `shift` places is the same value...
            let plain = format!("{m}e{e}");
            let moved = format!("{m}{}e{}", "0".repeat(shift), e - shift as i32);
            prop_assert_eq!(canon(&plain), canon(&moved));
            // ...and a different mantissa at the same exponent is a different value.
            if other != m {
                prop_assert_ne!(canon(&plain), canon(&format!("{other}e{e}")));
            }
        }

        #[test]
        fn spelling_does_not_matter(json in arb::json(), seed in any::<u64>()) {
            let plain = canon(&arb::render(&json, arb::Spelling::Plain, seed));
            let other = canon(&arb::render(&json, arb::Spelling::Varied, seed.rotate_left(17)));
            prop_assert_eq!(&plain, &other);
            // Canonical text is its own canonical form.
            prop_assert_eq!(canon(&plain), plain.clone());
            // And it is what serde_json reads back as the same value.
            let reread: Value = serde_json::from_str(&plain).unwrap();
            let original: Value = serde_json::from_str(&arb::render(&json, arb::Spelling::Plain, 0)).unwrap();
            prop_assert_eq!(reread, original);
        }
    }
}
