//! `ballast serve` meets bad input: each refusal has its status, its stable code, a message that says what to do,
//! `x-should-retry: false` and `x-request-id` — and nothing reaches the upstream. No header or body panics it.

use crate::support;

use serde_json::{Value, json};
use support::gateway::{Gateway, chaos, client, header, read};
use support::{ballast, text};

const CONFIG: &str = r#"
version = 1
[server]
body_limit = "1KiB"
[store]
url = "sqlite://{dir}/ballast.db"
[[tools]]
name = "lookup_order"
upstream = { method = "POST", url = "{chaos}/tools/lookup_order" }
per_try_timeout = "1s"
[[tools]]
name = "create_refund"
upstream = { method = "POST", url = "{chaos}/tools/create_refund" }
side_effects = true
upstream_idempotency = "keyed"
per_try_timeout = "1s"
"#;

/// One bad request and what must come back.
struct Case {
    what: &'static str,
    method: reqwest::Method,
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
        method: reqwest::Method::POST,
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
    fn method(mut self, method: reqwest::Method) -> Case {
        self.method = method;
        self
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_bad_input_is_refused_with_its_code_and_what_to_do() {
    let upstream = chaos("").await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
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
        case(
            "malformed SDK timeout",
            "/v1/tools/lookup_order",
            args,
            400,
            "invalid_header",
        )
        .header("x-stainless-read-timeout", "soon")
        .says(&["x-stainless-read-timeout", "\"soon\""]),
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
        .method(reqwest::Method::GET)
        .says(&["POST"]),
        case("unknown path", "/v2/anything", b"", 404, "not_found").says(&["/v1/tools/{name}"]),
    ];
    let client = client();
    for case in cases {
        let mut request = client
            .request(case.method.clone(), gateway.url(case.path))
            .header("content-type", "application/json")
            .body(case.body.clone());
        for (name, value) in &case.headers {
            request = request.header(*name, value);
        }
        let (status, headers, body) = read(request.send().await.expect("an answer")).await;
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
    let stats = support::gateway::get_json(&upstream.url("/stats")).await;
    assert_eq!(
        stats["endpoints"],
        json!({}),
        "nothing reached the upstream: {stats}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_header_or_body_makes_it_panic() {
    let upstream = chaos("").await;
    let gateway = Gateway::start(CONFIG, &upstream, &[]);
    let client = client();
    // Deeper than serde_json's recursion limit, within the body limit (a body over it may be refused before it is
    // all sent, and the client sees a broken pipe instead of the 413).
    let deep = format!("{}{}", "[".repeat(500), "]".repeat(500));
    let bodies: Vec<Vec<u8>> = vec![
        vec![0xff, 0xfe, 0x00, 0x80],
        deep.into_bytes(),
        b"\"just a string\"".to_vec(),
        b"12345678901234567890123456789012345678901234567890".to_vec(),
        b"{\"a\": 1, \"a\": 2}".to_vec(),
        Vec::new(),
    ];
    let headers: Vec<(&str, Vec<u8>)> = vec![
        ("ballast-timeout-ms", b"99999999999999999999999".to_vec()),
        ("ballast-timeout-ms", b"-5".to_vec()),
        ("grpc-timeout", vec![0xc3, 0xa9]),
        ("x-stainless-timeout", b"1e400".to_vec()),
        ("ballast-hop", b"4294967296".to_vec()),
        ("ballast-call-ordinal", vec![0xff]),
        ("ballast-run-id", vec![b'r'; 300]),
        ("traceparent", b"00-zz-yy-01".to_vec()),
        ("idempotency-key", vec![0xe2, 0x82, 0xac]),
        ("authorization", vec![0xff; 10]),
        ("x-request-id", vec![b'x'; 4000]),
    ];
    let mut answered = 0;
    for tool in ["lookup_order", "create_refund"] {
        for body in &bodies {
            for (name, value) in &headers {
                let request = client
                    .post(gateway.url(&format!("/v1/tools/{tool}")))
                    .header(
                        *name,
                        reqwest::header::HeaderValue::from_bytes(value).expect("a raw header value"),
                    )
                    .header("idempotency-key", "fuzz-1")
                    .body(body.clone());
                let (status, answer_headers, body) = read(request.send().await.expect("an answer")).await;
                assert!(
                    status < 500 || status == 502 || status == 503 || status == 504,
                    "{status}: {body}"
                );
                assert!(
                    !header(&answer_headers, "x-should-retry").is_empty() || status < 400,
                    "{status}"
                );
                answered += 1;
            }
        }
    }
    assert_eq!(answered, 2 * bodies.len() * headers.len());
    let health: Value = client
        .get(gateway.url("/healthz"))
        .send()
        .await
        .expect("alive")
        .json()
        .await
        .expect("json");
    assert_eq!(health["status"], "ok");
    assert!(!gateway.stderr().contains("panicked"), "{}", gateway.stderr());
}

#[test]
fn check_validates_the_config_and_its_secrets_and_exits() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("ballast.toml");
    let config = "version = 1\n[[principals]]\nname = \"agents\"\nkey_env = \"BALLAST_TEST_NO_SUCH_KEY\"\n\
                  [[tools]]\nname = \"lookup_order\"\nupstream = { method = \"POST\", url = \"http://127.0.0.1:9/t\" }\n\
                  per_try_timeout = \"1s\"\n";
    std::fs::write(&path, config).expect("written");
    let path = path.display().to_string();
    let output = ballast(&["serve", "--config", &path, "--check"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("BALLAST_TEST_NO_SUCH_KEY is not set"), "{stderr}");

    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ballast"))
        .args(["serve", "--config", &path, "--check"])
        .env("BALLAST_TEST_NO_SUCH_KEY", "a-key")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("valid; 1 tool(s)"),
        "{}",
        text(&output.stdout)
    );

    let output = ballast(&["serve", "--config", &format!("{path}.missing"), "--check"]);
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn without_principals_it_serves_on_loopback_only() {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("ballast.toml");
    std::fs::write(&path, "version = 1\n").expect("written");
    let path = path.display().to_string();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ballast"))
        .args(["serve", "--config", &path, "--listen", "0.0.0.0:0"])
        .current_dir(dir.path())
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("[[principals]]"),
        "{stderr}"
    );
}
