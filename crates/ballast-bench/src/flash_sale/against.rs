//! The `against` strategy (`--against URL`): the HTTP agents of [`super::over_http`] through any
//! OpenAI-compatible gateway a user already runs, so that it meets the same faults beside Ballast. With
//! `--api messages` its agents call `URL/messages` as Anthropic's SDKs do (`x-api-key`, `anthropic-version`), so
//! the gateway there must speak Messages and send them to the upstream's `/v1/messages`.
//!
//! The bench still serves its own chaos upstream for each run; the user's gateway must route the model
//! [`MODEL`](super::over_http::MODEL) to that upstream's `/v1` (the bench prints both before it starts: with
//! `--upstream-listen` the address is the same for every run, so the gateway can be configured once). Tool
//! calls go straight to the upstream with the SDK's habits — such a gateway cannot take them. Pointed at the
//! chaos upstream itself (`--against http://127.0.0.1:9000/v1 --upstream-listen 127.0.0.1:9000`) it measures
//! agents with no gateway at all: the SDKs' own retries, alone.

use futures::future::BoxFuture;

use super::over_http::{HttpAgents, Route};
use super::strategy::{Agents, ModelApi, Strategy, ToolApi, strategy_name};

/// The `against` strategy (see the module docs).
#[derive(Clone, Debug)]
pub struct Against {
    url: String,
    key: Option<String>,
    api: ModelApi,
    name: String,
}

impl Against {
    /// Agents whose model calls go to the base URL `url` (`http://HOST:PORT/v1`) on `api`, with `key` when given
    /// (as a bearer key, or as `x-api-key` on Messages calls). Named `against`, or `against (messages)` when
    /// every agent calls one API.
    pub fn new(url: &str, key: Option<String>, api: ModelApi) -> Against {
        Against {
            url: url.trim_end_matches('/').to_owned(),
            key,
            api,
            name: strategy_name("against", api, ToolApi::Http),
        }
    }

    /// The base URL the model calls go to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Strategy for Against {
    fn name(&self) -> &str {
        &self.name
    }

    fn agents<'a>(
        &'a self,
        base_url: &'a str,
        time_scale: f64,
    ) -> BoxFuture<'a, Result<Box<dyn Agents>, String>> {
        Box::pin(async move {
            let route = Route::Any {
                models: self.url.clone(),
                upstream: base_url.to_owned(),
            };
            let agents = HttpAgents::new(route, self.key.clone(), self.api, time_scale)?;
            Ok(Box::new(agents) as Box<dyn Agents>)
        })
    }
}
