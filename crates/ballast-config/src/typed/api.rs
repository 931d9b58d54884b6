//! The APIs a model deployment may speak (`models.deployments.api`), one at a time and as a set.

use std::fmt;
use std::str::FromStr;

use ballast_core::UnknownName;

/// An API a model deployment may speak (`models.deployments.api`): OpenAI's three, or Anthropic's Messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Api {
    /// `POST /responses` (and `GET`/`DELETE /responses/{id}`, `/cancel`): the Responses API.
    Responses,
    /// `POST /chat/completions`: Chat Completions.
    Chat,
    /// `POST /embeddings`.
    Embeddings,
    /// `POST /messages` (and `POST /messages/count_tokens`): Anthropic's Messages API.
    Messages,
}

impl Api {
    /// Every API, in the order the config documents them.
    pub const ALL: [Api; 4] = [Api::Responses, Api::Chat, Api::Embeddings, Api::Messages];

    /// Its name in the config: `responses`, `chat`, `embeddings`, `messages`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Responses => "responses",
            Api::Chat => "chat",
            Api::Embeddings => "embeddings",
            Api::Messages => "messages",
        }
    }

    /// What callers know it by: `Responses`, `Chat Completions`, `embeddings`, `Messages`.
    pub fn title(self) -> &'static str {
        match self {
            Api::Responses => "Responses",
            Api::Chat => "Chat Completions",
            Api::Embeddings => "embeddings",
            Api::Messages => "Messages",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Api {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Api::ALL
            .into_iter()
            .find(|api| api.as_str() == s)
            .ok_or_else(|| UnknownName {
                value: s.to_owned(),
                expected: &["responses", "chat", "embeddings", "messages"],
            })
    }
}

/// A set of [`Api`]s.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApiSet(u8);

impl ApiSet {
    /// Every API.
    pub const ALL: ApiSet = ApiSet(0b1111);
    /// OpenAI's APIs (Responses, Chat Completions, embeddings): what a deployment speaks unless its config names
    /// its APIs — an OpenAI-compatible server is the common case; Anthropic's Messages is named (`api =
    /// ["messages"]`).
    pub const OPENAI: ApiSet = ApiSet(0b111);
    /// No API.
    pub const NONE: ApiSet = ApiSet(0);

    /// The set with `api` added.
    #[must_use]
    pub fn with(self, api: Api) -> Self {
        ApiSet(self.0 | api.bit())
    }

    /// Whether `api` is in the set.
    pub fn contains(self, api: Api) -> bool {
        self.0 & api.bit() != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The APIs in the set, in [`Api::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Api> {
        Api::ALL.into_iter().filter(move |api| self.contains(*api))
    }
}

impl FromIterator<Api> for ApiSet {
    fn from_iter<I: IntoIterator<Item = Api>>(apis: I) -> Self {
        apis.into_iter().fold(ApiSet::NONE, ApiSet::with)
    }
}

impl fmt::Debug for ApiSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}
