//! Deferred operations through the real binary (issue 34; DESIGN.md "Deferred operations"): a side effect that
//! cannot be served now and whose caller can wait is answered 202 and worked later — once, in priority order,
//! until it completes, fails, runs out of attempts or expires — on SQLite, Redis and PostgreSQL; the operation
//! says each state as it goes; its end is posted, signed, where the config says.
//!
//! Real binaries, the chaos upstream in process (its profile swapped to heal it), real time with bounded polling.
//! The kill -9 and two-instance cases are in `serve_deferred_crash`, order and live traffic in `serve_deferred_order`.

use ballast_testkit::ConfigText;
use hmac::{KeyInit as _, Mac as _};
use serde_json::Value;

use crate::support;
use crate::support::deferred::{
    call_keyed, deferred, heal, in_order, ledger, operation, receiver, until_ended,
};
use crate::support::gateway::{Gateway, chaos, eventually, header};

/// The stores of these tests: a SQLite file, and the machine's Redis and PostgreSQL (skipped, or failing under
/// `BALLAST_REQUIRE_SERVICES=1`, when missing).
const SERVERS: [(&str, &str, &str); 2] = [
    ("Redis", "BALLAST_TEST_REDIS_URL", "redis://127.0.0.1:6379"),
    (
        "PostgreSQL",
        "BALLAST_TEST_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    ),
];

/// A tool's table lines: side effects, one attempt per call (the 429s are the test's, not retries'), no
/// breaker nor throttle (each deferred attempt reaches the upstream), at `priority`.
pub(crate) fn side_effect(priority: &str) -> String {
    format!(
        "side_effects = true\npriority = \"{priority}\"\nretry = {{ max_attempts = 1 }}\n\
         breaker = {{ consecutive_failures = 0, failure_rate = 0 }}\nthrottle = {{ enabled = false }}"
    )
}

/// A key no earlier run used (the shared stores outlive the tests).
fn fresh(what: &str) -> String {
    format!("{what}-{}", uuid_like())
}

fn uuid_like() -> String {
    use std::hash::BuildHasher as _;
    let state = std::collections::hash_map::RandomState::new();
    format!(
        "{:016x}{:08x}",
        state.hash_one(std::process::id()),
        state.hash_one(ballast::clock::now())
    )
}

/// On each store: a payment refused by its upstream (429: answered before it ran) whose caller can wait is accepted, retried while the
/// upstream refuses, and completed exactly once when it recovers; a poller sees its states in order; the key
/// then replays the answer, and a retry while it waited got the same 202.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_payment_that_can_wait_completes_once_when_the_upstream_recovers() {
    let mut stores = vec!["sqlite://{dir}/ballast.db".to_owned()];
    for (what, var, default) in SERVERS {
        if let Some((url, _)) = support::raw::service(what, var, default).await {
            stores.push(url);
        }
    }
    for store in stores {
        let upstream = chaos("[endpoints.process_payment]\nerrors = { 429 = 1.0 }\n").await;
        // A tool name of this run's own: every instance on a shared store works every operation of the tools it
        // has (they are one gateway), and other tests' gateways share these stores.
        let tool = fresh("pay").replace('-', "_");
        let config = ConfigText::new()
            .store(&store)
            .tool(
                &tool,
                "{chaos}/tools/process_payment",
                &side_effect("critical_plus"),
            )
            .raw("[deferred]\nbase = \"50ms\"\ncap = \"200ms\"\nmax_attempts = 100")
            .build();
        let gateway = Gateway::start(&config, &upstream, &[]);
        let key = fresh("pay");
        let accepted = deferred(&gateway, &tool, &key, &[]).await;
        assert_eq!(
            (accepted["queue"].as_str(), accepted["priority"].as_str()),
            (Some(tool.as_str()), Some("critical_plus"))
        );
        // Retried while it waits, with or without the header: the same operation.
        let (status, _, body) = call_keyed(&gateway, &tool, &key, &[]).await;
        assert_eq!(status, 202, "{body}");
        assert!(
            ["queued", "in_progress"].contains(&body["status"].as_str().unwrap_or("?")),
            "{body}"
        );
        // Refused meanwhile: attempts counted, the last answer shown.
        let waiting = eventually("an attempt is refused", || async {
            let now = operation(&gateway, &key).await;
            (now["attempts"].as_u64() >= Some(1) && now["status"] == "queued").then_some(now)
        })
        .await;
        assert_eq!(waiting["last"]["status"], 429, "{store}: {waiting}");
        assert_eq!(ledger(&upstream).await["totals"]["executions"], 0);
        heal(
            &upstream,
            "[endpoints.process_payment]\nlatency = { p50 = \"200ms\", p99 = \"200ms\" }\n",
        )
        .await;
        let (seen, done) = until_ended(&gateway, &key).await;
        assert_eq!(done["status"], "completed", "{store}: {done}");
        assert!(in_order(&seen), "{store}: states out of order: {seen:?}");
        assert_eq!(done["result"]["status"], 200);
        assert_eq!(done["result"]["body"]["status"], "succeeded");
        assert!(done["took_ms"].as_u64().is_some());
        let book = ledger(&upstream).await;
        assert_eq!(
            book["ops"][&key]["executions"], 1,
            "{store}: exactly once: {book}"
        );
        let (status, answer, replay) = call_keyed(&gateway, &tool, &key, &[]).await;
        assert_eq!(
            (status, header(&answer, "idempotent-replayed")),
            (200, "true"),
            "{replay}"
        );
        assert_eq!(replay["id"], done["result"]["body"]["id"]);
    }
}

/// Attempts that reach a refusing upstream run out into `failed` (its last answer kept, the key released, the
/// tool's `defer` accepting without the header); a caller's short `ballast-defer-ttl` ends in `expired`; each
/// end is posted to the callback URL, signed with the configured secret.
#[tokio::test(flavor = "multi_thread")]
async fn attempts_and_the_ttl_run_out_into_failed_and_expired_and_each_end_is_posted_signed() {
    let upstream = chaos(
        "[endpoints.process_payment]\nerrors = { 429 = 1.0 }\n[endpoints.create_refund]\nerrors = { 429 = 1.0 }\n",
    )
    .await;
    let (url, received) = receiver().await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            &format!("{}\ndefer = {{ max_attempts = 2 }}", side_effect("critical_plus")),
        )
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            &side_effect("critical"),
        )
        .raw(&format!(
            "[deferred]\nbase = \"50ms\"\ncap = \"100ms\"\nmax_attempts = 100\ncallback_url = \"{url}\"\n\
             callback_secret_env = \"HOOK_SECRET\""
        ))
        .build();
    let gateway = Gateway::start(&config, &upstream, &[("HOOK_SECRET", "s3cret")]);
    // No header needed: the tool's callers accept deferral.
    let (status, _, _) = call_keyed(&gateway, "process_payment", "pay-1", &[]).await;
    assert_eq!(status, 202);
    let ttl = [("ballast-defer-ttl", "1")];
    deferred(&gateway, "create_refund", "refund-1", &ttl).await;
    let (_, failed) = until_ended(&gateway, "pay-1").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["attempts"], 2);
    assert_eq!(failed["last"]["status"], 429);
    let (_, expired) = until_ended(&gateway, "refund-1").await;
    assert_eq!(expired["status"], "expired", "{expired}");
    assert!(
        expired["took_ms"].as_u64().is_some_and(|ms| ms < 5_000),
        "{expired}"
    );
    assert_eq!(ledger(&upstream).await["totals"]["executions"], 0);
    // Nothing acted: the keys are free again, and a call with one runs (here, deferred anew).
    let (status, _, again) = call_keyed(&gateway, "create_refund", "refund-1", &[]).await;
    assert_eq!(status, 429, "a refusal without the header is the answer: {again}");
    // Both ends were posted, signed: HMAC-SHA256 of "<t>.<body>" with the secret.
    let posted = eventually("both callbacks arrive", || async {
        let got = received.lock().unwrap().clone();
        (got.len() >= 2).then_some(got)
    })
    .await;
    let mut ends: Vec<(String, String)> = Vec::new();
    for (head, body) in posted {
        assert!(head.starts_with("post /hooks/ballast "), "{head}");
        let signature = (head.lines())
            .find_map(|line| line.strip_prefix("ballast-signature:"))
            .expect("a signature")
            .trim()
            .to_owned();
        let (t, v1) = signature.split_once(",v1=").expect("t=…,v1=…");
        let t = t.strip_prefix("t=").expect("a timestamp");
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(format!("{t}.").as_bytes());
        mac.update(&body);
        let expected: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(v1, expected, "the signature checks");
        let event: Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(event["event"], "operation.ended");
        assert_eq!(event["principal"], "anonymous");
        ends.push((
            event["key"].as_str().unwrap().to_owned(),
            event["status"].as_str().unwrap().to_owned(),
        ));
    }
    ends.sort();
    assert_eq!(
        ends,
        [
            ("pay-1".into(), "failed".into()),
            ("refund-1".into(), "expired".into())
        ]
    );
}

/// A payment shed for room (its tool's one slot busy, no queue) whose caller can wait is accepted, and completed
/// exactly once when the slot frees — the shed answer never left the gateway, so nothing acted before.
#[tokio::test(flavor = "multi_thread")]
async fn a_shed_payment_that_can_wait_is_completed_once_when_room_frees() {
    let upstream = chaos("[endpoints.process_payment]\nlatency = { p50 = \"1s\", p99 = \"1s\" }\n").await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            &format!("{}\nconcurrency = 1\nqueue = 0", side_effect("critical_plus")),
        )
        .raw("[deferred]\nbase = \"50ms\"\ncap = \"200ms\"")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
    let holding = call_keyed(&gateway, "process_payment", "first", &[]);
    let shed_one = async {
        eventually("the slot is taken", || async {
            let status = support::gateway::get_json(&gateway.url("/status")).await;
            (status["tools"]["process_payment"]["admission"]["in_flight"] == 1).then_some(())
        })
        .await;
        deferred(&gateway, "process_payment", "second", &[]).await
    };
    let ((status, _, _), accepted) = tokio::join!(holding, shed_one);
    assert_eq!(status, 200, "the first call had the slot");
    assert_eq!(accepted["status"], "queued");
    let (seen, end) = until_ended(&gateway, "second").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert!(in_order(&seen), "{seen:?}");
    assert_eq!(ledger(&upstream).await["ops"]["second"]["executions"], 1);
}

/// A deferred attempt answered by the tool's fallback (its primary unreachable, nothing sent there) completes the
/// operation with the fallback's answer, once: the fallback acted, so it is never run again.
#[tokio::test(flavor = "multi_thread")]
async fn a_deferred_attempt_answered_by_the_fallback_completes_once() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let unreachable = format!(
        "http://{}/tools/process_payment",
        closed.local_addr().expect("bound")
    );
    drop(closed);
    let upstream = chaos("[endpoints.create_refund]\nerrors = { 429 = 1.0 }\n").await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool(
            "process_payment",
            &unreachable,
            &format!("{}\nfallback_tool = \"backup_payment\"", side_effect("critical")),
        )
        .tool(
            "backup_payment",
            "{chaos}/tools/create_refund",
            &side_effect("critical"),
        )
        .raw("[deferred]\nbase = \"10ms\"\ncap = \"20ms\"\nmax_attempts = 100")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
    deferred(&gateway, "process_payment", "via-backup", &[]).await;
    heal(&upstream, "").await;
    let (_, end) = until_ended(&gateway, "via-backup").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(
        end["result"]["headers"]["ballast-fallback"], "backup_payment",
        "{end}"
    );
    let book = ledger(&upstream).await;
    assert_eq!(
        book["ops"]["via-backup"]["executions"], 1,
        "the fallback ran once: {book}"
    );
    assert_eq!(operation(&gateway, "via-backup").await["status"], "completed");
}

/// At an upstream that deduplicates by the key, an attempt whose answer was lost is deferred, not called unknown:
/// the workers send it again with the same key, and it completes once.
#[tokio::test(flavor = "multi_thread")]
async fn a_lost_answer_at_a_deduplicating_upstream_is_deferred_and_completes_once() {
    let keyed = "[endpoints.create_refund]\nkey_mode = \"keyed\"\n";
    let upstream = chaos(&format!("{keyed}hang = 1.0\n")).await;
    let config = ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        .tool(
            "create_refund",
            "{chaos}/tools/create_refund",
            &format!(
                "{}\nupstream_idempotency = \"keyed\"\nper_try_timeout = \"200ms\"",
                side_effect("critical")
            ),
        )
        .raw("[deferred]\nbase = \"10ms\"\ncap = \"20ms\"\nmax_attempts = 100")
        .build();
    let gateway = Gateway::start(&config, &upstream, &[]);
    let accepted = deferred(
        &gateway,
        "create_refund",
        "lost-1",
        &[("ballast-timeout-ms", "1000")],
    )
    .await;
    assert_eq!(accepted["queue"], "create_refund");
    heal(&upstream, keyed).await;
    let (_, end) = until_ended(&gateway, "lost-1").await;
    assert_eq!(end["status"], "completed", "{end}");
    assert_eq!(ledger(&upstream).await["ops"]["lost-1"]["executions"], 1);
}
