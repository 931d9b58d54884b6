//! The model routes' black-box fixture: `ballast serve` over chaos providers in this process, one per kind of
//! provider the tests need, and a config with a route for each.

use ballast_chaos::ChaosServer;

use super::gateway::{Gateway, chaos};

/// The gateway's model routes:
/// - `agent`: a healthy provider; `embed` the same for embeddings; `chat-only`: a deployment that speaks only chat;
/// - `failing`: its provider answers 500 to everything (3 attempts);
/// - `quota`: its primary's quota is spent (a stream hears it after `response.created`), the fallback is healthy;
/// - `stateful`: a primary whose first turn of op `op-state` fails, and a healthy fallback;
/// - `slow`: its provider hangs; `slow-stream`: its streams take seconds, an event every 500 ms;
/// - `stall`: its streams go silent for 5 s after their fourth event;
/// - `cut`: its streams are cut after their fourth event; `shed`: one call at a time and no queue, before a
///   provider that takes 600 ms;
/// - `small`: a provider whose context is 400 characters, truncating; `small-fallback`: the same moving to a
///   provider with a larger context.
pub(crate) const CONFIG: &str = r#"
version = 1
[store]
url = "sqlite://{dir}/ballast.db"
[server]
default_timeout = "10s"
reserve = "300ms"
[[models]]
name = "agent"
deployments = [ { base_url = "{ok}/v1", model = "mock" } ]
[[models]]
name = "embed"
deployments = [ { base_url = "{ok}/v1", model = "embedder", api = ["embeddings"] } ]
[[models]]
name = "chat-only"
deployments = [ { base_url = "{ok}/v1", model = "mock", api = ["chat"] } ]
[[models]]
name = "failing"
deployments = [ { base_url = "{failing}/v1", model = "mock" } ]
retry = { max_attempts = 3, base = "10ms", cap = "20ms" }
[[models]]
name = "quota"
deployments = [ { base_url = "{quota}/v1", model = "primary-model" }, { base_url = "{ok}/v1", model = "fallback-model" } ]
[[models]]
name = "stateful"
deployments = [ { base_url = "{stateful}/v1", model = "primary-model" }, { base_url = "{ok}/v1", model = "fallback-model" } ]
retry = { max_attempts = 1 }
[[models]]
name = "slow"
deployments = [ { base_url = "{slow}/v1", model = "mock" } ]
[[models]]
name = "slow-stream"
deployments = [ { base_url = "{slowstream}/v1", model = "mock" } ]
[[models]]
name = "stall"
deployments = [ { base_url = "{stall}/v1", model = "mock" } ]
retry = { max_attempts = 1 }
[[models]]
name = "cut"
deployments = [ { base_url = "{cut}/v1", model = "mock" } ]
retry = { max_attempts = 1 }
[[models]]
name = "shed"
deployments = [ { base_url = "{shed}/v1", model = "mock" } ]
concurrency = 1
queue = 0
[[models]]
name = "small"
deployments = [ { base_url = "{small}/v1", model = "mock" } ]
context = { on_overflow = "truncate" }
[[models]]
name = "small-fallback"
deployments = [ { base_url = "{small}/v1", model = "small-model" }, { base_url = "{ok}/v1", model = "large-model" } ]
context = { on_overflow = "fallback" }
"#;

/// The chaos providers of [`CONFIG`], by the name it gives them.
pub(crate) struct Providers {
    pub(crate) ok: ChaosServer,
    pub(crate) failing: ChaosServer,
    pub(crate) quota: ChaosServer,
    pub(crate) stateful: ChaosServer,
    pub(crate) slow: ChaosServer,
    pub(crate) slow_stream: ChaosServer,
    pub(crate) cut: ChaosServer,
    pub(crate) stall: ChaosServer,
    pub(crate) shed: ChaosServer,
    pub(crate) small: ChaosServer,
}

impl Providers {
    /// Every provider, started.
    pub(crate) async fn start() -> Providers {
        Providers {
            ok: chaos("").await,
            failing: chaos("[endpoints.model]\nerrors = { 500 = 1.0 }").await,
            quota: chaos("[endpoints.model]\ninsufficient_quota = 1.0\nstream = { error_delivery = \"events\" }")
                .await,
            stateful: chaos(
                "[[scripts]]\nendpoint = \"model\"\nop = \"op-state/turn-0\"\nsteps = [\"503\", \"503\", \"503\"]",
            )
            .await,
            slow: chaos("[endpoints.model]\nhang = 1.0").await,
            slow_stream: chaos("[model]\nchunk_interval = \"500ms\"").await,
            cut: chaos("[endpoints.model]\nstream = { cut = 1.0, cut_after_chunks = 4 }").await,
            stall: chaos("[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 4, stall_for = \"5s\" }").await,
            shed: chaos("[endpoints.model]\nlatency = { p50 = \"600ms\", p99 = \"601ms\" }").await,
            small: chaos("[model]\ncontext_limit_chars = 400").await,
        }
    }

    /// The gateway of [`CONFIG`] over these providers, with the environment `env`.
    pub(crate) fn gateway(&self, env: &[(&str, &str)]) -> Gateway {
        self.gateway_of(CONFIG, env)
    }

    /// The gateway of `config` (with [`CONFIG`]'s provider names) over these providers.
    pub(crate) fn gateway_of(&self, config: &str, env: &[(&str, &str)]) -> Gateway {
        Gateway::start_with(
            config,
            &[
                ("ok", &self.ok),
                ("failing", &self.failing),
                ("quota", &self.quota),
                ("stateful", &self.stateful),
                ("slowstream", &self.slow_stream),
                ("slow", &self.slow),
                ("cut", &self.cut),
                ("stall", &self.stall),
                ("shed", &self.shed),
                ("small", &self.small),
            ],
            env,
        )
    }
}
