//! Fixtures of the ModelClient tests: one chaos upstream per deployment host, in process, with a record of every
//! request each received; a route configured over them; agent conversations.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use ballast::model::{ChatCall, ResponsesCall, ResponsesRequest};
use ballast::{
    Clients, Runs,
    model::{ChatRequest, ModelClient},
    transport::ServiceTransport,
};
use ballast_chaos::Profile;
use ballast_config::Config;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use super::BODY_LIMIT;

/// The environment variable of the primary deployment's key, and its value in the tests.
pub(crate) const PRIMARY_KEY: (&str, &str) = ("PRIMARY_KEY", "sk-primary-test");

/// A request a chaos upstream received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// The host it was sent to (`primary`, `fallback`).
    pub(crate) host: String,
    /// Its method.
    pub(crate) method: http::Method,
    /// Its path.
    pub(crate) path: String,
    /// Its headers.
    pub(crate) headers: http::HeaderMap,
    /// Its JSON body.
    pub(crate) body: Value,
}

impl Seen {
    /// `GET /v1/responses/resp_1`.
    pub(crate) fn method_and_path(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// Chaos upstreams by host, and what they received.
#[derive(Clone)]
pub(crate) struct Upstreams {
    seen: Arc<Mutex<Vec<Seen>>>,
    routers: Arc<HashMap<String, Router>>,
}

impl Upstreams {
    /// A chaos router per `(host, profile)`.
    pub(crate) fn new(hosts: &[(&str, Profile)]) -> Self {
        let routers = hosts
            .iter()
            .map(|(host, profile)| ((*host).to_owned(), ballast_chaos::router(profile.clone())))
            .collect();
        Upstreams {
            seen: Arc::default(),
            routers: Arc::new(routers),
        }
    }

    /// A transport that hands each request to the router of its URI's host, recording it first.
    pub(crate) fn transport(
        &self,
    ) -> impl tower::Service<
        http::Request<Bytes>,
        Response = http::Response<ballast::Body>,
        Error = ballast::Error,
        Future = impl Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static {
        let this = self.clone();
        let service = tower::service_fn(move |request: http::Request<Full<Bytes>>| {
            let this = this.clone();
            async move {
                let host = request.uri().host().unwrap_or_default().to_owned();
                let (parts, body) = request.into_parts();
                let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                this.seen
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Seen {
                        host: host.clone(),
                        method: parts.method.clone(),
                        path: parts.uri.path().to_owned(),
                        headers: parts.headers.clone(),
                        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                    });
                let router = this.routers.get(&host).expect("a host the test set up").clone();
                let response = router
                    .oneshot(http::Request::from_parts(parts, Full::new(bytes)))
                    .await;
                Ok::<_, Infallible>(response.unwrap_or_else(|never| match never {}))
            }
        });
        ServiceTransport::new(service).with_body_limit(BODY_LIMIT)
    }

    /// Every request received so far, in order.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many requests `host` received.
    pub(crate) fn count(&self, host: &str) -> usize {
        self.seen().iter().filter(|s| s.host == host).count()
    }
}

/// A chaos profile from TOML (seed 4 unless it says otherwise).
pub(crate) fn profile(toml: &str) -> Profile {
    Profile::from_toml_str(&format!("seed = 4\n{toml}")).expect("a valid chaos profile")
}

/// A config with route `agent` over `primary` (model `mock`, key from [`PRIMARY_KEY`]) and `fallback` (model
/// `gpt-4.1`, no key), and the route's `extra` TOML keys.
pub(crate) fn config(extra: &str) -> Config {
    Config::from_toml_str(&format!(
        r#"
version = 1
[server]
default_timeout = "10s"
[[models]]
name = "agent"
deployments = [
  {{ base_url = "http://primary/v1", model = "mock", api_key_env = "{}" }},
  {{ base_url = "http://fallback/v1", model = "gpt-4.1" }},
]
{extra}
"#,
        PRIMARY_KEY.0
    ))
    .expect("a valid config")
}

/// A config with route `agent` over `primary` and `fallback`, as [`config`]'s, each deployment speaking the APIs
/// of `apis` (by index).
pub(crate) fn config_with_apis(apis: &[&[&str]; 2]) -> Config {
    let list = |apis: &[&str]| {
        let names: Vec<String> = apis.iter().map(|api| format!("\"{api}\"")).collect();
        names.join(", ")
    };
    Config::from_toml_str(&format!(
        r#"
version = 1
[server]
default_timeout = "10s"
[[models]]
name = "agent"
deployments = [
  {{ base_url = "http://primary/v1", model = "mock", api_key_env = "{}", api = [{}] }},
  {{ base_url = "http://fallback/v1", model = "gpt-4.1", api = [{}] }},
]
"#,
        PRIMARY_KEY.0,
        list(apis[0]),
        list(apis[1]),
    ))
    .expect("a valid config")
}

/// The `agent` route's client over `upstreams`.
pub(crate) fn client(config: &Config, upstreams: &Upstreams) -> ModelClient {
    let runs = Arc::new(Runs::new(config.run.retry_allowance, config.run.ttl));
    client_with_runs(config, upstreams, runs)
}

/// The `agent` route's client over `upstreams`, its records of provider state kept in `records`.
pub(crate) fn client_with_records(
    config: &Config,
    upstreams: &Upstreams,
    records: Arc<dyn ballast::model::StateRecords>,
) -> ModelClient {
    let env: HashMap<String, String> = HashMap::from([(PRIMARY_KEY.0.to_owned(), PRIMARY_KEY.1.to_owned())]);
    let runs = Arc::new(Runs::new(config.run.retry_allowance, config.run.ttl));
    let clients = (Clients::from_config(config)
        .env(&env)
        .runs(runs)
        .state_records(records))
    .build(upstreams.transport())
    .expect("the route builds")
    .models;
    clients.get("agent").expect("the agent route").clone()
}

/// The `agent` route's client over `upstreams`, its runs kept in `runs`.
pub(crate) fn client_with_runs(config: &Config, upstreams: &Upstreams, runs: Arc<Runs>) -> ModelClient {
    let env: HashMap<String, String> = HashMap::from([(PRIMARY_KEY.0.to_owned(), PRIMARY_KEY.1.to_owned())]);
    let clients = (Clients::from_config(config).env(&env).runs(runs))
        .build(upstreams.transport())
        .expect("the route builds")
        .models;
    clients.get("agent").expect("the agent route").clone()
}

/// The first turn of an agent request for operation `op`.
pub(crate) fn first_turn(op: &str) -> Value {
    json!({
        "model": "agent",
        "messages": [
            {"role": "developer", "content": "You handle refunds."},
            {"role": "user", "content": format!("Refund order 1234, op={op}")},
        ],
    })
}

/// A call of `body` (a chat-completions request as JSON).
pub(crate) fn call(body: &Value) -> ChatCall {
    let request: ChatRequest = serde_json::from_value(body.clone()).expect("a chat request");
    ChatCall::new(request)
}

/// The first turn of an agent request for operation `op`, through the Responses API.
pub(crate) fn first_response_turn(op: &str) -> Value {
    json!({
        "model": "agent",
        "instructions": "You handle refunds.",
        "input": [{"role": "user", "content": format!("Refund order 1234, op={op}")}],
    })
}

/// A Responses call of `body` (a Responses request as JSON).
pub(crate) fn respond_call(body: &Value) -> ResponsesCall {
    let request: ResponsesRequest = serde_json::from_value(body.clone()).expect("a Responses request");
    ResponsesCall::new(request)
}
