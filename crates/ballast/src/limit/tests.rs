use std::time::Duration;

use ballast_config::{Limits, OnStoreLoss};
use ballast_core::Deadline;

use super::*;
use crate::Cancel;

fn limits(requests: Option<u32>, tokens: Option<u32>) -> AccountLimits {
    AccountLimits::new(
        Arc::from("m[0] mock"),
        "http://h/v1|mock|",
        &Limits {
            requests_per_minute: requests,
            tokens_per_minute: tokens,
            burst: Duration::ZERO,
            on_store_loss: OnStoreLoss::Share,
        },
        |_| None,
        #[cfg(feature = "idempotency")]
        None,
    )
}

/// Without a shared store, the whole limit is this process's: 60 a minute is one a second; a call whose deadline
/// holds the wait waits for its slot, one whose deadline cannot is refused at once with the time it could go.
#[tokio::test(start_paused = true)]
async fn a_call_waits_for_its_slot_when_its_deadline_holds_it_else_is_refused_with_when() {
    let limits = limits(Some(60), None);
    assert_eq!(limits.mode(), LimitMode::Local);
    let now = clock::now();
    let long = Deadline::after(now, Duration::from_secs(10));
    limits.charge(0, &long, &Cancel::never()).await.unwrap();
    // The second waits a second for its slot.
    limits.charge(0, &long, &Cancel::never()).await.unwrap();
    assert_eq!(
        clock::now().saturating_duration_since(now),
        Duration::from_secs(1)
    );
    // A call with 500 ms left cannot hold a 1 s wait: refused, told when.
    let short = Deadline::after(clock::now(), Duration::from_millis(500));
    let Err(Error::Overloaded { reason, retry_after }) = limits.charge(0, &short, &Cancel::never()).await
    else {
        panic!("refused")
    };
    assert_eq!(reason, Overload::Limited);
    assert_eq!(retry_after, Some(Duration::from_secs(1)));
    assert_eq!(
        clock::now().saturating_duration_since(now),
        Duration::from_secs(1),
        "a refusal is at once"
    );
}

/// Tokens are charged as estimated and corrected by what the answer used.
#[tokio::test(start_paused = true)]
async fn tokens_are_charged_as_estimated_and_corrected_by_the_usage() {
    let limits = limits(None, Some(6_000)); // 100 tokens a second
    let deadline = Deadline::after(clock::now(), Duration::from_millis(900));
    let charged = limits.charge(500, &deadline, &Cancel::never()).await.unwrap();
    // 500 tokens booked: the next token could go in 5 s, beyond this deadline.
    assert!(limits.charge(1, &deadline, &Cancel::never()).await.is_err());
    // The answer used 50: 450 come back, and the next call goes once those 50 are paid (0.5 s), in its deadline.
    limits.correct(charged, 50);
    let started = clock::now();
    limits.charge(1, &deadline, &Cancel::never()).await.unwrap();
    assert_eq!(
        clock::now().saturating_duration_since(started),
        Duration::from_millis(500)
    );
}

/// An attempt refused below the limits before anything was sent (breaker open, throttled, a cancelled wait) gives
/// back what it was charged: the provider counted nothing.
#[tokio::test(start_paused = true)]
async fn an_attempt_never_sent_gives_its_charge_back() {
    let limits = limits(Some(60), Some(6_000));
    let deadline = Deadline::after(clock::now(), Duration::from_millis(500));
    let charged = limits.charge(300, &deadline, &Cancel::never()).await.unwrap();
    assert!(
        limits.charge(1, &deadline, &Cancel::never()).await.is_err(),
        "no room left"
    );
    limits.give_back(charged);
    limits
        .charge(300, &deadline, &Cancel::never())
        .await
        .expect("room again, at once");
}

/// Small limits divided among many instances keep their fraction: 2 a minute over 5 instances is one every 150 s
/// each, never 1 a minute each (5 in all).
#[test]
fn a_share_keeps_its_fraction() {
    let limits = limits(Some(2), None);
    assert_eq!(limits.gcra(2, 5).interval_us(), 150e6);
}

#[test]
fn an_attempt_is_estimated_from_its_body_and_the_output_it_asks_for() {
    let body = br#"{"model":"m","input":"hello there","max_output_tokens":100}"#;
    assert_eq!(estimate_tokens(body), (body.len() as u64).div_ceil(4) + 100);
    assert_eq!(estimate_tokens(b"not json"), 2);
}
