//! Test support: random JSON values and several spellings of each (member order, whitespace, escapes,
//! number forms), for the canonicalisation and fingerprint properties.

use std::fmt::Write;

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

/// A JSON value whose objects keep an order (serde_json's map would sort them) and have unique names.
#[derive(Clone, Debug)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// How to spell a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Spelling {
    /// Compact, serde_json's escapes, plain numbers.
    Plain,
    /// Whitespace everywhere, every non-ASCII character and `/` escaped, numbers as `1.0`, `1e0`, `2.5e-1`.
    Varied,
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        (-1000i32..1000).prop_map(|n| f64::from(n) / 8.0),
    ]
    .prop_map(|f| if f == 0.0 { 0.0 } else { f }) // -0 reads back as 0 and would trip Value equality
}

/// Random JSON up to four levels deep.
pub(super) fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::Int),
        (-100i64..100).prop_map(Json::Int),
        float().prop_map(Json::Float),
        any::<String>().prop_map(Json::Str),
        "[a-z]{0,6}".prop_map(Json::Str),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Json::Array),
            btree_map(prop_oneof!["[a-z]{0,3}", any::<String>()], inner, 0..6)
                .prop_map(|members| Json::Object(members.into_iter().collect())),
        ]
    })
}

/// `json` as text, its objects' members permuted by `seed`.
pub(super) fn render(json: &Json, spelling: Spelling, seed: u64) -> String {
    let mut out = String::new();
    let mut state = seed;
    write(json, spelling, &mut state, &mut out);
    out
}

fn next(state: &mut u64) -> u64 {
    // splitmix64
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn write(json: &Json, spelling: Spelling, state: &mut u64, out: &mut String) {
    let ws = if spelling == Spelling::Varied { " \n\t" } else { "" };
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    match json {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Int(n) if spelling == Spelling::Varied && n.unsigned_abs() <= 1 << 53 => {
            let form = if next(state) & 1 == 0 { ".0" } else { "e0" };
            write!(out, "{n}{form}").unwrap();
        }
        Json::Int(n) => write!(out, "{n}").unwrap(),
        // An integral double past 2^53 written as an integer literal keeps its exact digits (see jcs.rs), so
        // only spell it one way.
        Json::Float(f) if spelling == Spelling::Varied && (f.fract() != 0.0 || f.abs() < EXACT) => {
            write!(out, "{f:e}").unwrap()
        }
        Json::Float(f) => write!(out, "{f}").unwrap(),
        Json::Str(s) => write_string(s, spelling, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws);
                write(item, spelling, state, out);
            }
            out.push_str(ws);
            out.push(']');
        }
        Json::Object(members) => {
            let mut order: Vec<&(String, Json)> = members.iter().collect();
            if !order.is_empty() {
                let len = order.len() as u64;
                order.rotate_left((next(state) % len) as usize);
                if next(state) & 1 == 0 {
                    order.reverse();
                }
            }
            out.push('{');
            for (i, (name, item)) in order.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws);
                write_string(name, spelling, out);
                out.push_str(ws);
                out.push(':');
                out.push_str(ws);
                write(item, spelling, state, out);
            }
            out.push_str(ws);
            out.push('}');
        }
    }
}

fn write_string(s: &str, spelling: Spelling, out: &mut String) {
    if spelling == Spelling::Plain {
        out.push_str(&serde_json::to_string(s).unwrap());
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(out, "\\u{unit:04X}").unwrap();
                }
            }
        }
    }
    out.push('"');
}
