//! The conformance suite against the real Redis server (`BALLAST_TEST_REDIS_URL`, default the local one), and
//! what is Redis's own: key expiry, stragglers, corrupt keys, the claim script against `decide.rs`.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;

use super::*;
use crate::RecordState;
use crate::conformance::{
    Opener, Opening, acquire_for_tests as acquire, fresh_scope, print, request, service_unavailable,
    service_url,
};
use crate::decide::{ClaimStep, Stored, claim_step};

fn redis_url() -> String {
    service_url("BALLAST_TEST_REDIS_URL", "redis://127.0.0.1:6379")
}

/// The store on the test server under `prefix`, or `None` (skipped) when the server is unreachable.
async fn connect(prefix: &str, options: StoreOptions) -> Option<RedisStore> {
    let url = redis_url();
    match RedisStore::open_with_prefix(&url, prefix, options).await {
        Ok(store) => Some(store),
        Err(error) => service_unavailable(&format!("Redis at {}", without_password(&url)), error),
    }
}

fn shared(options: StoreOptions) -> Opening {
    Box::pin(async move {
        let store = connect(RedisStore::DEFAULT_PREFIX, options).await?;
        Some(Arc::new(store) as Arc<dyn IdempotencyStore>)
    })
}

const SHARED: Opener = shared;

mod conformance {
    crate::conformance_tests!(super::SHARED);
    crate::deferred_conformance_tests!(super::SHARED);
}

mod shared_state_conformance {
    crate::shared_state_conformance_tests!(super::SHARED);
}

/// A prefix no other test uses, so counts and scans see only this test's keys.
fn private_prefix() -> String {
    format!("ballast:test:{}:", OwnerToken::random().to_hex())
}

/// A plain connection for planting and inspecting keys behind the store's back.
async fn raw(store: &RedisStore) -> ConnectionManager {
    store.connection.clone()
}

const LONG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn an_unreachable_server_is_unavailable_and_quickly() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}");
    let opening = RedisStore::open(&url, StoreOptions::default());
    let result = tokio::time::timeout(Duration::from_secs(20), opening)
        .await
        .expect("open must give up within its retries");
    assert!(matches!(result, Err(StoreError::Unavailable(_))), "{result:?}");
}

#[tokio::test]
async fn bad_urls_are_refused_without_their_password() {
    for url in [
        "redis://u:secret@host:notaport",
        "rediss://u:secret@127.0.0.1:6379",
    ] {
        let error = RedisStore::open(url, StoreOptions::default()).await.unwrap_err();
        assert!(
            matches!(error, StoreError::UnsupportedUrl { ref url } if url.contains("u:***@")),
            "{error:?}"
        );
        assert!(!error.to_string().contains("secret"));
    }
}

#[tokio::test]
async fn open_dispatches_redis_urls_here() {
    let Some(_) = connect(RedisStore::DEFAULT_PREFIX, StoreOptions::default()).await else {
        return;
    };
    let store = crate::open(&redis_url(), StoreOptions::default()).await.unwrap();
    assert_eq!(store.backend(), "redis");
}

/// Every write that sets a record's retention end sets the key's Redis expiry to the same millisecond, so Redis
/// deletes the record exactly when reads start treating it as absent.
#[tokio::test]
async fn the_key_expires_at_the_records_retention_end() {
    let Some(store) = connect(&private_prefix(), StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let scope = fresh_scope();
    let key = store.key(&scope);
    let claim = request("{}", LONG);
    let expiry_matches = |when: &'static str| {
        let (key, mut raw) = (key.clone(), raw.clone());
        async move {
            let exp: i64 = raw.hget(&key, "exp").await.unwrap();
            let expire_time: i64 = redis::cmd("PEXPIRETIME")
                .arg(&key)
                .query_async(&mut raw)
                .await
                .unwrap();
            assert_eq!(expire_time, exp, "after {when}");
            exp
        }
    };
    acquire(&store, &scope, &claim).await;
    let claimed = expiry_matches("claim").await;
    store.mark_dispatched(&scope, claim.owner).await.unwrap();
    assert_eq!(
        expiry_matches("dispatch").await,
        claimed,
        "dispatch keeps the expiry"
    );
    store
        .complete(&scope, claim.owner, &crate::conformance::response(200, b"ok"))
        .await
        .unwrap();
    let completed = expiry_matches("complete").await;
    assert!(
        completed < claimed,
        "completion counts the retention from now, not from the lease's end"
    );
    let ttl: i64 = raw.pttl(&key).await.unwrap();
    assert!(ttl > 0 && ttl <= millis(DEFAULT_RETENTION_FOR_TEST), "pttl {ttl}");
}

const DEFAULT_RETENTION_FOR_TEST: Duration = crate::DEFAULT_RETENTION;

/// `reap` deletes records past their retention that lost their Redis expiry, and only those: a live record
/// without an expiry and a key of another type under the prefix stay.
#[tokio::test]
async fn reap_deletes_stragglers_that_lost_their_expiry() {
    let prefix = private_prefix();
    let short = StoreOptions {
        retention: Duration::from_millis(200),
    };
    let (Some(store), Some(long)) = (
        connect(&prefix, short).await,
        connect(&prefix, StoreOptions::default()).await,
    ) else {
        return;
    };
    let mut raw = raw(&store).await;
    let (straggler, live) = (fresh_scope(), fresh_scope());
    for scope in [&straggler, &live] {
        let claim = request("{}", LONG);
        acquire(&long, scope, &claim).await;
        long.mark_dispatched(scope, claim.owner).await.unwrap();
        long.mark_outcome_unknown(scope, claim.owner).await.unwrap();
    }
    // Both lose their expiry; the straggler's retention end then passes. Written with a long retention and moved
    // into the past in one atomic step, so no real-time window lets Redis delete it first (a short retention
    // could run out between the write and a separate PERSIST on a stalled machine).
    let _: bool = raw.persist(long.key(&live)).await.unwrap();
    let _: () = redis::pipe()
        .atomic()
        .persist(store.key(&straggler))
        .ignore()
        .hset(store.key(&straggler), "exp", 1)
        .ignore()
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(raw.exists::<_, bool>(store.key(&straggler)).await.unwrap());
    let other_type = format!("{prefix}not-a-record");
    let _: () = raw.set(&other_type, "x").await.unwrap();
    let give_up = crate::clock::monotonic_after(Duration::from_secs(10));
    while store.lookup(&straggler).await.unwrap().is_some() {
        assert!(!crate::clock::passed(give_up), "the straggler never expired");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(store.reap().await.unwrap(), 1);
    assert!(
        !raw.exists::<_, bool>(store.key(&straggler)).await.unwrap(),
        "deleted"
    );
    assert!(
        raw.exists::<_, bool>(long.key(&live)).await.unwrap(),
        "a live record stays"
    );
    assert!(
        raw.exists::<_, bool>(&other_type).await.unwrap(),
        "other keys stay"
    );
    assert_eq!(store.reap().await.unwrap(), 0, "nothing left to reap");
    let _: () = raw.del(&[&other_type, &long.key(&live)]).await.unwrap();
}

/// A key of another type, or a hash this version cannot read, is reported as corrupt — not as unavailable, and
/// never overwritten by a claim.
#[tokio::test]
async fn unreadable_records_are_corrupt() {
    let Some(store) = connect(&private_prefix(), StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let (string_key, bad_state) = (fresh_scope(), fresh_scope());
    let _: () = raw.set_ex(store.key(&string_key), "x", 60).await.unwrap();
    let (fingerprint, owner) = (print("{}"), OwnerToken::random().to_hex());
    let fields: [(&str, &[u8]); 5] = [
        ("state", b"paused"),
        ("fp", &fingerprint.as_bytes()[..]),
        ("owner", owner.as_bytes()),
        ("lease", b"99999999999999"),
        ("exp", b"99999999999999"),
    ];
    let _: () = raw.hset_multiple(store.key(&bad_state), &fields).await.unwrap();
    let _: bool = raw.expire(store.key(&bad_state), 60).await.unwrap();
    for scope in [&string_key, &bad_state] {
        let claimed = store.claim(scope, &request("{}", LONG)).await;
        assert!(
            matches!(claimed, Err(StoreError::Corrupt(_))),
            "claim: {claimed:?}"
        );
        let looked_up = store.lookup(scope).await;
        assert!(
            matches!(looked_up, Err(StoreError::Corrupt(_))),
            "lookup: {looked_up:?}"
        );
    }
    let kept: String = raw.get(store.key(&string_key)).await.unwrap();
    assert_eq!(kept, "x");
    let _: () = raw
        .del(&[store.key(&string_key), store.key(&bad_state)])
        .await
        .unwrap();
}

/// A lease or retention too large for Redis's Lua numbers is capped, not rejected or garbled.
#[tokio::test]
async fn huge_leases_and_retentions_are_capped() {
    let options = StoreOptions {
        retention: Duration::MAX,
    };
    let Some(store) = connect(&private_prefix(), options).await else {
        return;
    };
    let scope = fresh_scope();
    acquire(&store, &scope, &request("{}", Duration::MAX)).await;
    let record = store.lookup(&scope).await.unwrap().unwrap();
    assert!(
        record.lease_left > Duration::from_secs(1_000_000_000),
        "{:?}",
        record.lease_left
    );
    let _: () = raw(&store).await.del(store.key(&scope)).await.unwrap();
}

#[test]
fn prefixes_match_only_themselves_in_scan_patterns() {
    assert_eq!(glob_escape("ballast:idem:"), "ballast:idem:");
    assert_eq!(glob_escape(r"a*b?[c]\"), r"a\*b\?\[c\]\\");
}

#[test]
fn only_noeviction_keeps_records_under_memory_pressure() {
    assert!(!policy_may_evict_records("noeviction"));
    for policy in ["allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"] {
        assert!(policy_may_evict_records(policy), "{policy}");
    }
}

#[path = "decide_tests.rs"]
mod decide_tests;

#[path = "shared_tests.rs"]
mod shared_tests;

#[path = "deferred_tests.rs"]
mod deferred_tests;
