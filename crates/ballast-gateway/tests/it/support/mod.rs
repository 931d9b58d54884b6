//! What the gateway's in-process tests share: the gateway of a config over upstreams in this process (chaos routers
//! or any axum `Router`, one per host of the config's URLs), requests sent with `oneshot`, answers read as JSON or
//! as server-sent events, what a chaos upstream saw, and the process's one Prometheus recorder.

// Each test file uses its own part of the fixtures.
#![allow(dead_code)]

pub(crate) mod metrics;
pub(crate) mod models;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use ballast::transport::ServiceTransport;
use ballast_config::Config;
use ballast_testkit::Sse;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt as _, Full};
use serde_json::Value;
use tower::ServiceExt as _;

/// The longest any bounded wait of these tests lasts.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// An upstream in this process: a chaos router, or any router a test writes. Clones share its state (a chaos
/// router's ledger and stats).
#[derive(Clone)]
pub(crate) struct Upstream(Router);

impl Upstream {
    /// The chaos upstream with the profile `toml`.
    pub(crate) fn chaos(toml: &str) -> Upstream {
        let profile = ballast_chaos::Profile::from_toml_str(toml).expect("a valid chaos profile");
        Upstream(ballast_chaos::router(profile))
    }

    /// `router` as an upstream.
    pub(crate) fn router(router: Router) -> Upstream {
        Upstream(router)
    }

    /// `GET path` of this upstream, as JSON (a chaos router's `/stats` and `/ledger`).
    pub(crate) async fn get_json(&self, path: &str) -> Value {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let response = self.0.clone().oneshot(request).await.expect("an answer");
        let bytes = response.into_body().collect().await.expect("a body").to_bytes();
        serde_json::from_slice(&bytes).expect("JSON")
    }

    /// The chaos upstream's `/stats`.
    pub(crate) async fn stats(&self) -> Value {
        self.get_json("/stats").await
    }

    /// The executions the chaos ledger recorded for `op`.
    pub(crate) async fn executions(&self, op: &str) -> u64 {
        self.get_json("/ledger").await["ops"][op]["executions"]
            .as_u64()
            .unwrap_or(0)
    }
}

/// The upstreams by host: each request the gateway sends goes to the router of its URL's host.
#[derive(Clone)]
struct ByHost(Arc<HashMap<String, Router>>);

impl ByHost {
    fn new(upstreams: &[(&str, &Upstream)]) -> ByHost {
        let routers = upstreams
            .iter()
            .map(|(host, upstream)| ((*host).to_owned(), upstream.0.clone()))
            .collect();
        ByHost(Arc::new(routers))
    }
}

impl tower::Service<Request<Full<Bytes>>> for ByHost {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        let host = request.uri().host().unwrap_or_default();
        let router = (self.0.get(host))
            .unwrap_or_else(|| panic!("no upstream at host {host:?}"))
            .clone();
        Box::pin(router.oneshot(request))
    }
}

/// The gateway under test: its router.
#[derive(Clone)]
pub(crate) struct Gateway {
    pub(crate) router: Router,
}

impl Gateway {
    /// The gateway of `config` whose URLs' host `chaos` is `upstream`, with the environment `env`.
    pub(crate) async fn start(config: &str, upstream: &Upstream, env: &[(&str, &str)]) -> Gateway {
        Gateway::start_with(config, &[("chaos", upstream)], env).await
    }

    /// The gateway of `config` over `upstreams` (by the host of the config's URLs), with the environment `env`.
    pub(crate) async fn start_with(
        config: &str,
        upstreams: &[(&str, &Upstream)],
        env: &[(&str, &str)],
    ) -> Gateway {
        Gateway::opened(config, upstreams, env, None).await
    }

    /// [`Gateway::start_with`], its metrics recorded by the process's recorder and rendered at `/metrics`
    /// ([`metrics`]). The config's tool and route names are the test's own: other tests record into the same
    /// recorder.
    pub(crate) async fn metered(
        config: &str,
        upstreams: &[(&str, &Upstream)],
        env: &[(&str, &str)],
    ) -> Gateway {
        // Installed before the gateway is opened: its clients register their handles with the recorder of then.
        let handle = metrics::handle();
        Gateway::opened(config, upstreams, env, Some(handle)).await
    }

    async fn opened(
        config: &str,
        upstreams: &[(&str, &Upstream)],
        env: &[(&str, &str)],
        metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    ) -> Gateway {
        let config = Config::from_toml_str(config).unwrap_or_else(|e| panic!("{e}\n{config}"));
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let transport =
            ServiceTransport::new(ByHost::new(upstreams)).with_body_limit(config.server.body_limit);
        let mut state = ballast_gateway::Gateway::open_with_transport(config, &env, transport)
            .await
            .expect("the gateway opens");
        if let Some(handle) = metrics {
            state = state.with_metrics(handle);
        }
        let router = ballast_gateway::app(state).expect("the router");
        Gateway { router }
    }

    /// Sends `request` to the router; its answer, body unread.
    pub(crate) async fn send(&self, request: Request<Body>) -> Response<Body> {
        self.router.clone().oneshot(request).await.expect("an answer")
    }

    /// `method path` with `headers` and `body` (raw bytes, no content type unless given).
    pub(crate) async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &[u8])],
        body: impl Into<Body>,
    ) -> Response<Body> {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            let value = http::HeaderValue::from_bytes(value).expect("a raw header value");
            request = request.header(*name, value);
        }
        self.send(request.body(body.into()).unwrap()).await
    }

    /// `POST path` with a JSON `body` and `headers`.
    pub(crate) async fn post(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> Response<Body> {
        let mut request = Request::post(path).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(Body::from(body.to_string())).unwrap())
            .await
    }

    /// `POST /v1/tools/{tool}` with a JSON `body` and `headers`.
    pub(crate) async fn call(&self, tool: &str, body: &Value, headers: &[(&str, &str)]) -> Response<Body> {
        self.post(&format!("/v1/tools/{tool}"), body, headers).await
    }

    /// `method path` with `headers` and no body.
    pub(crate) async fn without_body(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Response<Body> {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    /// `GET path` as JSON.
    pub(crate) async fn get_json(&self, path: &str) -> Value {
        read(self.without_body(Method::GET, path, &[]).await).await.2
    }

    /// `GET path` as JSON, with `authorization` (e.g. `Bearer <key>`).
    pub(crate) async fn get_json_with(&self, path: &str, authorization: &str) -> Value {
        let headers = [("authorization", authorization)];
        read(self.without_body(Method::GET, path, &headers).await).await.2
    }

    /// The gateway's `/metrics` text.
    pub(crate) async fn metrics(&self) -> String {
        let response = self.without_body(Method::GET, "/metrics", &[]).await;
        let bytes = response.into_body().collect().await.expect("a body").to_bytes();
        String::from_utf8(bytes.to_vec()).expect("text")
    }
}

/// An answer's status, headers and JSON body (a JSON string of its text when it is not JSON).
pub(crate) async fn read(response: Response<Body>) -> (u16, HeaderMap, Value) {
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("a body").to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (parts.status.as_u16(), parts.headers, body)
}

/// An answer's body as text.
pub(crate) async fn text(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.expect("a body").to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A header's value as text (`""` when absent).
pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The server-sent events of a streamed answer, read to its end (or its failure): each event's name (`message`
/// when it has none) and its data as JSON (a JSON string when it is not JSON, as `[DONE]`); and whether the body
/// ended cleanly.
pub(crate) async fn events(response: Response<Body>) -> (Vec<(String, Value)>, bool) {
    // A body that fails is no events at all, as an HTTP client's reader sees it.
    let (text, whole) = match response.into_body().collect().await {
        Ok(collected) => (String::from_utf8_lossy(&collected.to_bytes()).into_owned(), true),
        Err(_) => (String::new(), false),
    };
    let events = (ballast_testkit::server_sent_events(&text).into_iter())
        .filter_map(|event| match event {
            Sse::Event { name, data } if !data.is_empty() => {
                let value = serde_json::from_str(&data).unwrap_or(Value::String(data));
                Some((name.unwrap_or_else(|| "message".to_owned()), value))
            }
            _ => None,
        })
        .collect();
    (events, whole)
}

/// Polls `check` until it gives `Some`, at most [`PATIENCE`]; panics with `what` otherwise (the test kit's poll).
pub(crate) async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    ballast_testkit::eventually(PATIENCE, what, check).await
}
