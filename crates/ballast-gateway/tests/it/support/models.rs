//! The model routes' fixture in process: the routes the gateway's black-box tests share
//! (`ballast_testkit::model_routes`, each provider at its own host) over their chaos providers, each a router.

use std::collections::HashMap;

use ballast_testkit::{ConfigText, MODEL_PROVIDERS, model_routes};
use serde_json::{Value, json};

use super::{Gateway, Upstream};

/// The shared model routes (`ballast_testkit::model_routes`), each provider at `http://{host}`.
pub(crate) fn config() -> ConfigText {
    model_routes(|host| format!("http://{host}"))
}

/// The chaos providers of [`config`], by host.
pub(crate) struct Providers(HashMap<&'static str, Upstream>);

impl Providers {
    /// Every provider.
    pub(crate) fn new() -> Providers {
        Providers(
            MODEL_PROVIDERS
                .iter()
                .map(|(host, profile)| (*host, Upstream::chaos(profile)))
                .collect(),
        )
    }

    /// The provider at `host`.
    pub(crate) fn at(&self, host: &str) -> &Upstream {
        &self.0[host]
    }

    /// The gateway of [`config`] over these providers, with the environment `env`.
    pub(crate) async fn gateway(&self, env: &[(&str, &str)]) -> Gateway {
        self.gateway_of(&config().build(), env).await
    }

    /// The gateway of `config` (with [`config`]'s provider hosts) over these providers.
    pub(crate) async fn gateway_of(&self, config: &str, env: &[(&str, &str)]) -> Gateway {
        Gateway::start_with(config, &self.hosts(), env).await
    }

    /// [`Providers::gateway_of`], with its metrics ([`Gateway::metered`]).
    pub(crate) async fn metered(&self, config: &str) -> Gateway {
        Gateway::metered(config, &self.hosts(), &[]).await
    }

    fn hosts(&self) -> Vec<(&str, &Upstream)> {
        self.0.iter().map(|(host, upstream)| (*host, upstream)).collect()
    }
}

/// A Responses request to `model` that the mock answers by its script, `op` naming the operation.
pub(crate) fn responses(model: &str, op: &str) -> Value {
    json!({"model": model, "input": [{"role": "user", "content": format!("Refund order 1234, op={op}")}]})
}

/// The same as a Chat Completions request.
pub(crate) fn chat(model: &str, op: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": format!("Refund order 1234, op={op}")}]})
}

/// `body`, streamed.
pub(crate) fn streamed(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}
