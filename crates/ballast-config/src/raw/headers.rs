//! A tool upstream's `headers` table as written: names in file order, each value a literal string or a table
//! naming the environment variable that holds it.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `headers = { x-api-version = "2024-01", authorization = { env = "TOKEN", prefix = "Bearer " } }`: header
/// name -> value, in file order, names as written (validation checks and lower-cases them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawHeaders(pub Vec<(String, RawHeaderValue)>);

impl RawHeaders {
    /// Whether the table has no header.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One header's value as written.
#[derive(Clone, Debug, PartialEq)]
pub enum RawHeaderValue {
    /// `name = "value"`: sent as written (never a secret: validation refuses credentials' headers here).
    Literal(String),
    /// `name = { env = "VAR", prefix = "..." }`: read from the environment when the gateway starts.
    Env(RawHeaderEnv),
}

/// `{ env = "VAR", prefix = "Bearer " }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeaderEnv {
    /// The variable holding the value (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// Text sent before the variable's value (`""`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

impl Serialize for RawHeaders {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RawHeaders {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(HeadersVisitor)
    }
}

struct HeadersVisitor;

impl<'de> Visitor<'de> for HeadersVisitor {
    type Value = RawHeaders;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of header name = value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeaders, A::Error> {
        let mut headers = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((name, value)) = map.next_entry::<String, RawHeaderValue>()? {
            headers.push((name, value));
        }
        Ok(RawHeaders(headers))
    }
}

impl Serialize for RawHeaderValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RawHeaderValue::Literal(value) => serializer.serialize_str(value),
            RawHeaderValue::Env(env) => env.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for RawHeaderValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(HeaderValueVisitor)
    }
}

struct HeaderValueVisitor;

impl<'de> Visitor<'de> for HeaderValueVisitor {
    type Value = RawHeaderValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(r#"a string, or a table such as { env = "VAR", prefix = "Bearer " }"#)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawHeaderValue, E> {
        Ok(RawHeaderValue::Literal(v.to_owned()))
    }

    /// The table's own derive reads it, so an unknown key is named as anywhere else (`evn`).
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawHeaderValue, A::Error> {
        RawHeaderEnv::deserialize(de::value::MapAccessDeserializer::new(map)).map(RawHeaderValue::Env)
    }
}
