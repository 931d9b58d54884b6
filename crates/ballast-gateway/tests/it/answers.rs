//! Answers that say what happened, to a careless or hostile caller and from an odd upstream: an empty body is
//! `{}`, a percent-encoded tool name is told so, a deadline beyond 64 bits is capped, refusals carry their attempts
//! and deadline, a status outside HTTP's is a 502, a member named twice or two `Authorization` headers are refused
//! as documented. (Slow bodies and connections are the binary's: `ballast-cli`'s `serve_open_network`.)

use axum::response::IntoResponse as _;
use axum::routing::post;
use ballast_testkit::ConfigText;
use http::{Method, StatusCode};
use serde_json::json;

use crate::support::{Gateway, Upstream, header, read, text};

const DEV: &str = "Bearer dev-secret";

/// One principal and tools for the answers' tests: a side-effecting echo, a read-only echo, a read-only tool whose
/// upstream answers status 999 (`odd`), and one whose upstream answers XML (`xml`).
async fn start() -> Gateway {
    let odd = axum::Router::new().route(
        "/",
        post(|| async { (StatusCode::from_u16(999).unwrap(), "{}").into_response() }),
    );
    let xml = axum::Router::new().route(
        "/",
        post(|| async { ([("content-type", "application/xml")], "<refund id=\"r1\"/>\n").into_response() }),
    );
    let config = ConfigText::new()
        .principal("dev", "TEST_DEV_KEY")
        .tool(
            "echo_write",
            "http://chaos/echo",
            "side_effects = true\nper_try_timeout = \"2s\"",
        )
        .tool("echo", "http://chaos/echo", "per_try_timeout = \"2s\"")
        .tool(
            "odd_status",
            "http://odd/",
            "per_try_timeout = \"1s\"\nretry = { max_attempts = 1 }",
        )
        .tool("xml", "http://xml/", "per_try_timeout = \"1s\"")
        .build();
    let upstreams = [
        ("chaos", &Upstream::chaos("")),
        ("odd", &Upstream::router(odd)),
        ("xml", &Upstream::router(xml)),
    ];
    Gateway::start_with(&config, &upstreams, &[("TEST_DEV_KEY", "dev-secret")]).await
}

/// Regression: an empty body and `{}` under one key answered 422, though an empty body is `{}`.
#[tokio::test]
async fn an_empty_body_and_an_empty_object_are_one_request_under_one_key() {
    let gateway = start().await;
    let auth: &[u8] = DEV.as_bytes();
    let (status, headers, first) = read(
        gateway
            .request(
                Method::POST,
                "/v1/tools/echo_write",
                &[("authorization", auth), ("idempotency-key", b"k-empty")],
                "",
            )
            .await,
    )
    .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["raw"], "{}", "the upstream is sent the arguments as read");
    assert_eq!(header(&headers, "idempotent-replayed"), "");
    let (status, headers, again) = read(
        gateway
            .request(
                Method::POST,
                "/v1/tools/echo_write",
                &[
                    ("authorization", auth),
                    ("idempotency-key", b"k-empty"),
                    ("content-type", b"application/json"),
                ],
                "{}",
            )
            .await,
    )
    .await;
    assert_eq!(
        (status, header(&headers, "idempotent-replayed")),
        (200, "true"),
        "{again}"
    );
    assert_eq!(again, first);
}

/// Regression: `/v1/tools/lookup%5Forder` answered "no tool named lookup_order" and listed lookup_order.
#[tokio::test]
async fn a_tool_name_percent_encoded_is_told_so_not_called_unknown() {
    let gateway = start().await;
    let (status, headers, body) = read(
        gateway
            .post("/v1/tools/echo%5Fwrite", &json!({}), &[("authorization", DEV)])
            .await,
    )
    .await;
    assert_eq!((status, header(&headers, "ballast-code")), (404, "unknown_tool"));
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("percent-encoded") && detail.contains("/v1/tools/echo_write"),
        "{detail}"
    );
    assert!(!detail.contains("no tool named"), "{detail}");
}

/// Regression: a `ballast-timeout-ms` beyond 64 bits was told it is "not a whole number".
#[tokio::test]
async fn a_deadline_beyond_64_bits_is_the_longest_one_capped() {
    let gateway = start().await;
    let headers = [
        ("authorization", DEV),
        ("ballast-timeout-ms", "99999999999999999999999"),
    ];
    let (status, headers, body) = read(gateway.call("echo", &json!({}), &headers).await).await;
    assert_eq!(status, 200, "{body}");
    let remaining: u64 = header(&headers, "ballast-remaining-ms").parse().unwrap();
    assert!(
        (290_000..=300_000).contains(&remaining),
        "capped by max_timeout: {remaining}"
    );
}

/// Regression: 400 and 504 answers lacked `ballast-remaining-ms` and `ballast-attempts`. Paused time: what is left
/// of a deadline is exact.
#[tokio::test(start_paused = true)]
async fn refusals_say_their_attempts_and_once_read_their_deadline() {
    let gateway = start().await;
    let auth: &[u8] = DEV.as_bytes();
    let (status, headers, _) = read(
        gateway
            .request(
                Method::POST,
                "/v1/tools/echo",
                &[("authorization", auth), ("ballast-timeout-ms", b"5000")],
                "{not json",
            )
            .await,
    )
    .await;
    assert_eq!(
        (status, header(&headers, "ballast-code")),
        (400, "malformed_json")
    );
    assert_eq!(header(&headers, "ballast-attempts"), "0");
    let remaining: u64 = header(&headers, "ballast-remaining-ms").parse().unwrap();
    assert!(remaining <= 5000 && remaining > 4000, "{remaining}");
    let (status, headers, _) = read(
        gateway
            .request(
                Method::POST,
                "/v1/tools/echo",
                &[("authorization", auth), ("ballast-timeout-ms", b"20")],
                "{}",
            )
            .await,
    )
    .await;
    assert_eq!(
        (status, header(&headers, "ballast-code")),
        (504, "deadline_exceeded")
    );
    assert_eq!(header(&headers, "ballast-attempts"), "0");
    assert!(header(&headers, "ballast-remaining-ms").parse::<u64>().unwrap() <= 20);
    // A header that cannot be read has no deadline to count down: attempts only.
    let (status, headers, _) = read(
        gateway
            .request(
                Method::POST,
                "/v1/tools/echo",
                &[("authorization", auth), ("ballast-timeout-ms", b"soon")],
                "{}",
            )
            .await,
    )
    .await;
    assert_eq!((status, header(&headers, "ballast-attempts")), (400, "0"));
    assert_eq!(header(&headers, "ballast-remaining-ms"), "");
}

/// Regression: an upstream's status 999 was relayed to the caller; and its non-JSON body became `text/plain`.
#[tokio::test]
async fn an_upstream_status_outside_http_is_502_and_a_typed_answer_keeps_its_type() {
    let gateway = start().await;
    let headers = [("authorization", DEV)];
    let (status, answer_headers, body) = read(gateway.call("odd_status", &json!({}), &headers).await).await;
    assert_eq!(
        (status, header(&answer_headers, "ballast-code")),
        (502, "upstream_error"),
        "{body}"
    );
    let response = gateway.call("xml", &json!({}), &headers).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "content-type"), "application/xml");
    assert_eq!(text(response).await, "<refund id=\"r1\"/>\n");
}

/// Regression: a member named twice passed on a read-only call without a key and failed with one.
#[tokio::test]
async fn a_member_named_twice_is_refused_with_a_key_or_without() {
    let gateway = start().await;
    let auth: &[u8] = DEV.as_bytes();
    let body = r#"{"amount": 1, "amount": 1000}"#;
    for key in [None, Some(&b"k-dup"[..])] {
        let mut headers = vec![
            ("authorization", auth),
            ("content-type", &b"application/json"[..]),
        ];
        headers.extend(key.map(|k| ("idempotency-key", k)));
        let (status, answer, _) = read(
            gateway
                .request(Method::POST, "/v1/tools/echo", &headers, body)
                .await,
        )
        .await;
        assert_eq!(
            (status, header(&answer, "ballast-code")),
            (400, "json_duplicate_member"),
            "{key:?}"
        );
        assert_eq!(
            header(&answer, "ballast-attempts"),
            "0",
            "nothing reached the upstream"
        );
    }
}

/// Regression: with two `Authorization` headers the first counted; and a key with a byte outside ASCII answered
/// `invalid_header`, where docs/gateway.md says `idempotency_key_invalid`.
#[tokio::test]
async fn two_authorization_headers_and_a_malformed_key_are_refused_as_documented() {
    let gateway = start().await;
    let (status, headers, _) = read(
        gateway
            .request(
                Method::POST,
                "/v1/tools/echo",
                &[
                    ("authorization", DEV.as_bytes()),
                    ("authorization", b"Bearer someone-else"),
                ],
                "{}",
            )
            .await,
    )
    .await;
    assert_eq!(
        (status, header(&headers, "ballast-code")),
        (400, "invalid_header")
    );
    let (status, headers, body) = read(
        gateway
            .request(
                Method::POST,
                "/v1/tools/echo_write",
                &[("authorization", DEV.as_bytes()), ("idempotency-key", b"k\xe9y")],
                "{}",
            )
            .await,
    )
    .await;
    assert_eq!(
        (status, header(&headers, "ballast-code")),
        (400, "idempotency_key_invalid"),
        "{body}"
    );
}
