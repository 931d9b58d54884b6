//! [`HumanValue`]: a duration or size as the file wrote it, kept unparsed until validation.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration (`"1.2s"`) or size (`"8MiB"`) exactly as written. Numbers are kept too, so validation can say
/// `30 is not a duration: units are required` instead of a type error.
#[derive(Clone, Debug, PartialEq)]
pub enum HumanValue {
    /// A string, the only form that can be valid.
    Text(String),
    /// A bare integer (always refused: units are required).
    Integer(i64),
    /// A bare float (always refused: units are required).
    Float(f64),
}

impl HumanValue {
    /// The number or text as it appeared, for the unit hint of an error.
    pub(crate) fn bare(&self) -> String {
        match self {
            HumanValue::Text(text) => text.clone(),
            HumanValue::Integer(n) => n.to_string(),
            HumanValue::Float(x) => x.to_string(),
        }
    }
}

impl From<&str> for HumanValue {
    fn from(text: &str) -> Self {
        HumanValue::Text(text.to_owned())
    }
}

impl fmt::Display for HumanValue {
    /// Text quoted (`"12x"`), numbers bare (`30`): how the value looks in the file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HumanValue::Text(text) => write!(f, "{text:?}"),
            HumanValue::Integer(n) => write!(f, "{n}"),
            HumanValue::Float(x) => write!(f, "{x}"),
        }
    }
}

impl Serialize for HumanValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            HumanValue::Text(text) => serializer.serialize_str(text),
            HumanValue::Integer(n) => serializer.serialize_i64(*n),
            HumanValue::Float(x) => serializer.serialize_f64(*x),
        }
    }
}

impl<'de> Deserialize<'de> for HumanValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(HumanValueVisitor)
    }
}

struct HumanValueVisitor;

impl Visitor<'_> for HumanValueVisitor {
    type Value = HumanValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string such as \"10s\" or \"8MiB\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<HumanValue, E> {
        Ok(HumanValue::Text(v.to_owned()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<HumanValue, E> {
        Ok(HumanValue::Integer(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<HumanValue, E> {
        i64::try_from(v)
            .map(HumanValue::Integer)
            .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<HumanValue, E> {
        Ok(HumanValue::Float(v))
    }
}
