//! Requests to a bare `router(profile)` in process (`tower::ServiceExt::oneshot`), for tests on paused time, and
//! the server-sent events of a streamed answer read back.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
pub(crate) use ballast_testkit::Sse;
use futures::StreamExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

/// What came back: the status, the headers, the body as far as it went, and whether it ended in an error (a cut).
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) text: String,
    pub(crate) failed: bool,
}

impl Reply {
    /// The body as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    /// The body as server-sent events.
    pub(crate) fn events(&self) -> Vec<Sse> {
        ballast_testkit::server_sent_events(&self.text)
    }
}

/// Sends `method path` with `body` (JSON) and `headers` to `router`, and reads the whole answer.
pub(crate) async fn send(
    router: &Router,
    method: &str,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = match body {
        Some(json) => {
            request = request.header("content-type", "application/json");
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    let response = router
        .clone()
        .oneshot(request.body(body).expect("a request"))
        .await
        .expect("the router answers");
    let (status, headers) = (response.status(), response.headers().clone());
    let mut text = String::new();
    let mut failed = false;
    let mut frames = response.into_body().into_data_stream();
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    Reply {
        status,
        headers,
        text,
        failed,
    }
}

/// `POST path` with `body`.
pub(crate) async fn post(router: &Router, path: &str, body: &Value) -> Reply {
    send(router, "POST", path, Some(body), &[]).await
}

/// `GET path`.
pub(crate) async fn get(router: &Router, path: &str) -> Reply {
    send(router, "GET", path, None, &[]).await
}
