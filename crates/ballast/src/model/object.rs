//! Reading and writing a JSON object with a few typed fields and everything else kept as it came.
//!
//! Why by hand and not `#[serde(flatten)]` alone: flatten cannot tell "absent" from `null` for a typed optional
//! field, so a message echoed back by an SDK with `"tool_calls": null` would lose that key on the way out. Here a
//! typed field given `null` reads as `None` and the `null` stays in the pass-through map, so it goes out again
//! unchanged; a typed value, when set, wins over a `null` kept for the same key.

use serde::de::{DeserializeOwned, Error as _};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Reads a JSON object and builds `T` from it: `build` takes the typed fields out of the reader and ends with
/// [`ObjectReader::take_rest`] for the pass-through map.
pub(crate) fn read_object<'de, D, T>(
    deserializer: D,
    build: impl FnOnce(&mut ObjectReader) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let mut reader = ObjectReader {
        fields: Map::deserialize(deserializer)?,
    };
    build(&mut reader).map_err(D::Error::custom)
}

/// An object being read: typed fields are taken out of it one by one; what is left is the pass-through map.
pub(crate) struct ObjectReader {
    fields: Map<String, Value>,
}

impl ObjectReader {
    /// A field that must be present and not `null`.
    pub(crate) fn required<T: DeserializeOwned>(&mut self, key: &'static str) -> Result<T, String> {
        match self.optional(key)? {
            Some(value) => Ok(value),
            None => Err(format!("missing field `{key}`")),
        }
    }

    /// A field that may be absent or `null` (`None`; a `null` stays in the pass-through map).
    pub(crate) fn optional<T: DeserializeOwned>(&mut self, key: &'static str) -> Result<Option<T>, String> {
        match self.fields.remove(key) {
            None => Ok(None),
            Some(Value::Null) => {
                self.fields.insert(key.to_owned(), Value::Null);
                Ok(None)
            }
            Some(value) => serde_json::from_value(value)
                .map(Some)
                .map_err(|error| format!("field `{key}`: {error}")),
        }
    }

    /// Everything not taken as a typed field, `null`s of typed fields included.
    pub(crate) fn take_rest(&mut self) -> Map<String, Value> {
        std::mem::take(&mut self.fields)
    }
}

/// An object being written: typed fields first (those that are `Some`), then the pass-through map without the
/// keys a typed field already wrote (a typed value wins over an entry of the same key in the map, so a key is
/// never written twice).
pub(crate) struct ObjectWriter<'a, S: SerializeMap> {
    map: S,
    extra: &'a Map<String, Value>,
    written: Vec<&'static str>,
}

impl<'a, S: SerializeMap> ObjectWriter<'a, S> {
    pub(crate) fn new<Ser>(serializer: Ser, extra: &'a Map<String, Value>) -> Result<Self, Ser::Error>
    where
        Ser: Serializer<SerializeMap = S, Error = S::Error>,
    {
        let map = serializer.serialize_map(None)?;
        Ok(Self {
            map,
            extra,
            written: Vec::new(),
        })
    }

    /// Writes `key` when `value` is `Some`.
    pub(crate) fn field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: Option<&T>,
    ) -> Result<(), S::Error> {
        if let Some(value) = value {
            self.map.serialize_entry(key, value)?;
            self.written.push(key);
        }
        Ok(())
    }

    /// Writes the pass-through map and closes the object.
    pub(crate) fn end(mut self) -> Result<S::Ok, S::Error> {
        for (key, value) in self.extra {
            if !self.written.contains(&key.as_str()) {
                self.map.serialize_entry(key, value)?;
            }
        }
        self.map.end()
    }
}
