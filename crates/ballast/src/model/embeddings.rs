//! The embeddings API's bodies (`POST /embeddings`): the model typed (routing), everything else passed through
//! both ways, as the chat and Responses bodies are.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use ballast_config::Api;

use super::api::Protocol;
use super::object::{ObjectWriter, read_object};
use super::{CannotTruncate, Truncation, TruncationGoal};

/// A `POST /embeddings` request.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingsRequest {
    /// The model asked for: a route name on the way in, the deployment's model name on the way out.
    pub model: String,
    /// What to embed: a text, texts, or token arrays, as sent.
    pub input: Value,
    /// Every other key (`encoding_format`, `dimensions`, `user`, ...), untouched.
    pub extra: Map<String, Value>,
}

/// The answer of `POST /embeddings`.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingsResponse {
    /// One embedding object per input, in order (`{"object": "embedding", "index", "embedding"}`).
    pub data: Vec<Value>,
    /// Token usage (`prompt_tokens`, `total_tokens`).
    pub usage: Option<Value>,
    /// Every other key (`object`, `model`, ...), untouched.
    pub extra: Map<String, Value>,
}

impl EmbeddingsRequest {
    /// A request to embed `input` with `model`.
    pub fn new(model: impl Into<String>, input: impl Into<Value>) -> Self {
        EmbeddingsRequest {
            model: model.into(),
            input: input.into(),
            extra: Map::new(),
        }
    }
}

impl EmbeddingsResponse {
    /// The embeddings as numbers, in order (`None` for one sent in another form, base64 say).
    pub fn vectors(&self) -> Vec<Option<Vec<f64>>> {
        (self.data.iter())
            .map(|item| {
                let numbers = item.get("embedding")?.as_array()?;
                numbers.iter().map(Value::as_f64).collect()
            })
            .collect()
    }
}

impl<'de> Deserialize<'de> for EmbeddingsRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(EmbeddingsRequest {
                model: object.required("model")?,
                input: object.required("input")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for EmbeddingsRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("model", Some(&self.model))?;
        object.field("input", Some(&self.input))?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for EmbeddingsResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(EmbeddingsResponse {
                data: object.required("data")?,
                usage: object.optional("usage")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for EmbeddingsResponse {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("data", Some(&self.data))?;
        object.field("usage", self.usage.as_ref())?;
        object.end()
    }
}

/// Embeddings: `POST /embeddings`.
pub(crate) struct Embeddings;

impl Protocol for Embeddings {
    const API: Api = Api::Embeddings;
    const PATH: &'static str = "/embeddings";
    type Request = EmbeddingsRequest;
    type Answer = EmbeddingsResponse;

    fn set_model(request: &mut EmbeddingsRequest, model: &str) {
        model.clone_into(&mut request.model);
    }

    fn truncate(_: &mut EmbeddingsRequest, _: TruncationGoal) -> Result<Truncation, CannotTruncate> {
        // An input to embed has no turns: a text too long for the model is the caller's to shorten.
        Err(CannotTruncate::NothingToDrop)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bodies_pass_through_and_vectors_read() {
        let body = json!({"model": "e", "input": ["a", "b"], "encoding_format": "float", "dimensions": 2});
        let request: EmbeddingsRequest = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(serde_json::to_value(&request).unwrap(), body);
        let answer = json!({"object": "list", "model": "e",
                            "data": [{"object": "embedding", "index": 0, "embedding": [0.5, -0.5]},
                                     {"object": "embedding", "index": 1, "embedding": "AAAA"}],
                            "usage": {"prompt_tokens": 2, "total_tokens": 2}});
        let response: EmbeddingsResponse = serde_json::from_value(answer.clone()).unwrap();
        assert_eq!(response.vectors(), [Some(vec![0.5, -0.5]), None]);
        assert_eq!(serde_json::to_value(&response).unwrap(), answer);
    }
}
