//! The deferred queue's behaviour particular to SQLite: what a restart (the same file opened again) does to
//! operations and their records, and the migration of a file written before the queue existed.

use std::time::Duration;

use bytes::Bytes;

use crate::conformance::{acquire_for_tests as acquire, fresh_scope, request};
use crate::sqlite::{SqliteStore, schema};
use crate::{
    ClaimOutcome, Finish, IdempotencyStore, NewOperation, OperationState, OwnerToken, RecordState,
    StoreOptions, StoredResponse,
};

fn operation(tool: &str, priority: u8, ttl: Duration) -> NewOperation {
    NewOperation {
        tool: tool.to_owned(),
        priority,
        request: Bytes::from_static(b"{}"),
        max_attempts: 3,
        ttl,
        due_in: Duration::ZERO,
        last: None,
    }
}

/// DESIGN.md, "SQLite store", with deferred operations: a restart leaves the records of unfinished operations to
/// them — a waiting one's key stays `claimed`, one whose attempt had begun stays `dispatched`, both in progress
/// to a retry — while records nobody owns are settled as before; and the previous run's workers lose their
/// leases at once, so the restarted gateway's workers take their operations straight away (as interrupted where
/// an attempt had begun), not after leases of workers that are gone.
#[tokio::test]
async fn a_restart_leaves_deferred_records_to_their_operations_and_frees_their_workers_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("deferred.db").display());
    // Leases far longer than the test: only the restart can end them.
    let long = Duration::from_secs(600);
    let tools = [format!("tool-{}", OwnerToken::random().to_hex())];
    let (waiting, held, sent, stray) = (fresh_scope(), fresh_scope(), fresh_scope(), fresh_scope());
    {
        let store = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
        let queue = store.deferred().unwrap();
        for (scope, priority) in [(&sent, 3), (&held, 2), (&waiting, 1)] {
            let claim = request("{}", long);
            acquire(&store, scope, &claim).await;
            let new = operation(&tools[0], priority, long);
            queue.defer(scope, claim.owner, &new).await.unwrap();
        }
        let sender = OwnerToken::random();
        let taken = queue.take(&tools, sender, long).await.unwrap().unwrap();
        assert_eq!(taken.operation.scope, sent);
        queue.begin_attempt(&sent, sender).await.unwrap();
        let taken = queue
            .take(&tools, OwnerToken::random(), long)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(taken.operation.scope, held);
        acquire(&store, &stray, &request("{}", long)).await;
    }
    let store = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
    let queue = store.deferred().unwrap();
    assert_eq!(
        store.lookup(&stray).await.unwrap(),
        None,
        "a claim no operation holds is still released"
    );
    for (scope, state) in [
        (&waiting, RecordState::Claimed),
        (&held, RecordState::Claimed),
        (&sent, RecordState::Dispatched),
    ] {
        let record = store
            .lookup(scope)
            .await
            .unwrap()
            .expect("the operation keeps its record");
        assert_eq!(record.state, state);
        assert!(record.lease_left > long, "and its lease: {:?}", record.lease_left);
        let retry = store.claim(scope, &request("{}", long)).await.unwrap();
        assert!(matches!(retry, ClaimOutcome::InProgress { .. }), "{retry:?}");
    }
    let mut taken = Vec::new();
    for _ in 0..3 {
        let worker = OwnerToken::random();
        let next = queue.take(&tools, worker, long).await.unwrap();
        let next = next.expect("every operation is taken at once after the restart");
        assert_eq!(next.operation.state, OperationState::InProgress);
        taken.push((
            next.operation.scope,
            next.interrupted,
            next.operation.attempts,
            worker,
        ));
    }
    let seen: Vec<_> = taken
        .iter()
        .map(|(scope, interrupted, attempts, _)| (scope, *interrupted, *attempts))
        .collect();
    assert_eq!(
        seen,
        [(&sent, true, 1), (&held, false, 0), (&waiting, false, 0)],
        "by class; the begun attempt counted and told"
    );
    assert_eq!(
        queue.take(&tools, OwnerToken::random(), long).await.unwrap(),
        None
    );
    // The operation still owns its record: its end settles it.
    let answer = StoredResponse {
        status: 200,
        headers: vec![],
        body: Bytes::from_static(b"refunded"),
    };
    let end = Finish::Completed(answer.clone());
    queue.finish(&sent, taken[0].3, &end, false).await.unwrap();
    assert_eq!(
        store.claim(&sent, &request("{}", long)).await.unwrap(),
        ClaimOutcome::Completed(answer)
    );
}

/// A file of schema version 2 (records only) gains the queue when opened, its records kept as they were.
#[tokio::test]
async fn a_version_2_file_gains_the_queue_keeping_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.db");
    let url = format!("sqlite://{}", path.display());
    let (kept, deferred) = (fresh_scope(), fresh_scope());
    let long = Duration::from_secs(60);
    let claim = request("{}", long);
    {
        let v2 = rusqlite::Connection::open(&path).unwrap();
        v2.execute_batch(&format!(
            "{} {} PRAGMA user_version = 2;",
            schema::TABLE,
            schema::INDEX
        ))
        .unwrap();
        v2.execute(
            "INSERT INTO ballast_idempotency VALUES (?1, ?2, ?3, 'completed', ?4, ?5, 0, ?6, 201, ?7, ?8)",
            rusqlite::params![
                kept.principal(),
                kept.route(),
                kept.key().as_str(),
                &claim.fingerprint.as_bytes()[..],
                &claim.owner.as_bytes()[..],
                i64::MAX,
                crate::encode_headers(&[]),
                &b"refunded"[..],
            ],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
    let replay = store.claim(&kept, &claim).await.unwrap();
    let ClaimOutcome::Completed(stored) = replay else {
        panic!("the record survives the migration: {replay:?}")
    };
    assert_eq!((stored.status, &stored.body[..]), (201, &b"refunded"[..]));
    let holder = request("{}", long);
    acquire(&store, &deferred, &holder).await;
    let queue = store.deferred().unwrap();
    let queued = queue
        .defer(&deferred, holder.owner, &operation("refund", 1, long))
        .await
        .unwrap();
    assert_eq!(queued.state, OperationState::Queued);
    drop((queue, store));
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, 3);
}
