//! What the agents ask, a 202 read, and the drain against a fake gateway whose operations end in every way.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

use super::*;

#[test]
fn a_side_effect_asks_to_wait_for_what_is_left_of_its_deadline_and_the_drain_window_scaled() {
    let ask = DeferAsk::new(1.0);
    let mut headers = HeaderMap::new();
    let ttl = ask.ask(&mut headers, Duration::from_millis(29_500));
    assert_eq!(ttl, Duration::from_millis(89_500));
    assert_eq!(headers["prefer"], "respond-async");
    assert_eq!(headers["ballast-defer-ttl"], "89500ms");
    // The gateway reads it as a duration.
    assert_eq!(ballast_config::parse_duration("89500ms").ok(), Some(ttl));
    // At a tenth of real time: 2.95 s + 6 s; at a twentieth of that, the real-time floor.
    assert_eq!(
        DeferAsk::new(0.1).ttl(Duration::from_millis(2950)),
        Duration::from_millis(8950)
    );
    assert_eq!(DeferAsk::new(0.01).ttl(Duration::from_millis(300)), TTL_FLOOR);
}

#[test]
fn a_202_is_read_for_its_key_location_and_expiry() {
    let at = Instant::from_millis(1_000);
    let mut headers = HeaderMap::new();
    headers.insert("location", HeaderValue::from_static("/v1/operations/k-1"));
    let body = br#"{"key": "k-1", "status": "queued", "expires_in_ms": 4000}"#;
    let deferral = Deferral::accepted(
        "create_refund",
        Some("fs-1-0".into()),
        &headers,
        body,
        at,
        Duration::ZERO,
    );
    assert_eq!(deferral.key, "k-1");
    assert_eq!(deferral.location, "/v1/operations/k-1");
    assert_eq!(deferral.expires, Instant::from_millis(5_000));
    // Without a body: the key from its header, the operation where the gateway serves them, the ttl asked.
    let mut headers = HeaderMap::new();
    headers.insert("ballast-idempotency-key", HeaderValue::from_static("k-2"));
    let bare = Deferral::accepted("process_payment", None, &headers, b"", at, Duration::from_secs(2));
    assert_eq!(
        (bare.key.as_str(), bare.location.as_str()),
        ("k-2", "/v1/operations/k-2")
    );
    assert_eq!(bare.expires, Instant::from_millis(3_000));
}

#[test]
fn an_operations_answer_is_read_as_ended_or_not() {
    let read = |status: u16, body: &str| Read::of(StatusCode::from_u16(status).unwrap(), body.as_bytes());
    let completed = read(200, r#"{"status": "completed", "took_ms": 1234}"#).unwrap();
    assert_eq!(completed.state(), Some(DeferredState::Completed));
    assert_eq!(completed.took, Some(Duration::from_millis(1234)));
    assert_eq!(read(200, r#"{"status": "queued"}"#).unwrap().state(), None);
    assert_eq!(read(200, r#"{"status": "in_progress"}"#).unwrap().state(), None);
    assert_eq!(
        read(404, r#"{"status": "not_found"}"#).unwrap().state(),
        Some(DeferredState::Unfinished)
    );
    assert_eq!(read(503, r#"{"code": "store_unavailable"}"#), None);
}

/// A fake gateway: each key's answers in turn (the last one repeated), a status and a body each.
async fn fake_gateway(script: HashMap<&'static str, Vec<(u16, &'static str)>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reads: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let script = Arc::new(script);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (script, reads) = (Arc::clone(&script), Arc::clone(&reads));
            let service = service_fn(move |request: Request<Incoming>| {
                let key = request.uri().path().rsplit('/').next().unwrap_or("").to_owned();
                let mut reads = reads.lock().unwrap();
                let n = reads.entry(key.clone()).or_default();
                let answers = &script[key.as_str()];
                let (status, body) = answers[(*n).min(answers.len() - 1)];
                *n += 1;
                let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
                *response.status_mut() = StatusCode::from_u16(status).unwrap();
                async move { Ok::<_, Infallible>(response) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    format!("http://{addr}")
}

fn deferral(key: &str, expires: Instant) -> Deferral {
    Deferral {
        key: key.to_owned(),
        location: format!("/v1/operations/{key}"),
        tool: "create_refund".to_owned(),
        op: Some(format!("op-{key}")),
        expires,
    }
}

#[tokio::test]
async fn the_drain_reads_each_operation_until_it_ends_and_stops_at_its_deadline() {
    let queued = (200, r#"{"status": "queued"}"#);
    let base = fake_gateway(HashMap::from([
        (
            "a",
            vec![queued, (200, r#"{"status": "completed", "took_ms": 700}"#)],
        ),
        ("b", vec![(200, r#"{"status": "expired", "took_ms": 9000}"#)]),
        ("c", vec![(200, r#"{"status": "failed", "took_ms": 10}"#)]),
        (
            "d",
            vec![(200, r#"{"status": "outcome_unknown", "took_ms": 10}"#)],
        ),
        ("e", vec![(200, r#"{"status": "in_progress"}"#)]),
        ("f", vec![(404, r#"{"status": "not_found"}"#)]),
        ("g", vec![(503, r#"{"code": "store_unavailable"}"#)]),
    ]))
    .await;
    // Every one expired 9.5 s ago: the drain reads until half a second from now, then gives up on the rest.
    let expired = clock::now() - (DRAIN_SLACK - Duration::from_millis(500));
    let mut deferrals: Vec<Deferral> = ["a", "b", "c", "d", "e", "f", "g"]
        .iter()
        .map(|key| deferral(key, expired))
        .collect();
    deferrals.push(Deferral {
        key: String::new(),
        ..deferral("h", expired)
    });
    let began = clock::now();
    let run = drain(&reqwest::Client::new(), &[base], "k", deferrals).await;
    assert!(clock::now().saturating_duration_since(began) < Duration::from_secs(3));
    let state = |key: &str| {
        let end = run
            .ends
            .iter()
            .find(|end| end.key == key)
            .expect("every one ends");
        (end.state, end.last_status.as_str(), end.took)
    };
    use DeferredState::*;
    assert_eq!(
        state("a"),
        (Completed, "completed", Some(Duration::from_millis(700)))
    );
    assert_eq!(state("b").0, Expired);
    assert_eq!(state("c").0, Failed);
    assert_eq!(state("d").0, OutcomeUnknown);
    assert_eq!(state("e"), (Unfinished, "in_progress", None));
    assert_eq!(state("f"), (Unfinished, "not_found", None));
    assert_eq!(state("g"), (Unfinished, "unread", None));
    assert_eq!(state("").1, "no_key");
    assert_eq!(run.ends.len(), 8, "each once");
    assert_eq!(
        drain(&reqwest::Client::new(), &[], "k", Vec::new()).await.ends,
        []
    );
}
