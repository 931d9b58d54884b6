//! `ballast serve` and its admin address: `/metrics` and `/status` on `server.admin_listen`, printed at start.
//! (Who may call the gateway — keys, principals, what reaches the upstream — is the router's, tested in process
//! by `ballast-gateway`'s `auth` module.)

use crate::support;

use ballast_testkit::ConfigText;
use sha2::{Digest, Sha256};
use support::gateway::{Gateway, chaos, client};

const OPS: &str = "Bearer ops-secret-2";

/// `/metrics` on its own address (`server.admin_listen`): the binary binds it and prints it, serves the metrics
/// there without a key, and no longer on the main address. (Behind an admin principal on the main address, they
/// are the router's: `ballast-gateway`'s `auth` tests.)
#[tokio::test(flavor = "multi_thread")]
async fn the_admin_address_is_printed_and_serves_metrics_without_a_key() {
    let upstream = chaos("").await;
    let client = client();
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .server("admin_listen = \"127.0.0.1:0\"")
        .principal("agents", "TEST_AGENTS_KEY")
        .raw("[[principals]]\nname = \"ops\"\nkey_hash_env = \"TEST_OPS_KEY_HASH\"\nadmin = true")
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            "side_effects = true\nper_try_timeout = \"1s\"",
        )
        .build();
    let ops_hash: String = Sha256::digest(b"ops-secret-2")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let gateway = Gateway::start(
        &config,
        &upstream,
        &[
            ("TEST_AGENTS_KEY", "agents-secret-1"),
            ("TEST_OPS_KEY_HASH", &ops_hash),
        ],
    );
    let line = gateway.printed("admin endpoints");
    let admin = line
        .rsplit("http://")
        .next()
        .expect("an address")
        .trim()
        .to_owned();
    let metrics = client
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .expect("answered");
    assert_eq!(metrics.status(), 200, "the admin address needs no key");
    assert!(metrics.text().await.expect("text").contains("ballast_"));
    let on_main = client
        .get(gateway.url("/metrics"))
        .header("authorization", OPS)
        .send()
        .await
        .expect("answered");
    assert_eq!(
        on_main.status(),
        404,
        "not served on the main address when admin_listen is set"
    );
    // The dashboard's page goes with /status: on the admin address, not on the main one.
    for (url, expected) in [
        (format!("http://{admin}/dashboard"), 200),
        (gateway.url("/dashboard"), 404),
    ] {
        let page = client.get(&url).send().await.expect("answered");
        assert_eq!(page.status(), expected, "{url}");
    }
}
