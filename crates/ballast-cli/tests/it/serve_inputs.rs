//! `ballast serve` meets bad input: no header or body panics the process; `--check` validates a config and its
//! secrets; without principals it serves on loopback only. (Each refusal's status, code and message is the
//! router's, tested in process by `ballast-gateway`'s `inputs` module.)

use crate::support;

use ballast_testkit::ConfigText;
use serde_json::Value;
use support::gateway::{Gateway, chaos, client, header, read};
use support::{ballast, text};

/// A body limit of 1 KiB, a read-only tool and a side effect.
fn config() -> String {
    ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .server("body_limit = \"1KiB\"")
        .tool(
            "lookup_order",
            "{chaos}/tools/lookup_order",
            "per_try_timeout = \"1s\"",
        )
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            "side_effects = true\nupstream_idempotency = \"keyed\"\nper_try_timeout = \"1s\"",
        )
        .build()
}

/// Headers and bodies no client should send, at every tool: each is answered, never with a 500, and the process's
/// stderr never says "panicked" — which would show a panic in any of its tasks, the request's own or one it
/// spawned. (Each bad input's code and message is the router's, tested in process by `ballast-gateway`'s `inputs`
/// module.)
#[tokio::test(flavor = "multi_thread")]
async fn no_header_or_body_makes_it_panic() {
    let upstream = chaos("").await;
    let gateway = Gateway::start(&config(), &upstream, &[]);
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
