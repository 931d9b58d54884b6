//! Clients built in code (`ToolClient::builder`, `ModelClient::builder`) against the chaos upstream in process,
//! paused time: they answer as clients from a config do, start from the same defaults, are refused at `build()`
//! by the same rules with the field named, send a key given directly, and share a registry of runs.
//! `Clients::from_config` without an environment given reads the process's.

use crate::support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ballast::config::{Config, ConfigErrors, HttpMethod, RetryConfig, SecretProblem};
use ballast::model::{DeploymentBuilder, InvalidModelRoute};
use ballast::transport::ServiceTransport;
use ballast::{
    Clients, InvalidClients, Runs,
    model::ModelClient,
    tool::{ToolCall, ToolClient},
};
use ballast::{policy::UpstreamIdempotency, tool::InvalidTool};
use ballast_chaos::{EndpointProfile, KeyMode, LoseMode, ScriptStep};
use serde_json::json;
use support::chat::{Upstreams, call, first_turn, profile};
use support::tools::{clients, refund, refund_tool};
use support::{executions, scripted};

const REFUND_URL: &str = "http://chaos/tools/create_refund";
const LOOKUP_URL: &str = "http://chaos/tools/lookup_order";

/// The refund tool of `support::tools::refund_tool("keyed")`, built in code.
fn keyed_refund() -> ballast::tool::ToolClientBuilder {
    ToolClient::builder("create_refund", HttpMethod::Post, REFUND_URL)
        .side_effects(true)
        .upstream_idempotency(UpstreamIdempotency::Keyed)
        .per_try_timeout(Duration::from_secs(1))
        .retry(RetryConfig {
            max_attempts: 3,
            backoff: ballast::policy::Backoff::new(
                Duration::from_millis(100),
                Duration::from_secs(1),
                ballast::policy::Jitter::Full,
            )
            .expect("a valid backoff"),
        })
}

/// The field paths of a builder's refusal.
fn paths(errors: &ConfigErrors) -> Vec<&str> {
    errors.errors().iter().filter_map(|e| e.path()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_built_tool_calls_the_upstream_as_one_from_config_does() {
    let faults = EndpointProfile {
        key_mode: KeyMode::Keyed,
        lose_with: LoseMode::Hang,
        ..EndpointProfile::default()
    };
    let steps: &[ScriptStep] = &[ScriptStep::CommitThenLose, ScriptStep::Ok];
    let router = ballast_chaos::router(scripted(
        "create_refund",
        faults,
        &[("op-built", steps), ("op-toml", steps)],
    ));
    let from_toml = clients(&refund_tool("keyed"), &router);
    let from_toml = from_toml.get("create_refund").expect("configured");
    let built = keyed_refund()
        .build(ServiceTransport::new(router.clone()))
        .expect("valid settings");
    assert_eq!(built.config(), from_toml.config());

    let a = built.call(refund("op-built")).await.expect("answered");
    let b = from_toml.call(refund("op-toml")).await.expect("answered");
    for answer in [&a, &b] {
        assert_eq!(answer.status, 200);
        assert_eq!(answer.report.attempts.len(), 2, "{}", answer.report);
        assert!(
            answer.report.replayed,
            "the retry is answered with the stored success"
        );
    }
    assert_eq!(a.body()["amount"], b.body()["amount"]);
    assert_eq!(executions(&router, "op-built").await, 1);
    assert_eq!(executions(&router, "op-toml").await, 1);
}

#[test]
fn built_clients_start_from_the_defaults_of_a_minimal_config() {
    let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
    let config = Config::from_toml_str(&format!(
        r#"
        version = 1
        [[tools]]
        name = "lookup_order"
        upstream = {{ method = "GET", url = "{LOOKUP_URL}" }}
        [[models]]
        name = "agent"
        deployments = [ {{ base_url = "http://chaos/v1" }} ]
        "#
    ))
    .expect("a minimal config");

    let Clients { tools, models, .. } = Clients::from_config(&config)
        .build(transport.clone())
        .expect("clients");
    let tool = ToolClient::builder("lookup_order", HttpMethod::Get, LOOKUP_URL)
        .build(transport.clone())
        .expect("defaults are valid");
    assert_eq!(
        tool.config(),
        tools.get("lookup_order").expect("configured").config()
    );

    let model = ModelClient::builder("agent")
        .deployment(DeploymentBuilder::new("http://chaos/v1"))
        .build(transport)
        .expect("defaults are valid");
    assert_eq!(model.config(), models.get("agent").expect("configured").config());
}

#[test]
fn settings_the_rules_refuse_fail_at_build_each_named_as_the_builders_field() {
    let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
    let error = ToolClient::builder("lookup_order", HttpMethod::Post, "ftp://chaos/tools/lookup_order")
        .upstream_idempotency(UpstreamIdempotency::Keyed)
        .retry(RetryConfig {
            max_attempts: 0,
            ..RetryConfig::default()
        })
        .concurrency(0)
        .body_limit(0)
        .build(transport.clone())
        .expect_err("refused");
    let InvalidTool::Settings { tool, errors } = &error else {
        panic!("not the rules' refusal: {error}");
    };
    assert_eq!(tool, "lookup_order");
    assert_eq!(
        paths(errors),
        [
            "body_limit",
            "upstream.url",
            "upstream_idempotency",
            "concurrency",
            "retry.max_attempts",
        ],
        "{error}"
    );
    let message = error.to_string();
    assert_eq!(message.lines().count(), 5, "one line per problem:\n{message}");
    assert!(
        message
            .lines()
            .all(|line| line.starts_with(r#"tool "lookup_order": "#)),
        "{message}"
    );
    assert!(
        message.contains(r#"tool "lookup_order": concurrency: 0 must be at least 1"#),
        "{message}"
    );
    assert!(message.contains(r#"upstream_idempotency: "keyed""#), "{message}");

    let error = ModelClient::builder("agent")
        .deployment(DeploymentBuilder::new("not a url"))
        .primary_share(1.5)
        .build(transport.clone())
        .expect_err("refused");
    let InvalidModelRoute::Settings { errors, .. } = &error else {
        panic!("not the rules' refusal: {error}");
    };
    assert_eq!(
        paths(errors),
        ["deployments[0].base_url", "primary_share"],
        "{error}"
    );

    let error = ModelClient::builder("agent")
        .build(transport)
        .expect_err("no deployment");
    assert_eq!(
        error.to_string(),
        r#"model route "agent": deployments: must not be empty"#
    );
}

#[tokio::test(start_paused = true)]
async fn a_built_fallback_tool_answers_for_a_failing_one() {
    let router = ballast_chaos::router(scripted(
        "create_refund",
        EndpointProfile::default(),
        &[("op-f", &[ScriptStep::Status(503), ScriptStep::Status(503)])],
    ));
    let transport = ServiceTransport::new(router);
    let lookup = ToolClient::builder("lookup_order", HttpMethod::Post, LOOKUP_URL)
        .build(transport.clone())
        .expect("valid");
    // A read-only tool on the refund endpoint, so the script applies, falling back to lookup_order.
    let status = ToolClient::builder("refund_status", HttpMethod::Post, REFUND_URL)
        .retry(RetryConfig {
            max_attempts: 2,
            ..RetryConfig::default()
        })
        .fallback_tool(lookup)
        .build(transport)
        .expect("the fallback is a built tool");
    let answer = status
        .call(ToolCall::new(
            json!({"order_id": "1234", "amount": 1, "op": "op-f"}),
        ))
        .await
        .expect("the fallback answers");
    assert_eq!(answer.body()["order_id"], "1234");
    assert_eq!(answer.report.fallback.as_deref(), Some("lookup_order"));
}

#[tokio::test(start_paused = true)]
async fn an_api_key_given_directly_is_sent_and_never_shown() {
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let model = ModelClient::builder("agent")
        .deployment(
            DeploymentBuilder::new("http://primary/v1")
                .model("mock")
                .api_key("sk-direct"),
        )
        .build(upstreams.transport())
        .expect("valid");
    model
        .complete(call(&first_turn("op-k1")))
        .await
        .expect("answered");
    let seen = upstreams.seen();
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-direct");

    let builder = ModelClient::builder("agent")
        .deployment(DeploymentBuilder::new("http://primary/v1").api_key("sk-line\nbreak"));
    assert!(!format!("{builder:?}").contains("sk-line"), "{builder:?}");
    let error = builder.build(upstreams.transport()).expect_err("not a header");
    assert!(matches!(
        error,
        InvalidModelRoute::ApiKeyValue {
            index: 0,
            problem: SecretProblem::NotHeaderValue,
            ..
        }
    ));
    assert!(!error.to_string().contains("sk-line"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn an_api_key_variable_is_read_from_the_given_environment() {
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let env = HashMap::from([("AGENT_KEY".to_owned(), "sk-from-env".to_owned())]);
    let model = ModelClient::builder("agent")
        .deployment(
            DeploymentBuilder::new("http://primary/v1")
                .model("mock")
                .api_key_env("AGENT_KEY"),
        )
        .env(env)
        .build(upstreams.transport())
        .expect("the key is set");
    model
        .complete(call(&first_turn("op-k2")))
        .await
        .expect("answered");
    assert_eq!(upstreams.seen()[0].headers["authorization"], "Bearer sk-from-env");
}

#[tokio::test(start_paused = true)]
async fn chat_clients_from_config_read_the_process_environment_only_for_keys_named() {
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let route = |key: &str| {
        Config::from_toml_str(&format!(
            "version = 1\n[[models]]\nname = \"agent\"\n\
             deployments = [ {{ base_url = \"http://primary/v1\", model = \"mock\" {key} }} ]"
        ))
        .expect("a valid config")
    };
    // No key named: nothing is read, nothing is sent.
    let models = (Clients::from_config(&route("")).build(upstreams.transport()))
        .expect("no key needed")
        .models;
    let agent = models.route("agent").expect("configured");
    agent
        .complete(call(&first_turn("op-e1")))
        .await
        .expect("answered");
    assert!(!upstreams.seen()[0].headers.contains_key("authorization"));

    // A variable every test process has (the tests cannot set one: `set_var` is unsafe, and unsafe is
    // forbidden) is read from the process.
    let path = std::env::var("PATH").expect("PATH is set");
    let models = (Clients::from_config(&route(", api_key_env = \"PATH\"")).build(upstreams.transport()))
        .expect("PATH is set")
        .models;
    let agent = models.route("agent").expect("configured");
    agent
        .complete(call(&first_turn("op-e2")))
        .await
        .expect("answered");
    assert_eq!(
        upstreams.seen()[1].headers["authorization"],
        format!("Bearer {path}")
    );

    let unset = ", api_key_env = \"BALLAST_BUILDERS_TEST_UNSET_KEY\"";
    let error = (Clients::from_config(&route(unset)).build(upstreams.transport())).expect_err("unset");
    assert!(matches!(error, InvalidClients::Model(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "models.agent.deployments[0].api_key_env: environment variable BALLAST_BUILDERS_TEST_UNSET_KEY is not set"
    );
}

#[tokio::test(start_paused = true)]
async fn built_tools_and_models_share_one_registry_of_runs() {
    let runs = Arc::new(Runs::of(&ballast::config::RunConfig::default()));
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let router = ballast_chaos::router(ballast_chaos::Profile::default());
    let tool = ToolClient::builder("lookup_order", HttpMethod::Post, LOOKUP_URL)
        .runs(Arc::clone(&runs))
        .build(ServiceTransport::new(router))
        .expect("valid");
    let model = ModelClient::builder("agent")
        .deployment(DeploymentBuilder::new("http://primary/v1").model("mock"))
        .runs(Arc::clone(&runs))
        .build(upstreams.transport())
        .expect("valid");
    let call_tool = ToolCall::new(json!({"order_id": "1", "op": "op-r1"})).run("run-1");
    tool.call(call_tool).await.expect("answered");
    model
        .complete(call(&first_turn("op-r2")).run("run-1"))
        .await
        .expect("answered");
    assert_eq!(runs.len(), 1, "both clients joined the one run");
    model
        .complete(call(&first_turn("op-r3")).run("run-2"))
        .await
        .expect("answered");
    assert_eq!(runs.len(), 2);
}

/// `Clients::from_config` builds the tools and the models on one registry of runs (its own, unless given one): a
/// run's calls join the one run whichever client makes them.
#[tokio::test(start_paused = true)]
async fn clients_from_one_config_share_one_registry_of_runs() {
    let upstreams = Upstreams::new(&[("primary", profile(""))]);
    let config = Config::from_toml_str(&format!(
        "version = 1\n[[tools]]\nname = \"lookup_order\"\nupstream = {{ method = \"POST\", url = \"{LOOKUP_URL}\" }}\n\
         [[models]]\nname = \"agent\"\ndeployments = [ {{ base_url = \"http://primary/v1\", model = \"mock\" }} ]"
    ))
    .expect("a valid config");
    let chaos = ballast_chaos::router(ballast_chaos::Profile::default());
    // One transport for both: the tool's path goes to the chaos tools, the model's to the chat upstream.
    let chat = upstreams.transport();
    let transport = tower::service_fn(move |request: http::Request<bytes::Bytes>| {
        let (chaos, models) = (chaos.clone(), chat.clone());
        async move {
            use tower::ServiceExt as _;
            if request.uri().path().starts_with("/tools/") {
                ServiceTransport::new(chaos).oneshot(request).await
            } else {
                models.oneshot(request).await
            }
        }
    });
    let clients = Clients::from_config(&config).build(transport).expect("clients");
    let tool = clients.tools.get("lookup_order").expect("configured");
    let model = clients.models.route("agent").expect("configured");
    // Each side's run lands in the one registry the clients hold.
    model
        .complete(call(&first_turn("op-c1")).run("run-1"))
        .await
        .expect("answered");
    assert_eq!(clients.runs.len(), 1, "the model's run is in the shared registry");
    tool.call(ToolCall::new(json!({"order_id": "1", "op": "op-c2"})).run("run-2"))
        .await
        .expect("answered");
    assert_eq!(clients.runs.len(), 2, "the tool's run is in the shared registry");
    tool.call(ToolCall::new(json!({"order_id": "1", "op": "op-c3"})).run("run-1"))
        .await
        .expect("answered");
    assert_eq!(clients.runs.len(), 2, "the tool joined the model's run");

    // Given a registry, both use it.
    let runs = Arc::new(Runs::of(&config.run));
    let given = (Clients::from_config(&config).runs(Arc::clone(&runs)))
        .build(ServiceTransport::new(ballast_chaos::router(
            ballast_chaos::Profile::default(),
        )))
        .expect("clients");
    assert!(Arc::ptr_eq(&given.runs, &runs));
    (given.tools.get("lookup_order").expect("configured"))
        .call(ToolCall::new(json!({"order_id": "1", "op": "op-c4"})).run("run-3"))
        .await
        .expect("answered");
    assert_eq!(runs.len(), 1);
}
