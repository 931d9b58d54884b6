//! What is Redis's own in the deferred queue: ended operations expire by themselves and only stragglers are
//! reaped, the indexes let go of what ended (by a worker or for want of one), a hand-deleted operation does not
//! block its queue, huge durations are capped, and a record someone else took over is left as they made it.

use bytes::Bytes;

use super::*;
use crate::conformance::response;
use crate::{Finish, NewOperation, OperationState, RecordState};

fn operation(tool: &str, ttl: Duration, due_in: Duration) -> NewOperation {
    NewOperation {
        tool: tool.to_owned(),
        priority: 1,
        request: Bytes::from_static(b"{}"),
        max_attempts: 3,
        ttl,
        due_in,
        last: None,
    }
}

/// A fresh scope, claimed and deferred as `new`; returns it and the record's owner.
async fn deferred(store: &RedisStore, new: &NewOperation) -> (Scope, OwnerToken) {
    let scope = fresh_scope();
    let claim = request("{}", LONG);
    acquire(store, &scope, &claim).await;
    store.deferred.defer(&scope, claim.owner, new).await.unwrap();
    (scope, claim.owner)
}

async fn take(store: &RedisStore, tool: &str) -> Option<OwnerToken> {
    let worker = OwnerToken::random();
    let taken = store
        .deferred
        .take(&[tool.to_owned()], worker, LONG)
        .await
        .unwrap();
    taken.map(|_| worker)
}

/// An unfinished operation has no expiry; an ended one expires at the end of its retention, the same
/// millisecond its `keep` says, and its tool's indexes (and the set of tools) let go of it.
#[tokio::test]
async fn an_ended_operation_expires_at_its_retention_end_and_leaves_the_indexes() {
    let prefix = private_prefix();
    let Some(store) = connect(&prefix, StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let (scope, _) = deferred(&store, &operation("refunds", LONG, Duration::ZERO)).await;
    let key = store.deferred.op_key(&scope);
    assert_eq!(
        raw.pttl::<_, i64>(&key).await.unwrap(),
        -1,
        "no expiry while unfinished"
    );
    let tools: Vec<String> = raw.smembers(format!("{prefix}defer:tools")).await.unwrap();
    assert_eq!(tools, ["refunds"]);
    let worker = take(&store, "refunds").await.expect("due");
    store
        .deferred
        .finish(&scope, worker, &Finish::Completed(response(200, b"ok")), true)
        .await
        .unwrap();
    let keep: i64 = raw.hget(&key, "keep").await.unwrap();
    let expire_time: i64 = redis::cmd("PEXPIRETIME")
        .arg(&key)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(expire_time, keep);
    for index in ["queued", "taken", "all", "ends"] {
        let exists: bool = raw
            .exists(format!("{prefix}defer:{index}:refunds"))
            .await
            .unwrap();
        assert!(!exists, "the {index} index let go of the ended operation");
    }
    let tools: Vec<String> = raw.smembers(format!("{prefix}defer:tools")).await.unwrap();
    assert!(tools.is_empty(), "{tools:?}");
    let record = store.lookup(&scope).await.unwrap().unwrap();
    assert!(matches!(record.state, RecordState::Completed(_)));
    let _: () = raw
        .del(&[key, store.key(&scope), format!("{prefix}defer:seq")])
        .await
        .unwrap();
}

/// `reap` deletes ended operations past their retention that lost their expiry, and nothing unfinished.
#[tokio::test]
async fn reap_deletes_ended_stragglers_only() {
    let prefix = private_prefix();
    let Some(store) = connect(&prefix, StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let (ended, _) = deferred(&store, &operation("a", LONG, Duration::ZERO)).await;
    let worker = take(&store, "a").await.expect("due");
    store
        .deferred
        .finish(&ended, worker, &Finish::Expired, false)
        .await
        .unwrap();
    let (waiting, _) = deferred(&store, &operation("a", LONG, LONG)).await;
    let _: () = redis::pipe()
        .atomic()
        .persist(store.deferred.op_key(&ended))
        .ignore()
        .hset(store.deferred.op_key(&ended), "keep", 1)
        .ignore()
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(
        store.deferred.lookup(&ended).await.unwrap(),
        None,
        "past its retention"
    );
    assert_eq!(store.deferred.reap().await.unwrap(), 1);
    assert!(
        !raw.exists::<_, bool>(store.deferred.op_key(&ended))
            .await
            .unwrap()
    );
    assert_eq!(store.deferred.reap().await.unwrap(), 0, "the waiting one stays");
    let still = store.deferred.lookup(&waiting).await.unwrap().unwrap();
    assert_eq!(still.state, OperationState::Queued);
    let keys: Vec<String> = raw.keys(format!("{prefix}*")).await.unwrap();
    let _: () = raw.del(keys).await.unwrap();
}

/// Operations nobody works end out of every index, as a worker's end leaves them, and expire at their retention
/// end; the entries of one deleted by hand are dropped, not counted.
#[tokio::test]
async fn abandoned_operations_end_out_of_every_index() {
    let prefix = private_prefix();
    let Some(store) = connect(&prefix, StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let short = Duration::from_millis(100);
    let (one, _) = deferred(&store, &operation("gone", short, Duration::ZERO)).await;
    let (two, _) = deferred(&store, &operation("gone", short, Duration::ZERO)).await;
    let (vanished, _) = deferred(&store, &operation("gone", short, Duration::ZERO)).await;
    let _: () = raw.del(store.deferred.op_key(&vanished)).await.unwrap();
    let taken = (store.deferred)
        .take(&["gone".to_owned()], OwnerToken::random(), short)
        .await
        .unwrap()
        .expect("due");
    tokio::time::sleep(short * 3).await;
    assert_eq!(store.deferred.expire_abandoned(Duration::ZERO).await.unwrap(), 2);
    assert_eq!(store.deferred.expire_abandoned(Duration::ZERO).await.unwrap(), 0);
    for index in ["queued", "taken", "all", "ends"] {
        let exists: bool = raw.exists(format!("{prefix}defer:{index}:gone")).await.unwrap();
        assert!(!exists, "the {index} index let go of the ended operations");
    }
    let tools: Vec<String> = raw.smembers(format!("{prefix}defer:tools")).await.unwrap();
    assert!(tools.is_empty(), "{tools:?}");
    for scope in [&one, &two] {
        let ended = store.deferred.lookup(scope).await.unwrap().unwrap();
        assert_eq!(ended.state, OperationState::Expired, "{}", taken.interrupted);
        let key = store.deferred.op_key(scope);
        let keep: i64 = raw.hget(&key, "keep").await.unwrap();
        let expire_time: i64 = redis::cmd("PEXPIRETIME")
            .arg(&key)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert_eq!(expire_time, keep);
        assert_eq!(store.lookup(scope).await.unwrap(), None, "the record is released");
    }
    let keys: Vec<String> = raw.keys(format!("{prefix}*")).await.unwrap();
    let _: () = raw.del(keys).await.unwrap();
}

/// An operation deleted by hand leaves an index entry behind: a take drops it and takes the next one.
#[tokio::test]
async fn a_vanished_operation_does_not_block_its_queue() {
    let prefix = private_prefix();
    let Some(store) = connect(&prefix, StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let (gone, _) = deferred(&store, &operation("b", LONG, Duration::ZERO)).await;
    let (next, _) = deferred(&store, &operation("b", LONG, Duration::ZERO)).await;
    let _: () = raw.del(store.deferred.op_key(&gone)).await.unwrap();
    let taken = (store.deferred)
        .take(&["b".to_owned()], OwnerToken::random(), LONG)
        .await
        .unwrap()
        .expect("the next one is due");
    assert_eq!(taken.operation.scope, next);
    let queued: i64 = raw.zcard(format!("{prefix}defer:queued:b")).await.unwrap();
    assert_eq!(queued, 0, "the vanished one's entry was dropped");
    let depth = store.deferred.depth().await.unwrap();
    assert_eq!(depth.iter().map(|d| d.in_progress + d.queued).sum::<u64>(), 1);
    let keys: Vec<String> = raw.keys(format!("{prefix}*")).await.unwrap();
    let _: () = raw.del(keys).await.unwrap();
}

/// A ttl and a due time too large for the scores are capped: the operation is queued, not due, and ordered
/// after every nearer one of its class.
#[tokio::test]
async fn huge_ttls_and_due_times_are_capped() {
    let prefix = private_prefix();
    let Some(store) = connect(&prefix, StoreOptions::default()).await else {
        return;
    };
    let (far, _) = deferred(&store, &operation("c", Duration::MAX, Duration::MAX)).await;
    let queued = store.deferred.lookup(&far).await.unwrap().unwrap();
    assert!(
        queued.due_in > Duration::from_secs(1_000_000_000),
        "{:?}",
        queued.due_in
    );
    assert_eq!(take(&store, "c").await, None);
    let (near, _) = deferred(&store, &operation("c", LONG, Duration::ZERO)).await;
    let taken = (store.deferred)
        .take(&["c".to_owned()], OwnerToken::random(), LONG)
        .await
        .unwrap()
        .expect("the near one is due");
    assert_eq!(taken.operation.scope, near);
    let mut raw = raw(&store).await;
    let keys: Vec<String> = raw.keys(format!("{prefix}*")).await.unwrap();
    let _: () = raw.del(keys).await.unwrap();
}

/// A worker's end changes the operation whatever became of its record, but writes the record only while it
/// carries the operation's owner: a request that took the key over keeps what it made.
#[tokio::test]
async fn a_record_taken_over_is_left_to_its_new_holder() {
    let prefix = private_prefix();
    let Some(store) = connect(&prefix, StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let (scope, _) = deferred(&store, &operation("d", LONG, Duration::ZERO)).await;
    let worker = take(&store, "d").await.expect("due");
    let stranger = OwnerToken::random().to_hex();
    let _: () = raw.hset(store.key(&scope), "owner", &stranger).await.unwrap();
    store.deferred.begin_attempt(&scope, worker).await.unwrap();
    store
        .deferred
        .finish(&scope, worker, &Finish::OutcomeUnknown, true)
        .await
        .unwrap();
    let ended = store.deferred.lookup(&scope).await.unwrap().unwrap();
    assert_eq!((ended.state, ended.attempts), (OperationState::OutcomeUnknown, 1));
    let record = store.lookup(&scope).await.unwrap().unwrap();
    assert_eq!(
        record.state,
        RecordState::Claimed,
        "neither dispatched nor ended by the queue"
    );
    let owner: String = raw.hget(store.key(&scope), "owner").await.unwrap();
    assert_eq!(owner, stranger);
    let keys: Vec<String> = raw.keys(format!("{prefix}*")).await.unwrap();
    let _: () = raw.del(keys).await.unwrap();
}
