//! The request's span as a log reader sees it, through the process's global subscriber (this binary's only test:
//! `main.rs` says why). It reads only the lines of its own request all the same.

use std::collections::HashMap;

use ballast::transport::ServiceTransport;
use ballast_config::Config;
use ballast_gateway::{Gateway, app};
use ballast_testkit::ConfigText;
use http::{Request, StatusCode};
use tower::ServiceExt as _;

/// A log line's buffer.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every line of a request is in its `ballast.request` span — its id (the caller's `x-request-id`), method, path
/// and status — and the tool call's `ballast.call` span is inside it.
#[tokio::test]
async fn a_requests_log_lines_carry_its_id_method_path_and_status() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this test binary");
    let config = ConfigText::new()
        .tool(
            "lookup_order",
            "http://chaos/tools/lookup_order",
            "per_try_timeout = \"1s\"",
        )
        .build();
    let config = Config::from_toml_str(&config).expect("a valid config");
    let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
    let gateway = Gateway::open_with_transport(config, &HashMap::<String, String>::new(), transport)
        .await
        .expect("the gateway opens");
    let router = app(gateway).expect("the router");
    let request = Request::post("/v1/tools/lookup_order")
        .header("x-request-id", "req-42")
        .body(axum::body::Body::from(r#"{"order_id": "1234"}"#))
        .unwrap();
    let response = router.oneshot(request).await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["x-request-id"], "req-42");
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    // The subscriber sees every test's spans: only the lines of this request (`req-42`) are this test's.
    let closed = |span: &str| {
        text.lines()
            .find(|line| {
                line.contains(span) && line.contains(" close ") && line.contains("request_id=req-42 ")
            })
            .unwrap_or_else(|| panic!("{span} closed within req-42's span: {text}"))
            .to_owned()
    };
    let request = "ballast.request{request_id=req-42 method=POST path=/v1/tools/lookup_order";
    assert!(
        closed("ballast.call{").contains(&format!("{request}}}:ballast.call{{")),
        "the call's span is inside the request's: {text}"
    );
    let request_closed = format!("{request} status=200}}: ");
    assert!(
        text.lines()
            .any(|line| line.contains(&request_closed) && line.contains(" close ")),
        "the status is recorded on the request's span: {text}"
    );
}
