//! Many `ballast serve` instances on one Redis or PostgreSQL behaving as one (DESIGN.md, "Many instances"): a
//! run's deadline and allowance follow its calls from instance to instance, a deployment's account limit holds
//! across instances, a lost store is declared (side effects fail closed, limits in their `on_store_loss` mode)
//! and shared again when it is back, and an instance killed mid side effect never leads to a second execution.
//!
//! Real binaries, the machine's real Redis and PostgreSQL (each test skips, or fails under
//! `BALLAST_REQUIRE_SERVICES=1`, when one is missing), real time with bounded polling.

use std::time::Duration;

use ballast_testkit::ConfigText;
use serde_json::{Value, json};

use crate::support;
use crate::support::gateway::{Gateway, call, chaos, client, executions, get_json, header, read};

/// The shared stores of the machine: (name, variable, default URL).
const STORES: [(&str, &str, &str); 2] = [
    ("Redis", "BALLAST_TEST_REDIS_URL", "redis://127.0.0.1:6379"),
    (
        "PostgreSQL",
        "BALLAST_TEST_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    ),
];

/// A fresh name: runs and records are the principal's, and the stores outlive the test.
fn fresh(what: &str) -> String {
    format!("{what}-{:x}", rand_suffix())
}

/// A number no earlier run of these tests used (a randomly keyed hash).
fn rand_suffix() -> u64 {
    use std::hash::BuildHasher as _;
    std::collections::hash_map::RandomState::new().hash_one(std::process::id())
}

/// Three gateways of `config` on the chaos upstream.
fn three(config: &str, upstream: &ballast_chaos::ChaosServer) -> [Gateway; 3] {
    [(); 3].map(|()| Gateway::start(config, upstream, &[]))
}

/// A run whose three calls land on three instances keeps one deadline (set by the first call's explicit
/// `ballast-timeout-ms`, seen by the others, which send none) and one retry allowance (spent on one instance,
/// spent for all), and its calls after its deadline are refused on any instance.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_spread_over_three_instances_keeps_one_deadline_and_one_allowance() {
    for (what, var, default) in STORES {
        let Some((url, _)) = support::raw::service(what, var, default).await else {
            continue;
        };
        let run = fresh("run");
        let (first, second) = (format!("{run}-first"), format!("{run}-second"));
        let scripts = format!(
            "{}{}",
            support::mcp::script("lookup_order", &first, "503, 503, \"ok\""),
            support::mcp::script("lookup_order", &second, "503, \"ok\"")
        );
        let upstream = chaos(&scripts).await;
        let config = ConfigText::new()
            .store(&url)
            .run("retry_allowance = 2\nretry_allowance_per_call = 0.0")
            .tool(
                "lookup_order",
                "{chaos}/tools/lookup_order",
                "retry = { max_attempts = 4, base = \"1ms\", cap = \"5ms\" }",
            )
            .build();
        let [a, b, c] = three(&config, &upstream);
        let client = client();
        let headers = |timeout: Option<&'static str>| {
            let mut headers = vec![("ballast-run-id", run.as_str())];
            headers.extend(timeout.map(|t| ("ballast-timeout-ms", t)));
            headers
        };
        // On A: the run's deadline (3 s), and both of its retries.
        let (status, answer, body) = read(
            call(
                &client,
                &a,
                "lookup_order",
                &json!({"order_id": "1", "op": first}),
                &headers(Some("3000")),
            )
            .await,
        )
        .await;
        assert_eq!(
            (status, header(&answer, "ballast-attempts")),
            (200, "3"),
            "{what}: {body}"
        );
        // On B, no deadline header: the run's deadline holds (not the 30 s default), and its allowance is spent.
        let (status, answer, body) = read(
            call(
                &client,
                &b,
                "lookup_order",
                &json!({"order_id": "1", "op": second}),
                &headers(None),
            )
            .await,
        )
        .await;
        let remaining: u64 = header(&answer, "ballast-remaining-ms").parse().expect("a number");
        assert!(
            remaining < 3000,
            "{what}: the run's deadline, not the default: {remaining} ms"
        );
        assert_eq!(
            (status, header(&answer, "ballast-code")),
            (503, "run_allowance_exhausted"),
            "{what}: the allowance spent on A is spent on B: {body}"
        );
        // On C, once the run's deadline has passed: refused, nothing sent.
        let deadline_passed = support::gateway::eventually(&format!("{what}: C refuses the run"), || async {
            let answer = call(
                &client,
                &c,
                "lookup_order",
                &json!({"order_id": "1", "op": "late"}),
                &headers(None),
            )
            .await;
            let (status, headers, body) = read(answer).await;
            (header(&headers, "ballast-code") == "deadline_exceeded").then_some((status, body))
        })
        .await;
        assert_eq!(deadline_passed.0, 504, "{what}: {}", deadline_passed.1);
        for gateway in [&a, &b, &c] {
            let status = get_json(&gateway.url("/status")).await;
            assert_eq!(status["runs"]["mode"], "shared", "{what}: {status}");
            assert_eq!(status["shared_state"]["reachable"], true, "{what}: {status}");
        }
    }
}

/// A deployment limit of 600 requests a minute (10 a second, no burst) holds across three instances driven at
/// once: the upstream sees what one second allows, not three times that; the rest are shed with `limit`.
#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_limit_holds_across_three_instances_driven_at_once() {
    for (what, var, default) in STORES {
        let Some((url, _)) = support::raw::service(what, var, default).await else {
            continue;
        };
        let upstream = chaos("").await;
        // A model name of its own: the limit's key in the store is the account's (base URL, model, key).
        let model = fresh("limited");
        let deployment = format!(
            "{{ base_url = \"{{chaos}}/v1\", model = \"{model}\", limits = {{ requests_per_minute = 600, burst = \"0s\" }} }}"
        );
        let config = ConfigText::new()
            .store(&url)
            .model("m", &[deployment], "")
            .build();
        let gateways = three(&config, &upstream);
        let client = client();
        // Each instance up, on the store, before the sale.
        for gateway in &gateways {
            support::gateway::eventually(&format!("{what}: on the shared store"), || async {
                let status = get_json(&gateway.url("/status")).await;
                let shared = &status["shared_state"];
                (shared["reachable"] == true && shared["instances"].as_u64() >= Some(3)).then_some(())
            })
            .await;
        }
        let started = ballast::clock::now();
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..60 {
            let (client, url) = (client.clone(), gateways[i % 3].url("/v1/chat/completions"));
            calls.spawn(async move {
                let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
                let answer = client
                    .post(url)
                    .header("ballast-timeout-ms", "1000")
                    .json(&body)
                    .send()
                    .await
                    .expect("an answer");
                (
                    answer.status().as_u16(),
                    header(answer.headers(), "ballast-shed").to_owned(),
                )
            });
        }
        let (mut answered, mut limited, mut late) = (0, 0, 0);
        while let Some(done) = calls.join_next().await {
            match done.expect("a call") {
                (200, _) => answered += 1,
                (503, shed) if shed == "limit" => limited += 1,
                // Waited for its slot, and its attempt then did not fit what was left (a loaded machine).
                (504, _) => late += 1,
                other => panic!("{what}: {other:?}"),
            }
        }
        let elapsed = ballast::clock::now()
            .saturating_duration_since(started)
            .as_secs_f64();
        let sent = get_json(&upstream.url("/stats")).await["endpoints"]["model"]["requests"]
            .as_u64()
            .expect("the upstream's count");
        // 10 a second for the time the calls took, plus the one that starts the count — and each attempt a
        // store answer slower than its patience left to the instance's share (a loaded machine), which the
        // instances count. Counted per instance, the three would have sent three times the limit.
        let allowed = (10.0 * elapsed).floor() as u64 + 1;
        let mut unshared = 0;
        for gateway in &gateways {
            unshared += unshared_decisions(&client, gateway).await;
        }
        assert!(
            sent <= allowed + unshared,
            "{what}: {sent} sent in {elapsed:.2} s, the limit allows {allowed}, {unshared} decided without the store"
        );
        assert!(
            answered <= sent && sent <= answered + late,
            "{what}: {answered} answered, {late} late, {sent} sent"
        );
        assert!(
            answered >= 5 && limited >= 30,
            "{what}: {answered} answered, {limited} limited"
        );
        let status = get_json(&gateways[0].url("/status")).await;
        assert_eq!(
            status["models"]["m"]["deployments"][0]["limits"]["mode"], "shared",
            "{status}"
        );
    }
}

/// The attempts `gateway`'s limits decided without the shared store (`ballast_limit_unshared_total`).
async fn unshared_decisions(client: &reqwest::Client, gateway: &Gateway) -> u64 {
    let metrics = client
        .get(gateway.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    metrics
        .lines()
        .filter(|line| line.starts_with("ballast_limit_unshared_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Redis lost mid-run (its connections cut): side effects answer `store_unavailable` and nothing runs, the limits
/// go to each instance's share (`/status` says so, as does the metric), runs follow the call's own headers — and
/// all is shared again when Redis is back.
#[tokio::test(flavor = "multi_thread")]
async fn redis_lost_mid_run_is_declared_and_shared_again_when_it_is_back() {
    let Some((url, addr)) = support::raw::service(STORES[0].0, STORES[0].1, STORES[0].2).await else {
        return;
    };
    let proxy = support::raw::Cuttable::to(addr).await;
    let proxied = url.replacen(&addr.to_string(), &proxy.addr.to_string(), 1);
    let upstream = chaos("").await;
    let model = fresh("limited");
    let deployment = format!(
        "{{ base_url = \"{{chaos}}/v1\", model = \"{model}\", limits = {{ requests_per_minute = 6000 }} }}"
    );
    let config = ConfigText::new()
        .store(&proxied)
        .model("m", &[deployment], "")
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            "side_effects = true",
        )
        .tool("lookup_order", "{chaos}/tools/lookup_order", "")
        .build();
    let gateways = [(); 2].map(|()| Gateway::start(&config, &upstream, &[]));
    let client = client();
    let run = fresh("run");
    let status = |gateway: &Gateway| {
        let url = gateway.url("/status");
        async move { get_json(&url).await }
    };
    let mode = |status: &Value| status["models"]["m"]["deployments"][0]["limits"]["mode"].clone();
    // Both instances seen alive, the limits shared.
    for gateway in &gateways {
        support::gateway::eventually("two instances seen", || async {
            let status = status(gateway).await;
            // At least these two: the store's list is every instance on it (other tests' too) for 30 s.
            (status["shared_state"]["instances"].as_u64() >= Some(2)).then_some(())
        })
        .await;
    }
    proxy.cut();
    for gateway in &gateways {
        support::gateway::eventually("the lost store declared", || async {
            let status = status(gateway).await;
            (status["shared_state"]["reachable"] == false).then_some(status)
        })
        .await;
    }
    // Side effects fail closed.
    let op = fresh("pay");
    let (status_code, headers, body) = read(
        call(
            &client,
            &gateways[0],
            "process_payment",
            &json!({"op": op}),
            &[("idempotency-key", op.as_str())],
        )
        .await,
    )
    .await;
    assert_eq!(
        (status_code, header(&headers, "ballast-code")),
        (503, "store_unavailable"),
        "{body}"
    );
    assert_eq!(executions(&upstream, &op).await, 0, "nothing ran");
    // A run's call follows its own headers; a model call goes through under the instance's share.
    let (code, headers, body) = read(
        call(
            &client,
            &gateways[1],
            "lookup_order",
            &json!({"order_id": "1", "op": "o"}),
            &[("ballast-run-id", run.as_str()), ("ballast-timeout-ms", "2000")],
        )
        .await,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(header(&headers, "ballast-remaining-ms").parse::<u64>().unwrap() <= 2000);
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    let answer = client
        .post(gateways[1].url("/v1/chat/completions"))
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let lost = status(&gateways[1]).await;
    assert_eq!(mode(&lost), "share", "{lost}");
    assert_eq!(lost["runs"]["mode"], "local", "{lost}");
    let metrics = client
        .get(gateways[1].url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("ballast_shared_state_reachable 0"), "{metrics}");
    proxy.restore();
    for gateway in &gateways {
        support::gateway::eventually("shared again", || async {
            let status = status(gateway).await;
            (status["shared_state"]["reachable"] == true).then_some(())
        })
        .await;
    }
    let answer = client
        .post(gateways[1].url("/v1/chat/completions"))
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(mode(&status(&gateways[1]).await), "shared");
    let op = fresh("pay");
    let (status_code, _, body) = support::gateway::eventually("side effects served again", || {
        let (client, gateway, op) = (client.clone(), &gateways[0], op.clone());
        async move {
            let answer = read(
                call(
                    &client,
                    gateway,
                    "process_payment",
                    &json!({"op": op}),
                    &[("idempotency-key", op.as_str())],
                )
                .await,
            )
            .await;
            (answer.0 == 200).then_some(answer)
        }
    })
    .await;
    assert_eq!(status_code, 200, "{body}");
    assert_eq!(executions(&upstream, &op).await, 1);
}

/// An instance killed (SIGKILL) while its payment's answer is lost upstream: the caller's retry on another
/// instance is told the operation is in progress, then — the dead holder's lease run out — that its outcome is
/// unknown. Never a second execution.
#[tokio::test(flavor = "multi_thread")]
async fn an_instance_killed_mid_side_effect_never_leads_to_a_second_execution() {
    for (what, var, default) in STORES {
        let Some((url, _)) = support::raw::service(what, var, default).await else {
            continue;
        };
        let op = fresh("pay");
        let profile = format!(
            "[endpoints.process_payment]\nlose_with = \"hang\"\n{}",
            support::mcp::script("process_payment", &op, "\"commit_then_lose\", \"ok\"")
        );
        let upstream = chaos(&profile).await;
        let config = ConfigText::new()
            .store(&url)
            .tool(
                "process_payment",
                "{chaos}/tools/process_payment",
                "side_effects = true\nper_try_timeout = \"20s\"",
            )
            .build();
        let [a, b, _] = three(&config, &upstream);
        let client = client();
        let key = [("idempotency-key", op.as_str()), ("ballast-timeout-ms", "25000")];
        let in_flight = {
            let (client, url) = (client.clone(), a.url("/v1/tools/process_payment"));
            let (op, key) = (op.clone(), op.clone());
            tokio::spawn(async move {
                let _ = client
                    .post(url)
                    .header("idempotency-key", key)
                    .json(&json!({"op": op}))
                    .send()
                    .await;
            })
        };
        support::gateway::eventually(&format!("{what}: the payment ran upstream"), || async {
            (executions(&upstream, &op).await == 1).then_some(())
        })
        .await;
        a.kill9();
        in_flight.abort();
        // The retry on B: in progress while the dead holder's lease lasts, then outcome_unknown.
        let started = ballast::clock::now();
        let (code, headers, body) = loop {
            let answer = read(call(&client, &b, "process_payment", &json!({"op": op}), &key).await).await;
            if answer.0 != 409
                || ballast::clock::now().saturating_duration_since(started) > Duration::from_secs(30)
            {
                break answer;
            }
            let wait: u64 = header(&answer.1, "retry-after").parse().unwrap_or(1);
            tokio::time::sleep(Duration::from_secs(wait.min(2))).await;
        };
        assert_eq!(
            (code, header(&headers, "ballast-code")),
            (502, "outcome_unknown"),
            "{what}: {body}"
        );
        assert_eq!(
            executions(&upstream, &op).await,
            1,
            "{what}: never a second execution"
        );
    }
}
