//! Operations per second of each idempotency store: a full claim -> dispatch -> complete of a fresh key (what
//! every first request costs), and a replay (a claim that finds the completed record: what a retry costs), at
//! concurrency 1 and 32, for a fixed wall-clock time each. For the stores that share state between instances
//! (Redis, PostgreSQL), a second table: `visit_run` (each caller its own run, offering a deadline) and `reserve`
//! (every caller charging the same two limits, requests and tokens, as every call of one account does; the
//! limits never refuse, so each reservation writes).
//!
//! `cargo bench -p ballast-store --bench store` — backends from BALLAST_TEST_POSTGRES_URL and
//! BALLAST_TEST_REDIS_URL (defaults: the local servers); SQLite in a temporary file (WAL, default
//! synchronous = NORMAL). An unreachable server is skipped with a note. `BALLAST_BENCH_SECONDS` sets the time per
//! measurement (default 3).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ballast_core::{Gcra, IdempotencyKey, fingerprint};
use ballast_store::{
    Charge, ClaimOutcome, ClaimRequest, ExpiredDispatch, IdempotencyStore, OwnerToken, Reservation, RunKey,
    Scope, SharedState, StoreOptions, StoredResponse,
};
use bytes::Bytes;

const CONCURRENCY: [usize; 2] = [1, 32];

#[tokio::main]
async fn main() {
    let seconds = std::env::var("BALLAST_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let window = Duration::from_secs(seconds);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let backends = [
        (
            "sqlite (file, WAL)",
            format!("sqlite://{}", dir.path().join("bench.db").display()),
        ),
        (
            "postgres",
            env_or(
                "BALLAST_TEST_POSTGRES_URL",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
        ),
        (
            "redis",
            env_or("BALLAST_TEST_REDIS_URL", "redis://127.0.0.1:6379"),
        ),
    ];
    let mut stores = Vec::new();
    println!("| backend | concurrency | claim+dispatch+complete /s | replay /s | replay / claim |");
    println!("|---|---|---|---|---|");
    for (name, url) in backends {
        let store = match ballast_store::open(&url, StoreOptions::default()).await {
            Ok(store) => store,
            Err(error) => {
                println!("| {name} | skipped: {error} | | | |");
                continue;
            }
        };
        for concurrency in CONCURRENCY {
            let writes = throughput(&store, concurrency, window, Work::FirstRequest).await;
            let replays = throughput(&store, concurrency, window, Work::Replay).await;
            println!(
                "| {name} | {concurrency} | {writes:.0} | {replays:.0} | {:.2} |",
                replays / writes
            );
        }
        stores.push((name, store));
    }
    println!();
    println!("| backend | concurrency | visit_run /s | reserve (2 limits) /s |");
    println!("|---|---|---|---|");
    for (name, store) in &stores {
        if store.shared_state().is_none() {
            continue;
        }
        for concurrency in CONCURRENCY {
            let visits = throughput(store, concurrency, window, Work::VisitRun).await;
            let reserves = throughput(store, concurrency, window, Work::Reserve).await;
            println!("| {name} | {concurrency} | {visits:.0} | {reserves:.0} |");
        }
    }
}

fn env_or(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

#[derive(Clone, Copy)]
enum Work {
    FirstRequest,
    Replay,
    VisitRun,
    Reserve,
}

/// Operations per second over `window` with `concurrency` callers each running `work` in a loop.
async fn throughput(
    store: &Arc<dyn IdempotencyStore>,
    concurrency: usize,
    window: Duration,
    work: Work,
) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let principal = format!("bench-{}", OwnerToken::random().to_hex());
    let limits = Arc::new(account_limits(&principal));
    let mut callers = Vec::new();
    for caller in 0..concurrency {
        let (store, stop, done) = (Arc::clone(store), Arc::clone(&stop), Arc::clone(&done));
        let replayed = Scope::new(principal.clone(), "POST /bench", key(&format!("replay-{caller}")));
        let run = RunKey::new(principal.clone(), format!("run-{caller}"));
        let (principal, limits) = (principal.clone(), Arc::clone(&limits));
        callers.push(tokio::spawn(async move {
            let shared = store.shared_state();
            if let Work::Replay = work {
                first_request(&*store, &replayed).await;
            }
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match work {
                    Work::FirstRequest => {
                        let scope =
                            Scope::new(principal.clone(), "POST /bench", key(&format!("{caller}-{n}")));
                        first_request(&*store, &scope).await;
                    }
                    Work::Replay => {
                        let outcome = store.claim(&replayed, &claim()).await.expect("replay");
                        assert!(matches!(outcome, ClaimOutcome::Completed(_)), "{outcome:?}");
                    }
                    Work::VisitRun => visit(shared_of(&shared), &run).await,
                    Work::Reserve => reserve(shared_of(&shared), &limits).await,
                }
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // The callers' setup (one first request each for replays) is not counted: count from here.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let start = done.load(Ordering::Relaxed);
    let timer = wall_clock();
    tokio::time::sleep(window).await;
    let (count, elapsed) = (done.load(Ordering::Relaxed) - start, timer.elapsed());
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.await.expect("a caller panicked");
    }
    count as f64 / elapsed.as_secs_f64()
}

/// A benchmark measures wall time: the one place this binary reads the clock.
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

async fn first_request(store: &dyn IdempotencyStore, scope: &Scope) {
    let claim = claim();
    let outcome = store.claim(scope, &claim).await.expect("claim");
    assert_eq!(outcome, ClaimOutcome::Acquired);
    store.mark_dispatched(scope, claim.owner).await.expect("dispatch");
    store
        .complete(scope, claim.owner, &response())
        .await
        .expect("complete");
}

fn shared_of(shared: &Option<Arc<dyn SharedState>>) -> &dyn SharedState {
    shared.as_deref().expect("a store with shared state")
}

/// A visit of a run as each call of it makes one: offering the call's deadline.
async fn visit(shared: &dyn SharedState, run: &RunKey) {
    let ttl = Duration::from_secs(60);
    let state = shared
        .visit_run(run, Some(Duration::from_secs(30)), ttl)
        .await
        .expect("visit");
    assert!(state.deadline_in_ms.is_some());
}

/// One account's requests and tokens per minute, far above what the bench can send (every charge is booked).
fn account_limits(account: &str) -> Vec<Charge> {
    let limit = |what: &str, cost| Charge {
        key: format!("{what}|bench|{account}"),
        rate: Gcra::per_minute(u64::MAX, Duration::from_secs(1)),
        cost,
    };
    vec![limit("rpm", 1.0), limit("tpm", 1200.0)]
}

async fn reserve(shared: &dyn SharedState, limits: &[Charge]) {
    let reservation = shared.reserve(limits, Duration::ZERO).await.expect("reserve");
    assert_eq!(reservation, Reservation::Granted(Duration::ZERO));
}

fn key(name: &str) -> IdempotencyKey {
    IdempotencyKey::parse(&format!("{}-{name}", OwnerToken::random().to_hex())).expect("a valid key")
}

fn claim() -> ClaimRequest {
    ClaimRequest {
        fingerprint: fingerprint(
            "POST",
            "/bench",
            Some("application/json"),
            br#"{"order":"o_1","amount":1299}"#,
        )
        .expect("one member per name"),
        owner: OwnerToken::random(),
        lease: Duration::from_secs(30),
        expired_dispatch: ExpiredDispatch::OutcomeUnknown,
    }
}

fn response() -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: vec![("content-type".to_owned(), b"application/json".to_vec())],
        body: Bytes::from_static(br#"{"refund":"re_1","status":"succeeded","amount":1299}"#),
    }
}
