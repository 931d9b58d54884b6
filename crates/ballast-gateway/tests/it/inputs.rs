//! Bad input: each refusal has its status, its stable code, a message that says what to do, `x-should-retry:
//! false` and `x-request-id` — and nothing reaches the upstream.

use ballast_testkit::ConfigText;
use http::Method;
use serde_json::json;

use crate::support::{Gateway, Upstream, header, read};

/// One bad request and what must come back.
struct Case {
    what: &'static str,
    method: Method,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    status: u16,
    code: &'static str,
    says: &'static [&'static str],
}

fn case(what: &'static str, path: &'static str, body: &[u8], status: u16, code: &'static str) -> Case {
    Case {
        what,
        method: Method::POST,
        path,
        headers: Vec::new(),
        body: body.to_vec(),
        status,
        code,
        says: &[],
    }
}

impl Case {
    fn header(mut self, name: &'static str, value: impl Into<String>) -> Case {
        self.headers.push((name, value.into()));
        self
    }
    fn says(mut self, says: &'static [&'static str]) -> Case {
        self.says = says;
        self
    }
    fn method(mut self, method: Method) -> Case {
        self.method = method;
        self
    }
}

#[tokio::test]
async fn every_bad_input_is_refused_with_its_code_and_what_to_do() {
    let upstream = Upstream::chaos("");
    let config = ConfigText::new()
        .server("body_limit = \"1KiB\"")
        .tool(
            "lookup_order",
            "http://chaos/tools/lookup_order",
            "per_try_timeout = \"1s\"",
        )
        .tool(
            "create_refund",
            "http://chaos/tools/create_refund",
            "side_effects = true\nupstream_idempotency = \"keyed\"\nper_try_timeout = \"1s\"",
        )
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]).await;
    let args = br#"{"order_id": "A-1"}"#;
    let cases = [
        case(
            "body over body_limit",
            "/v1/tools/lookup_order",
            &vec![b' '; 2048],
            413,
            "body_too_large",
        )
        .says(&["body_limit", "1024"]),
        case(
            "malformed JSON",
            "/v1/tools/lookup_order",
            b"{\n  \"order_id\": 12,\n}",
            400,
            "malformed_json",
        )
        .says(&["line 3, column 1", "trailing comma"]),
        case(
            "unknown tool",
            "/v1/tools/refund_everything",
            args,
            404,
            "unknown_tool",
        )
        .says(&["refund_everything", "create_refund, lookup_order"]),
        case(
            "malformed deadline",
            "/v1/tools/lookup_order",
            args,
            400,
            "invalid_header",
        )
        .header("grpc-timeout", "12x")
        .says(&["grpc-timeout", "\"12x\""]),
        // (An SDK's own timeout header that is not a time is read as absent: its caller never wrote it.)
        case(
            "malformed proxy timeout",
            "/v1/tools/lookup_order",
            args,
            400,
            "invalid_header",
        )
        .header("x-envoy-expected-rq-timeout-ms", "soon")
        .says(&["x-envoy-expected-rq-timeout-ms", "\"soon\""]),
        case(
            "key with a space",
            "/v1/tools/create_refund",
            args,
            400,
            "idempotency_key_invalid",
        )
        .header("idempotency-key", "has space")
        .says(&["printable ASCII"]),
        case(
            "key too long",
            "/v1/tools/create_refund",
            args,
            400,
            "idempotency_key_invalid",
        )
        .header("idempotency-key", "k".repeat(256))
        .says(&["256 bytes"]),
        case(
            "no key on a side effect",
            "/v1/tools/create_refund",
            args,
            400,
            "idempotency_key_missing",
        )
        .says(&["Idempotency-Key", "ballast-run-id"]),
        case(
            "a step without a run",
            "/v1/tools/create_refund",
            args,
            400,
            "step_without_run",
        )
        .header("ballast-step-id", "step-1")
        .says(&["ballast-run-id"]),
        case(
            "bad priority",
            "/v1/tools/lookup_order",
            args,
            400,
            "invalid_header",
        )
        .header("ballast-priority", "urgent")
        .says(&["ballast-priority", "sheddable"]),
        case(
            "wrong method",
            "/v1/tools/lookup_order",
            b"",
            405,
            "method_not_allowed",
        )
        .method(Method::GET)
        .says(&["POST"]),
        case("unknown path", "/v2/anything", b"", 404, "not_found").says(&["/v1/tools/{name}"]),
    ];
    for case in cases {
        let mut headers: Vec<(&str, &[u8])> = vec![("content-type", b"application/json")];
        headers.extend(case.headers.iter().map(|(name, value)| (*name, value.as_bytes())));
        let response = gateway
            .request(case.method.clone(), case.path, &headers, case.body.clone())
            .await;
        let (status, headers, body) = read(response).await;
        let what = case.what;
        assert_eq!(status, case.status, "{what}: {body}");
        assert_eq!(body["code"], case.code, "{what}: {body}");
        assert_eq!(body["type"], format!("urn:ballast:{}", case.code), "{what}");
        assert_eq!(
            header(&headers, "content-type"),
            "application/problem+json",
            "{what}"
        );
        assert_eq!(
            header(&headers, "x-should-retry"),
            "false",
            "{what}: the same request cannot succeed"
        );
        assert!(
            !header(&headers, "x-request-id").is_empty(),
            "{what}: x-request-id"
        );
        let detail = body["detail"].as_str().unwrap_or_default();
        for said in case.says {
            assert!(detail.contains(said), "{what}: {said:?} not in {detail:?}");
        }
    }
    let stats = upstream.stats().await;
    assert_eq!(
        stats["endpoints"],
        json!({}),
        "nothing reached the upstream: {stats}"
    );
}
