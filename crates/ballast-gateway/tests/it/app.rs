//! The gateway as a plain axum `Router` in process (`app(gateway)`, driven with `oneshot`), its tools sent to the
//! chaos router through `ServiceTransport`: what an embedding application or a quick test does.

use std::collections::HashMap;

use ballast::transport::ServiceTransport;
use ballast_config::Config;
use ballast_gateway::{Gateway, app};
use ballast_testkit::{ConfigText, deployment};
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

/// A tool and a model route, both at the chaos router.
fn config() -> Config {
    let text = ConfigText::new()
        .tool(
            "lookup_order",
            "http://chaos/tools/lookup_order",
            "per_try_timeout = \"1s\"",
        )
        .model("agent", &[deployment("http://chaos/v1", "mock")], "")
        .build();
    Config::from_toml_str(&text).expect("a valid config")
}

async fn gateway() -> axum::Router {
    let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
    let env: HashMap<String, String> = HashMap::new();
    let gateway = Gateway::open_with_transport(config(), &env, transport)
        .await
        .expect("the gateway opens");
    app(gateway).expect("the router")
}

async fn send(
    router: &axum::Router,
    request: Request<axum::body::Body>,
) -> (StatusCode, http::HeaderMap, Value) {
    let response = router.clone().oneshot(request).await.expect("an answer");
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("a body").to_bytes();
    (
        parts.status,
        parts.headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_tool_call_through_the_router_carries_the_gateways_headers() {
    let router = gateway().await;
    let request = Request::post("/v1/tools/lookup_order")
        .header("content-type", "application/json")
        .header("ballast-timeout-ms", "5000")
        .body(axum::body::Body::from(json!({"order_id": "1234"}).to_string()))
        .unwrap();
    let (status, headers, body) = send(&router, request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["order_id"], "1234");
    assert_eq!(headers["ballast-attempts"], "1");
    let remaining: u64 = headers["ballast-remaining-ms"].to_str().unwrap().parse().unwrap();
    assert!(remaining <= 5000);
    assert!(headers.contains_key("x-request-id"));
}

#[tokio::test]
async fn readiness_fails_once_draining_and_liveness_does_not() {
    let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
    let gateway = Gateway::open_with_transport(config(), &HashMap::<String, String>::new(), transport)
        .await
        .expect("opens");
    let router = app(gateway.clone()).expect("the router");
    let get = |path: &str| Request::get(path).body(axum::body::Body::empty()).unwrap();
    assert_eq!(send(&router, get("/readyz")).await.0, StatusCode::OK);
    gateway.start_draining();
    let (status, _, body) = send(&router, get("/readyz")).await;
    assert_eq!(
        (status, &body["status"]),
        (StatusCode::SERVICE_UNAVAILABLE, &json!("draining"))
    );
    assert_eq!(
        send(&router, get("/healthz")).await.0,
        StatusCode::OK,
        "alive while draining"
    );
}

/// A tool's answer goes on as the upstream sent it, bytes untouched: JSON as `application/json` (a JSON string
/// included), anything else as text, an empty body as empty JSON — decided without parsing it into a value.
/// Regression: an upstream's non-JSON answer lost its content type (it became `text/plain`). An answer's type is
/// the upstream's; one that names none is named from its bytes.
#[tokio::test]
async fn a_tool_answer_goes_on_as_it_came_with_its_content_type() {
    use axum::response::IntoResponse;
    fn typed(content_type: &'static str, body: &'static str) -> axum::response::Response {
        ([(http::header::CONTENT_TYPE, content_type)], body).into_response()
    }
    fn untyped(body: &'static str) -> axum::response::Response {
        let mut response = body.into_response();
        response.headers_mut().remove(http::header::CONTENT_TYPE);
        response
    }
    let upstream = axum::Router::new()
        .route(
            "/tools/text",
            axum::routing::post(|| async { "refunded, thanks" }),
        )
        .route(
            "/tools/xml",
            axum::routing::post(|| async { typed("application/xml", "<refund id=\"r-1\"/>") }),
        )
        .route(
            "/tools/object",
            axum::routing::post(|| async { typed("application/json", r#"{"refund": "r-1"}"#) }),
        )
        .route(
            "/tools/string",
            axum::routing::post(|| async { untyped(" \"a JSON string\"") }),
        )
        .route(
            "/tools/broken",
            axum::routing::post(|| async { untyped(r#"{"refund": "#) }),
        )
        .route("/tools/empty", axum::routing::post(|| async { untyped("") }));
    let mut config = ConfigText::new();
    for tool in ["text", "xml", "object", "string", "broken", "empty"] {
        config = config.tool(tool, &format!("http://up/tools/{tool}"), "");
    }
    let config = Config::from_toml_str(&config.build()).expect("a valid config");
    let env: HashMap<String, String> = HashMap::new();
    let gateway = Gateway::open_with_transport(config, &env, ServiceTransport::new(upstream))
        .await
        .expect("the gateway opens");
    let router = app(gateway).expect("the router");
    for (tool, content_type, body) in [
        ("text", "text/plain; charset=utf-8", "refunded, thanks"),
        ("xml", "application/xml", "<refund id=\"r-1\"/>"),
        ("object", "application/json", r#"{"refund": "r-1"}"#),
        ("string", "application/json", " \"a JSON string\""),
        ("broken", "text/plain; charset=utf-8", r#"{"refund": "#),
        ("empty", "application/json", ""),
    ] {
        let request = Request::post(format!("/v1/tools/{tool}"))
            .header("content-type", "application/json")
            .body(axum::body::Body::from("{}"))
            .unwrap();
        let response = router.clone().oneshot(request).await.expect("an answer");
        assert_eq!(response.status(), StatusCode::OK, "{tool}");
        assert_eq!(response.headers()["content-type"], content_type, "{tool}");
        let bytes = response.into_body().collect().await.expect("a body").to_bytes();
        assert_eq!(bytes, body.as_bytes(), "{tool}");
    }
}

/// `GET /v1/models/{id}` is a route's model object (`models.retrieve`); every 404 under `/v1/` but Ballast's own
/// tool and operation paths is OpenAI's error envelope, so an SDK shows its code and message; elsewhere
/// problem+json.
#[tokio::test]
async fn models_are_retrieved_and_a_404_under_v1_is_openai_style() {
    let router = gateway().await;
    let get = |path: &str| Request::get(path).body(axum::body::Body::empty()).unwrap();
    let (status, _, model) = send(&router, get("/v1/models/agent")).await;
    assert_eq!(status, StatusCode::OK, "{model}");
    assert_eq!(
        model,
        json!({"id": "agent", "object": "model", "created": 0, "owned_by": "ballast",
               "type": "model", "display_name": "agent", "created_at": "1970-01-01T00:00:00Z"}),
        "OpenAI's model object and Anthropic's"
    );
    let (_, _, list) = send(&router, get("/v1/models")).await;
    assert_eq!(list["object"], "list");
    assert_eq!(
        (&list["has_more"], &list["first_id"]),
        (&json!(false), &json!("agent")),
        "{list}"
    );
    assert_eq!(list["data"][0], model);
    let (status, _, body) = send(&router, get("/v1/models/gpt-5")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::NOT_FOUND, &json!("model_not_found")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the models are: agent"),
        "{body}"
    );
    // A name with slashes is a name: no route has it.
    let (_, _, body) = send(&router, get("/v1/models/agent/extra")).await;
    assert_eq!(body["error"]["code"], "model_not_found", "{body}");
    for path in ["/v1/no-such-path", "/v1/completions"] {
        let (status, headers, body) = send(&router, get(path)).await;
        let code = &body["error"]["code"];
        assert_eq!(
            (status, code),
            (StatusCode::NOT_FOUND, &json!("not_found")),
            "{path}: {body}"
        );
        assert_eq!(headers["content-type"], "application/json", "{path}");
    }
    for path in ["/v1/tools/lookup_order/x", "/nothing"] {
        let (status, headers, body) = send(&router, get(path)).await;
        assert_eq!(
            (status, &body["type"]),
            (StatusCode::NOT_FOUND, &json!("urn:ballast:not_found")),
            "{path}: {body}"
        );
        assert_eq!(headers["content-type"], "application/problem+json", "{path}");
    }
}
