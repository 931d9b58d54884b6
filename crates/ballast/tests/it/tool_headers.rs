//! A tool upstream's own headers (`upstream.headers`): resolved once when the clients are built — from the
//! environment given, or the process's — and sent on every attempt, retries included; a missing variable refused
//! then, naming the tool, the header and the variable; a literal header set in code by the builder, under the
//! same rules. Paused time; a test double that records what each attempt carried.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ballast::config::{Config, SecretProblem};
use ballast::transport::ServiceTransport;
use ballast::{
    Clients, InvalidClients, Runs,
    tool::{ToolCall, ToolClient},
};
use ballast::{config::HttpMethod, tool::InvalidTool};
use bytes::Bytes;
use http_body_util::Full;
use serde_json::json;

const PAY: &str = r#"
    version = 1
    [[tools]]
    name = "process_payment"
    upstream = { method = "POST", url = "http://payments/tools/process_payment", headers = { authorization = { env = "PAYMENTS_TOKEN", prefix = "Bearer " }, X-Api-Version = "2024-01" } }
    per_try_timeout = "1s"
    retry = { max_attempts = 3, base = "10ms", cap = "50ms" }
"#;

/// An upstream that answers 503 to its first `failures` requests and 200 after, keeping every request's headers.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<http::HeaderMap>>>,
    calls: Arc<AtomicUsize>,
}

impl Recorder {
    fn transport(
        &self,
        failures: usize,
    ) -> ServiceTransport<
        impl tower::Service<
            http::Request<Full<Bytes>>,
            Response = http::Response<Full<Bytes>>,
            Error = Infallible,
            Future = impl Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static,
    > {
        let this = self.clone();
        ServiceTransport::new(tower::service_fn(move |request: http::Request<Full<Bytes>>| {
            let this = this.clone();
            async move {
                this.seen
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(request.headers().clone());
                let n = this.calls.fetch_add(1, Ordering::SeqCst);
                let (status, body) = if n < failures {
                    (503, r#"{"error": "busy"}"#)
                } else {
                    (200, r#"{"paid": true}"#)
                };
                let response = http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from_static(body.as_bytes())))
                    .expect("a valid response");
                Ok::<_, Infallible>(response)
            }
        }))
    }

    fn seen(&self) -> Vec<http::HeaderMap> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn runs(config: &Config) -> Arc<Runs> {
    Arc::new(Runs::of(&config.run))
}

#[tokio::test(start_paused = true)]
async fn headers_from_the_environment_reach_the_upstream_on_every_attempt() {
    let config = Config::from_toml_str(PAY).expect("valid");
    let upstream = Recorder::default();
    let secrets = env(&[("PAYMENTS_TOKEN", "tok-secret-123")]);
    let tools = (Clients::from_config(&config).env(&secrets).runs(runs(&config)))
        .build(upstream.transport(2))
        .expect("the variable is set")
        .tools;
    assert!(
        !format!("{tools:?}").contains("tok-secret"),
        "the secret is never shown"
    );
    let answer = tools
        .get("process_payment")
        .expect("configured")
        .call(ToolCall::new(json!({"amount": 10})))
        .await
        .expect("the third attempt answers");
    assert_eq!(answer.body()["paid"], true);

    let seen = upstream.seen();
    assert_eq!(seen.len(), 3, "two 503s and the answer");
    for (attempt, headers) in seen.iter().enumerate() {
        assert_eq!(
            headers["authorization"], "Bearer tok-secret-123",
            "attempt {attempt}"
        );
        assert_eq!(headers["x-api-version"], "2024-01", "attempt {attempt}");
        assert_eq!(headers["content-type"], "application/json", "Ballast's own stay");
    }
}

#[test]
fn a_missing_variable_is_refused_naming_the_tool_the_header_and_the_variable() {
    let config = Config::from_toml_str(PAY).expect("valid");
    let upstream = Recorder::default();
    for (secrets, problem, says) in [
        (env(&[]), SecretProblem::Unset, "is not set"),
        (env(&[("PAYMENTS_TOKEN", "")]), SecretProblem::Empty, "is empty"),
        (
            env(&[("PAYMENTS_TOKEN", "tok\r\nx-evil: 1")]),
            SecretProblem::NotHeaderValue,
            "holds characters an HTTP header cannot carry",
        ),
    ] {
        let error = (Clients::from_config(&config).env(&secrets).runs(runs(&config)))
            .build(upstream.transport(0))
            .expect_err("refused");
        let InvalidClients::Tool(InvalidTool::MissingSecret {
            tool,
            header,
            env,
            problem: found,
        }) = &error
        else {
            panic!("not a missing secret: {error}");
        };
        assert_eq!(
            (tool.as_str(), header.as_str(), env.as_str(), *found),
            ("process_payment", "authorization", "PAYMENTS_TOKEN", problem)
        );
        assert_eq!(
            error.to_string(),
            format!(
                "tools.process_payment.upstream.headers.authorization.env: environment variable PAYMENTS_TOKEN {says}"
            )
        );
        assert!(!error.to_string().contains("evil"), "{error}");
    }
    assert!(upstream.seen().is_empty(), "nothing was sent");

    // `Clients::from_config` reads the process environment, which does not hold this one.
    let unset = PAY.replace("PAYMENTS_TOKEN", "BALLAST_TOOL_HEADERS_TEST_UNSET");
    let config = Config::from_toml_str(&unset).expect("valid");
    let error = Clients::from_config(&config)
        .build(upstream.transport(0))
        .expect_err("unset");
    assert!(
        matches!(&error, InvalidClients::Tool(InvalidTool::MissingSecret { env, .. }) if env == "BALLAST_TOOL_HEADERS_TEST_UNSET"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_builders_header_is_sent_on_every_attempt() {
    let upstream = Recorder::default();
    let tool = ToolClient::builder(
        "process_payment",
        HttpMethod::Post,
        "http://payments/tools/process_payment",
    )
    .upstream_header("X-Api-Version", "2024-01")
    .upstream_header("x-tenant", "acme")
    .build(upstream.transport(1))
    .expect("valid headers");
    let names: Vec<&str> = (tool.config().upstream.headers.iter())
        .map(|h| h.name.as_str())
        .collect();
    assert_eq!(names, ["x-api-version", "x-tenant"], "lower case, in order");
    tool.call(ToolCall::new(json!({"amount": 1})))
        .await
        .expect("the retry answers");
    let seen = upstream.seen();
    assert_eq!(seen.len(), 2);
    for headers in &seen {
        assert_eq!(headers["x-api-version"], "2024-01");
        assert_eq!(headers["x-tenant"], "acme");
    }
}

#[test]
fn a_builders_header_is_checked_at_build_by_the_configs_rules() {
    let upstream = Recorder::default();
    let error = ToolClient::builder(
        "process_payment",
        HttpMethod::Post,
        "http://payments/tools/process_payment",
    )
    .upstream_header("authorization", "Bearer sk-live-123")
    .upstream_header("Content-Type", "text/plain")
    .upstream_header("x-note", "line\nbreak")
    .build(upstream.transport(0))
    .expect_err("refused");
    let InvalidTool::Settings { errors, .. } = &error else {
        panic!("not the rules' refusal: {error}");
    };
    let paths: Vec<&str> = errors.errors().iter().filter_map(|e| e.path()).collect();
    assert_eq!(
        paths,
        [
            "upstream.headers.authorization",
            "upstream.headers.Content-Type",
            "upstream.headers.x-note",
        ],
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("secrets belong in the environment"), "{message}");
    assert!(!message.contains("sk-live"), "{message}");
}
