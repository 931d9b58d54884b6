//! The model routes the gateway's black-box tests share — in process (`ballast-gateway`) and against the binary
//! with the official SDKs (`ballast-cli`), whose scenarios name these routes — and the chaos providers behind
//! them: one provider per kind of failure, each at a host of its own.

use crate::{ConfigText, deployment};

/// The providers of [`model_routes`]: each host and its chaos profile (TOML).
pub const MODEL_PROVIDERS: [(&str, &str); 13] = [
    ("ok", ""),
    ("failing", "[endpoints.model]\nerrors = { 500 = 1.0 }"),
    (
        "quota",
        "[endpoints.model]\ninsufficient_quota = 1.0\nstream = { error_delivery = \"events\" }",
    ),
    (
        "stateful",
        "[[scripts]]\nendpoint = \"model\"\nop = \"op-state/turn-0\"\nsteps = [\"503\", \"503\", \"503\"]",
    ),
    ("slow", "[endpoints.model]\nhang = 1.0"),
    ("slowstream", "[model]\nchunk_interval = \"500ms\""),
    (
        "stall",
        "[endpoints.model]\nstream = { stall = 1.0, stall_after_chunks = 4, stall_for = \"5s\" }",
    ),
    (
        "cut",
        "[endpoints.model]\nstream = { cut = 1.0, cut_after_chunks = 4 }",
    ),
    (
        "shed",
        "[endpoints.model]\nlatency = { p50 = \"600ms\", p99 = \"601ms\" }",
    ),
    ("small", "[model]\ncontext_limit_chars = 400"),
    (
        "overloaded",
        "[endpoints.model]\nerrors = { 529 = 1.0 }\nstream = { error_delivery = \"events\" }",
    ),
    (
        "late",
        "[endpoints.model]\nstream = { error = 1.0, error_after_chunks = 1 }",
    ),
    ("spend", "[endpoints.model]\nspend_limit = 1.0"),
];

/// A config (a default timeout of 10 s, a reserve of 300 ms) with these model routes over the providers of
/// [`MODEL_PROVIDERS`], `base(host)` giving a provider's base URL (`http://ok` in process, where each host is a
/// router; a placeholder the test replaces with a listener's URL):
/// - `agent`: a healthy provider; `embed` the same for embeddings; `chat-only`: a deployment that speaks only chat;
/// - `failing`: its provider answers 500 to everything (3 attempts);
/// - `quota`: its primary's quota is spent (a stream hears it after `response.created`), the fallback is healthy;
/// - `stateful`: a primary whose first turn of op `op-state` fails, and a healthy fallback;
/// - `slow`: its provider hangs; `slow-stream`: its streams take seconds, an event every 500 ms;
/// - `stall`: its streams go silent for 5 s after their fourth event;
/// - `cut`: its streams are cut after their fourth event; `shed`: one call at a time and no queue, before a
///   provider that takes 600 ms;
/// - `small`: a provider whose context is 400 characters, truncating; `small-fallback`: the same moving to a
///   provider with a larger context;
/// - Anthropic's Messages API (deployments with `api = ["messages"]`): `claude`, a healthy provider;
///   `claude-overloaded`, a primary that answers every attempt 529 `overloaded_error` (a stream hears it after
///   `message_start`) and a healthy fallback; `claude-storm`, that primary alone; `claude-late`, a provider whose
///   streams send `overloaded_error` after their first content event; `claude-spend`, a provider whose spend
///   limit is reached (429, `enforced_spend_limit_reached`).
pub fn model_routes(base: impl Fn(&str) -> String) -> ConfigText {
    let at = |host: &str, model: &str| deployment(&format!("{}/v1", base(host)), model);
    let with_api = |host: &str, model: &str, api: &str| {
        let url = format!("{}/v1", base(host));
        format!("{{ base_url = \"{url}\", model = \"{model}\", api = [\"{api}\"] }}")
    };
    let fallback = |host: &str| [at(host, "primary-model"), at("ok", "fallback-model")];
    ConfigText::new()
        .server("default_timeout = \"10s\"\nreserve = \"300ms\"")
        .model("agent", &[at("ok", "mock")], "")
        .model("embed", &[with_api("ok", "embedder", "embeddings")], "")
        .model("chat-only", &[with_api("ok", "mock", "chat")], "")
        .model(
            "failing",
            &[at("failing", "mock")],
            r#"retry = { max_attempts = 3, base = "10ms", cap = "20ms" }"#,
        )
        .model("quota", &fallback("quota"), "")
        .model("stateful", &fallback("stateful"), "retry = { max_attempts = 1 }")
        .model("slow", &[at("slow", "mock")], "")
        .model("slow-stream", &[at("slowstream", "mock")], "")
        .model("stall", &[at("stall", "mock")], "retry = { max_attempts = 1 }")
        .model("cut", &[at("cut", "mock")], "retry = { max_attempts = 1 }")
        .model("shed", &[at("shed", "mock")], "concurrency = 1\nqueue = 0")
        .model(
            "small",
            &[at("small", "mock")],
            r#"context = { on_overflow = "truncate" }"#,
        )
        .model(
            "small-fallback",
            &[at("small", "small-model"), at("ok", "large-model")],
            r#"context = { on_overflow = "fallback" }"#,
        )
        .model("claude", &[with_api("ok", "claude-mock", "messages")], "")
        .model(
            "claude-overloaded",
            &[
                with_api("overloaded", "claude-primary", "messages"),
                with_api("ok", "claude-fallback", "messages"),
            ],
            r#"retry = { max_attempts = 2, base = "10ms", cap = "20ms" }"#,
        )
        .model(
            "claude-storm",
            &[with_api("overloaded", "claude-mock", "messages")],
            r#"retry = { max_attempts = 2, base = "10ms", cap = "20ms" }"#,
        )
        .model(
            "claude-late",
            &[with_api("late", "claude-mock", "messages")],
            "retry = { max_attempts = 1 }",
        )
        .model(
            "claude-spend",
            &[with_api("spend", "claude-mock", "messages")],
            "",
        )
}

#[cfg(test)]
mod tests {
    use ballast_config::Config;

    use super::*;

    #[test]
    fn every_route_is_read_and_every_host_has_a_provider() {
        let text = model_routes(|host| format!("http://{host}")).build();
        let config = Config::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(config.models.len(), 18);
        for route in &config.models {
            for deployment in &route.deployments {
                let url = &deployment.base_url;
                assert!(
                    MODEL_PROVIDERS
                        .iter()
                        .any(|(host, _)| url.starts_with(&format!("http://{host}/"))),
                    "{}: {url} has no provider",
                    route.name
                );
            }
        }
        for (host, profile) in MODEL_PROVIDERS {
            ballast_chaos::Profile::from_toml_str(profile).unwrap_or_else(|e| panic!("{host}: {e}"));
        }
    }
}
