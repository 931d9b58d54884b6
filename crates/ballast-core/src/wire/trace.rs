//! W3C Trace Context (`traceparent`): the trace an agent's request belongs to, passed to every upstream.
//!
//! `traceparent: 00-<trace-id: 32 hex>-<parent-id: 16 hex>-<flags: 2 hex>` (W3C Trace Context Level 1). A call
//! keeps the caller's trace id and flags; each attempt sends its own parent id, so an upstream's spans hang
//! under the attempt that reached them. The ids are drawn by the shell (this crate has no randomness of its
//! own); parsing and printing are here.

use std::fmt;

/// The header's name.
pub const TRACEPARENT: &str = "traceparent";

/// A W3C trace context: the trace id every call of one agent request shares, the id of the span that is the
/// parent of the next hop, and the trace flags (bit 0: sampled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceContext {
    trace_id: u128,
    parent_id: u64,
    flags: u8,
}

/// A `traceparent` value that is not W3C Trace Context.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "traceparent {value:?} is not W3C Trace Context (00-<32 hex>-<16 hex>-<2 hex>, lowercase, ids not all zero)"
)]
pub struct InvalidTraceparent {
    /// The value as given (cut to 64 characters).
    pub value: String,
}

impl TraceContext {
    /// A new trace: `trace_id` and `parent_id` drawn by the caller (zero is not a valid id: a zero is replaced by
    /// one), flags unset (not sampled: Ballast records no trace of its own).
    pub fn new(trace_id: u128, parent_id: u64) -> Self {
        TraceContext {
            trace_id: trace_id.max(1),
            parent_id: parent_id.max(1),
            flags: 0,
        }
    }

    /// Parses a `traceparent` header. Version `00` must be exactly 55 characters; a later version may carry
    /// more after a `-` (the spec's forward compatibility); version `ff` is invalid.
    pub fn parse(value: &str) -> Result<Self, InvalidTraceparent> {
        parse(value).ok_or_else(|| InvalidTraceparent {
            value: value.chars().take(64).collect(),
        })
    }

    /// The same trace and flags with `parent_id` as the parent of the next hop (an attempt's own id).
    pub fn child(self, parent_id: u64) -> Self {
        TraceContext {
            parent_id: parent_id.max(1),
            ..self
        }
    }

    /// The same trace with its sampled flag (bit 0 of the flags) set or cleared: what a hop that records traces
    /// decided for a trace it started.
    pub fn with_sampled(self, sampled: bool) -> Self {
        TraceContext {
            flags: (self.flags & !1) | u8::from(sampled),
            ..self
        }
    }

    /// Whether the trace is sampled (bit 0 of its flags): its spans are recorded.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id: the same for every call and attempt of one agent request.
    pub fn trace_id(&self) -> u128 {
        self.trace_id
    }

    /// The id of the span the next hop is a child of.
    pub fn parent_id(&self) -> u64 {
        self.parent_id
    }

    /// The trace flags (bit 0: sampled).
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// The trace id as 32 lowercase hex digits: the request id of logs and spans.
    pub fn trace_id_hex(&self) -> TraceId {
        TraceId(self.trace_id)
    }
}

/// A trace id, printed as 32 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceId(pub u128);

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl TraceContext {
    /// The `traceparent` header value, as its 55 bytes: written without the formatting machinery, which costs
    /// several times more on every attempt.
    pub fn header_bytes(&self) -> [u8; 55] {
        let mut out = *b"00-00000000000000000000000000000000-0000000000000000-00";
        hex_into(&mut out[3..35], self.trace_id);
        hex_into(&mut out[36..52], u128::from(self.parent_id));
        hex_into(&mut out[53..55], u128::from(self.flags));
        out
    }
}

/// `value`'s low `out.len()` hex digits, lowercase, into `out`.
fn hex_into(out: &mut [u8], mut value: u128) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in out.iter_mut().rev() {
        *byte = DIGITS[(value & 0xf) as usize];
        value >>= 4;
    }
}

/// The `traceparent` header value.
impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.header_bytes();
        // Hex digits and dashes: always ASCII.
        f.write_str(std::str::from_utf8(&bytes).map_err(|_| fmt::Error)?)
    }
}

fn parse(value: &str) -> Option<TraceContext> {
    let bytes = value.as_bytes();
    if bytes.len() < 55 || !bytes.is_ascii() {
        return None;
    }
    let version = hex(&value[0..2])?;
    match version {
        0 if bytes.len() != 55 => return None,
        0xff => return None,
        _ if bytes.len() > 55 && bytes[55] != b'-' => return None,
        _ => {}
    }
    if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    let trace_id = hex(&value[3..35])?;
    let parent_id = u64::try_from(hex(&value[36..52])?).ok()?;
    let flags = u8::try_from(hex(&value[53..55])?).ok()?;
    (trace_id != 0 && parent_id != 0).then_some(TraceContext {
        trace_id,
        parent_id,
        flags,
    })
}

/// Lowercase hex digits only (the spec's rule; `from_str_radix` would take uppercase and a sign).
fn hex(digits: &str) -> Option<u128> {
    digits
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        .then(|| u128::from_str_radix(digits, 16).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SPEC: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_sampled_flag_is_set_and_cleared_alone() {
        let trace = TraceContext::new(7, 9);
        assert!(!trace.sampled());
        let sampled = trace.with_sampled(true);
        assert!(sampled.sampled());
        assert_eq!(
            (sampled.trace_id(), sampled.parent_id(), sampled.flags()),
            (7, 9, 1)
        );
        assert!(!TraceContext::parse(SPEC).unwrap().with_sampled(false).sampled());
    }

    #[test]
    fn the_specs_example_parses_and_prints_back() {
        let trace = TraceContext::parse(SPEC).unwrap();
        assert_eq!(trace.trace_id(), 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(trace.parent_id(), 0x00f067aa0ba902b7);
        assert_eq!(trace.flags(), 1);
        assert_eq!(trace.to_string(), SPEC);
        assert_eq!(
            trace.trace_id_hex().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
    }

    #[test]
    fn a_child_keeps_the_trace_and_flags_and_changes_the_parent() {
        let child = TraceContext::parse(SPEC).unwrap().child(0xabc);
        assert_eq!(
            child.to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000abc-01"
        );
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b7-0",
        ] {
            assert!(TraceContext::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_later_version_may_carry_more_after_a_dash() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next";
        assert_eq!(TraceContext::parse(later).unwrap().flags(), 1);
        assert!(TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x").is_err());
    }

    #[test]
    fn the_header_bytes_are_the_formatted_value() {
        let trace = TraceContext::parse(SPEC).unwrap();
        assert_eq!(&trace.header_bytes()[..], SPEC.as_bytes());
        let all = TraceContext::new(u128::MAX, u64::MAX);
        assert_eq!(
            all.to_string(),
            format!("00-{}-{}-00", "f".repeat(32), "f".repeat(16))
        );
    }

    #[test]
    fn zero_ids_are_never_made() {
        assert_eq!(
            TraceContext::new(0, 0).to_string(),
            format!("00-{:032x}-{:016x}-00", 1, 1)
        );
    }

    proptest! {
        #[test]
        fn every_context_prints_a_value_that_parses_back(trace in any::<u128>(), parent in any::<u64>()) {
            let context = TraceContext::new(trace, parent);
            prop_assert_eq!(TraceContext::parse(&context.to_string()).unwrap(), context);
        }
    }
}
