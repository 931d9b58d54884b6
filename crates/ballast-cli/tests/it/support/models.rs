//! The model routes' black-box fixture: `ballast serve` over the chaos providers of the routes the gateway's tests
//! share (`ballast_testkit::model_routes`), each on a listener of its own in this process.

use std::collections::HashMap;

use ballast_chaos::ChaosServer;
use ballast_testkit::{ConfigText, MODEL_PROVIDERS, model_routes};

use super::gateway::{Gateway, chaos};

/// The shared model routes, each provider's URL the placeholder `{host}` that [`Providers::gateway_of`] replaces,
/// the store an SQLite file in the gateway's directory.
pub(crate) fn config() -> ConfigText {
    model_routes(|host| format!("{{{host}}}")).store("sqlite://{dir}/ballast.db")
}

/// The chaos providers of [`config`], by host.
pub(crate) struct Providers(HashMap<&'static str, ChaosServer>);

impl Providers {
    /// Every provider, started.
    pub(crate) async fn start() -> Providers {
        let mut providers = HashMap::new();
        for (host, profile) in MODEL_PROVIDERS {
            providers.insert(host, chaos(profile).await);
        }
        Providers(providers)
    }

    /// The provider at `host`.
    pub(crate) fn at(&self, host: &str) -> &ChaosServer {
        &self.0[host]
    }

    /// The gateway of `config` (with [`config`]'s provider placeholders) over these providers.
    pub(crate) fn gateway_of(&self, config: &str, env: &[(&str, &str)]) -> Gateway {
        let upstreams: Vec<(&str, &ChaosServer)> = self.0.iter().map(|(host, p)| (*host, p)).collect();
        Gateway::start_with(config, &upstreams, env)
    }
}
