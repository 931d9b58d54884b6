//! The hot decisions, each timed alone: a retry decision, a budget withdrawal, a breaker check + record, a
//! throttle admit + record, an admission enqueue/dequeue, a deadline header parse and the fingerprint of a 2 KiB JSON body. The budget and
//! the breaker and the throttle are also timed with a second thread hammering the same instance (contention).
//!
//! Run: `cargo bench -p ballast-core --bench decisions`. Target: each decision under 200 ns median (the
//! fingerprint hashes 2 KiB and is measured for reference). Results: BENCHMARKS.md.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use ballast_core::{
    AdaptiveThrottle, Admission, AdmissionConfig, AttemptOutcome, BreakerConfig, CallKind, CallResult,
    CallState, CircuitBreaker, Deadline, Instant, Offer, Priority, RatioBudget, RetryBudget, RetryPolicy,
    ThrottleConfig, ThrottleOutcome, TokenBucket, default_rng, fingerprint, inbound_timeout,
};
use criterion::{Criterion, criterion_group, criterion_main};

fn retry_decision(c: &mut Criterion) {
    let policy = RetryPolicy::default();
    let budget = RatioBudget::default();
    let mut rng = default_rng(Some(1));
    let deadline = Deadline::after(Instant::ZERO, Duration::from_secs(30));
    let outcome = AttemptOutcome::status(503);
    let now = Instant::from_millis(100);
    c.bench_function("retry_decision/503_read_only_tool", |b| {
        b.iter(|| {
            let mut call = CallState::new(CallKind::ReadOnlyTool, deadline);
            black_box(policy.decide(black_box(&outcome), &mut call, now, &budget, None, &mut rng))
        })
    });
}

/// Runs `op` on a second thread until the measurement is done, so the measured thread contends with it.
fn with_contention<T: Send + Sync + 'static>(shared: Arc<T>, op: fn(&T, u64), measure: impl FnOnce()) {
    let stop = Arc::new(AtomicBool::new(false));
    let other = {
        let (shared, stop) = (Arc::clone(&shared), Arc::clone(&stop));
        thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                op(&shared, i);
                i = i.wrapping_add(1);
            }
        })
    };
    measure();
    stop.store(true, Ordering::Relaxed);
    other.join().expect("contending thread panicked");
}

fn budget_op<B: RetryBudget>(budget: &B, i: u64) {
    let now = Instant::from_nanos(i * 1_000);
    budget.deposit(now);
    black_box(budget.try_withdraw(now));
}

fn budget_withdraw(c: &mut Criterion) {
    let mut group = c.benchmark_group("budget");
    let ratio = Arc::new(RatioBudget::default());
    let bucket = Arc::new(TokenBucket::new(10, 1.0).expect("valid bucket"));
    let mut i = 0u64;
    let mut tick = || {
        i += 1;
        Instant::from_nanos(i * 1_000)
    };
    // One call's worth of budget work: its first attempt deposits, a retry withdraws.
    group.bench_function("ratio/deposit", |b| b.iter(|| ratio.deposit(black_box(tick()))));
    group.bench_function("ratio/withdraw", |b| {
        b.iter(|| black_box(ratio.try_withdraw(black_box(tick()))))
    });
    group.bench_function("token_bucket/withdraw", |b| {
        b.iter(|| black_box(bucket.try_withdraw(black_box(tick()))))
    });
    with_contention(Arc::clone(&ratio), budget_op::<RatioBudget>, || {
        group.bench_function("ratio/deposit/2_threads", |b| {
            b.iter(|| ratio.deposit(black_box(tick())))
        });
        group.bench_function("ratio/withdraw/2_threads", |b| {
            b.iter(|| black_box(ratio.try_withdraw(black_box(tick()))))
        });
    });
    with_contention(Arc::clone(&bucket), budget_op::<TokenBucket>, || {
        group.bench_function("token_bucket/withdraw/2_threads", |b| {
            b.iter(|| black_box(bucket.try_withdraw(black_box(tick()))))
        });
    });
    group.finish();
}

fn breaker_op(breaker: &CircuitBreaker, i: u64) {
    let now = Instant::from_nanos(i * 1_000);
    if let Ok(permit) = breaker.try_acquire(now) {
        black_box(permit.record(CallResult::Success, Duration::from_millis(5), now));
    }
}

fn breaker_check_record(c: &mut Criterion) {
    let mut group = c.benchmark_group("breaker");
    let config = BreakerConfig::builder()
        .build()
        .expect("default breaker config is valid");
    let breaker = Arc::new(CircuitBreaker::seeded(config, Some(1)));
    let mut i = 0u64;
    group.bench_function("check+record", |b| {
        b.iter(|| {
            i += 1;
            breaker_op(&breaker, i)
        })
    });
    let shared = Arc::new(Arc::clone(&breaker));
    with_contention(
        shared,
        |b: &Arc<CircuitBreaker>, i| breaker_op(b, i),
        || {
            group.bench_function("check+record/2_threads", |b| {
                b.iter(|| {
                    i += 1;
                    breaker_op(&breaker, i)
                })
            });
        },
    );
    group.finish();
}

fn throttle_op(throttle: &AdaptiveThrottle, i: u64) {
    let now = Instant::from_nanos(i * 1_000);
    if throttle.try_admit(now).is_ok() {
        // One attempt in ten refused for load: the throttle's window has work to do, and nothing is refused.
        let outcome = if i.is_multiple_of(10) {
            ThrottleOutcome::Overloaded
        } else {
            ThrottleOutcome::Accepted
        };
        throttle.record(outcome, now);
    }
}

fn throttle_admit_record(c: &mut Criterion) {
    let mut group = c.benchmark_group("throttle");
    let throttle = Arc::new(AdaptiveThrottle::seeded(ThrottleConfig::default(), Some(1)));
    let mut i = 0u64;
    group.bench_function("admit+record", |b| {
        b.iter(|| {
            i += 1;
            throttle_op(&throttle, i)
        })
    });
    let shared = Arc::new(Arc::clone(&throttle));
    with_contention(
        shared,
        |t: &Arc<AdaptiveThrottle>, i| throttle_op(t, i),
        || {
            group.bench_function("admit+record/2_threads", |b| {
                b.iter(|| {
                    i += 1;
                    throttle_op(&throttle, i)
                })
            });
        },
    );
    group.finish();
}

fn admission_enqueue_dequeue(c: &mut Criterion) {
    let mut group = c.benchmark_group("admission");
    for waiting in [16usize, 256] {
        let mut queue = Admission::new(AdmissionConfig::new(32, 1024)).expect("valid admission config");
        let now = Instant::from_millis(1);
        let deadline = Instant::from_millis(30_000);
        // Fill every slot, then keep `waiting` requests queued behind them.
        for n in 0..32 + waiting {
            let _ = queue.offer(Priority::ALL[n % 4], deadline, n, now);
        }
        group.bench_function(format!("offer+release/{waiting}_waiting"), |b| {
            b.iter(|| {
                let offered = queue.offer(black_box(Priority::Critical), deadline, 0, now);
                debug_assert!(matches!(offered, Offer::Queued { .. }));
                black_box(queue.release(now, None))
            })
        });
    }
    group.finish();
}

fn deadline_header_parse(c: &mut Criterion) {
    let headers = [
        ("content-type", "application/json"),
        ("authorization", "Bearer sk-test"),
        ("x-stainless-timeout", "600"),
        ("x-stainless-read-timeout", "600.0"),
        ("grpc-timeout", "2500m"),
        ("ballast-timeout-ms", "30000"),
    ];
    c.bench_function("deadline_headers/inbound_6_headers", |b| {
        b.iter(|| {
            black_box(inbound_timeout(
                black_box(headers),
                Duration::from_secs(30),
                Duration::from_secs(300),
            ))
        })
    });
}

fn fingerprint_2k(c: &mut Criterion) {
    let items: Vec<String> = (0..32)
        .map(|i| {
            format!(
                r#"{{"sku":"SKU-{i:05}","qty":{},"price":{}.99,"note":"gift wrap"}}"#,
                i % 3 + 1,
                i * 7
            )
        })
        .collect();
    let body = format!(
        r#"{{"order_id":"ord_8f2a9c","op":"refund-7731","amount":129.5,"currency":"EUR","items":[{}]}}"#,
        items.join(",")
    );
    assert!((1900..2300).contains(&body.len()), "body is {} bytes", body.len());
    c.bench_function("fingerprint/json_2KiB", |b| {
        b.iter(|| {
            black_box(fingerprint(
                "POST",
                "/v1/tools/create_refund",
                Some("application/json"),
                black_box(body.as_bytes()),
            ))
        })
    });
}

criterion_group!(
    benches,
    retry_decision,
    budget_withdraw,
    breaker_check_record,
    throttle_admit_record,
    admission_enqueue_dequeue,
    deadline_header_parse,
    fingerprint_2k
);
criterion_main!(benches);
