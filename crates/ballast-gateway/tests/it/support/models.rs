//! The model routes' fixture: chaos providers in this process, one per kind of provider the tests need (each at
//! its own host), and a config with a route for each.

use ballast_testkit::{ConfigText, deployment};
use serde_json::{Value, json};

use super::{Gateway, Upstream};

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
pub(crate) fn config() -> ConfigText {
    let at = |host: &str, model: &str| [deployment(&format!("http://{host}/v1"), model)];
    let fallback = |host: &str| {
        [
            deployment(&format!("http://{host}/v1"), "primary-model"),
            deployment("http://ok/v1", "fallback-model"),
        ]
    };
    ConfigText::new()
        .server("default_timeout = \"10s\"\nreserve = \"300ms\"")
        .model("agent", &at("ok", "mock"), "")
        .model(
            "embed",
            &[r#"{ base_url = "http://ok/v1", model = "embedder", api = ["embeddings"] }"#],
            "",
        )
        .model(
            "chat-only",
            &[r#"{ base_url = "http://ok/v1", model = "mock", api = ["chat"] }"#],
            "",
        )
        .model(
            "failing",
            &at("failing", "mock"),
            r#"retry = { max_attempts = 3, base = "10ms", cap = "20ms" }"#,
        )
        .model("quota", &fallback("quota"), "")
        .model("stateful", &fallback("stateful"), "retry = { max_attempts = 1 }")
        .model("slow", &at("slow", "mock"), "")
        .model("slow-stream", &at("slowstream", "mock"), "")
        .model("stall", &at("stall", "mock"), "retry = { max_attempts = 1 }")
        .model("cut", &at("cut", "mock"), "retry = { max_attempts = 1 }")
        .model("shed", &at("shed", "mock"), "concurrency = 1\nqueue = 0")
        .model(
            "small",
            &at("small", "mock"),
            r#"context = { on_overflow = "truncate" }"#,
        )
        .model(
            "small-fallback",
            &[
                deployment("http://small/v1", "small-model"),
                deployment("http://ok/v1", "large-model"),
            ],
            r#"context = { on_overflow = "fallback" }"#,
        )
}

/// The chaos providers of [`config`], by the host it gives them.
pub(crate) struct Providers {
    pub(crate) ok: Upstream,
    pub(crate) failing: Upstream,
    pub(crate) quota: Upstream,
    pub(crate) stateful: Upstream,
    pub(crate) slow: Upstream,
    pub(crate) slow_stream: Upstream,
    pub(crate) cut: Upstream,
    pub(crate) stall: Upstream,
    pub(crate) shed: Upstream,
    pub(crate) small: Upstream,
}

impl Providers {
    /// Every provider.
    pub(crate) fn new() -> Providers {
        Providers {
            ok: Upstream::chaos(""),
            failing: Upstream::chaos("[endpoints.model]\nerrors = { 500 = 1.0 }"),
            quota: Upstream::chaos(
                "[endpoints.model]\ninsufficient_quota = 1.0\nstream = { error_delivery = \"events\" }",
            ),
            stateful: Upstream::chaos(
                "[[scripts]]\nendpoint = \"model\"\nop = \"op-state/turn-0\"\nsteps = [\"503\", \"503\", \"503\"]",
            ),
            slow: Upstream::chaos("[endpoints.model]\nhang = 1.0"),
            slow_stream: Upstream::chaos("[model]\nchunk_interval = \"500ms\""),
            cut: Upstream::chaos("[endpoints.model]\nstream = { cut = 1.0, cut_after_chunks = 4 }"),
            stall: Upstream::chaos(
                "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 4, stall_for = \"5s\" }",
            ),
            shed: Upstream::chaos("[endpoints.model]\nlatency = { p50 = \"600ms\", p99 = \"601ms\" }"),
            small: Upstream::chaos("[model]\ncontext_limit_chars = 400"),
        }
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

    fn hosts(&self) -> [(&str, &Upstream); 10] {
        [
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
        ]
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
