//! What is PostgreSQL's own in the deferred queue: the queue table's place in the schema's migration, a take's
//! cost on a deep queue, and an end whose record a live request took over.

use super::*;
use crate::{Finish, NewOperation, OperationState, RecordState};

/// An operation of `tool` in class `priority`, due now, with a long life.
fn operation(tool: &str, priority: u8) -> NewOperation {
    NewOperation {
        tool: tool.to_owned(),
        priority,
        request: bytes::Bytes::from_static(b"{}"),
        max_attempts: 3,
        ttl: Duration::from_secs(600),
        due_in: Duration::ZERO,
        last: None,
    }
}

/// Claims a fresh scope and defers it as `new`.
async fn deferred(store: &PostgresStore, queue: &dyn DeferredQueue, new: &NewOperation) -> Scope {
    let scope = fresh_scope();
    let claim = request("{}", Duration::from_secs(60));
    acquire(store, &scope, &claim).await;
    queue.defer(&scope, claim.owner, new).await.unwrap();
    scope
}

/// The queue table is a component of its own: a database from a build before it (records and shared state
/// only) gains it on open and keeps its records — and a build before it ignores it, as it ignores any
/// component it does not know (`the_shared_tables_are_a_component_of_their_own`), so a rolling upgrade runs.
#[tokio::test]
async fn the_queue_is_a_component_of_its_own() {
    let Some(schema) = PrivateSchema::create().await else {
        return;
    };
    let store = PostgresStore::open(&schema.url, StoreOptions::default())
        .await
        .unwrap();
    let scope = fresh_scope();
    let claim = request("{}", Duration::from_secs(60));
    acquire(&store, &scope, &claim).await;
    let setup = format!(
        "DROP TABLE {0}.ballast_deferred; DELETE FROM {0}.ballast_schema WHERE component = 'deferred';",
        schema.name
    );
    schema.admin.batch_execute(&setup).await.unwrap();
    drop(store);
    let store = PostgresStore::open(&schema.url, StoreOptions::default())
        .await
        .unwrap();
    let mut versions = schema.versions().await;
    versions.sort();
    assert_eq!(
        versions,
        [
            ("deferred".to_owned(), 1),
            ("idempotency".to_owned(), 1),
            ("shared_state".to_owned(), 1)
        ]
    );
    let queue = store.deferred().unwrap();
    let queued = queue.defer(&scope, claim.owner, &operation("refund", 1)).await;
    assert_eq!(
        queued.unwrap().state,
        OperationState::Queued,
        "the record was kept"
    );
    drop(store);
    schema.drop().await;
}

/// The shared buffers the take `statement` reads (`hit` + `read` of its top plan node) with `tools`.
async fn buffers_of_take(admin: &Client, tools: &[&str]) -> u64 {
    let explain = format!(
        "EXPLAIN (ANALYZE, BUFFERS) EXECUTE take_plan(ARRAY[{}], gen_random_uuid(), 60000)",
        tools
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let plan: Vec<String> = (admin.query(&explain, &[]).await.unwrap())
        .iter()
        .map(|row| row.get(0))
        .collect();
    let line = plan
        .iter()
        .find(|line| line.contains("Buffers: shared"))
        .unwrap_or_else(|| panic!("no buffers in {plan:#?}"));
    let number = |name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|part| part.strip_prefix(name))
            .map_or(0, |n| n.parse().unwrap())
    };
    number("hit=") + number("read=")
}

/// A take reads a few index entries per class present, however deep the queue: here 50,000 operations of the
/// highest class not yet due, which a take that ordered the due ones (or scanned the class's index entries
/// for one) would read all of. It takes the classes in order across tools, an operation whose worker's lease
/// ran out by its class too, and finds nothing when nothing is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_walks_the_classes_not_the_queue() {
    let Some(schema) = PrivateSchema::create().await else {
        return;
    };
    let store = PostgresStore::open(&schema.url, StoreOptions::default())
        .await
        .unwrap();
    let queue = store.deferred().unwrap();
    let plant = format!(
        "INSERT INTO {}.ballast_deferred (principal, route, key, tool, priority, state, attempts, max_attempts, \
         request, owner, sent, deferred_at, due_at, expires_at) \
         SELECT 'planted-' || n, 'r', 'k', 'deep', 3, 'queued', 0, 3, '\\x00', gen_random_uuid(), false, \
         clock_timestamp(), clock_timestamp() + interval '1 hour', clock_timestamp() + interval '2 hours' \
         FROM generate_series(1, 50000) AS n; ANALYZE {0}.ballast_deferred",
        schema.name
    );
    schema.admin.batch_execute(&plant).await.unwrap();
    let low = deferred(&store, &*queue, &operation("deep", 1)).await;
    let other = deferred(&store, &*queue, &operation("shallow", 2)).await;
    let lapsing = deferred(&store, &*queue, &operation("shallow", 0)).await;
    let worker = OwnerToken::random();
    let short = Duration::from_millis(300);
    let first = queue.take(&["shallow".to_owned()], worker, short).await.unwrap();
    assert_eq!(first.unwrap().operation.scope, other);
    queue.begin_attempt(&other, worker).await.unwrap();
    let second = queue.take(&["shallow".to_owned()], worker, short).await.unwrap();
    assert_eq!(second.unwrap().operation.scope, lapsing);
    tokio::time::sleep(short + Duration::from_millis(100)).await;
    // Both leases ran out: `other` (class 2, its attempt begun) goes before `low` (class 1), `lapsing` last.
    schema
        .admin
        .batch_execute(&format!(
            "SET search_path TO {}; PREPARE take_plan(text[], uuid, bigint) AS {}",
            schema.name,
            deferred_sql::TAKE
        ))
        .await
        .unwrap();
    let tools = ["deep", "shallow"];
    let read = buffers_of_take(&schema.admin, &tools).await;
    assert!(read < 100, "a take read {read} buffers");
    let taken = queue.lookup(&other).await.unwrap().unwrap();
    assert_eq!((taken.state, taken.attempts), (OperationState::InProgress, 1));
    let names = tools.map(str::to_owned);
    let next = queue.take(&names, OwnerToken::random(), Duration::from_secs(60));
    assert_eq!(next.await.unwrap().unwrap().operation.scope, low);
    let last = queue.take(&names, OwnerToken::random(), Duration::from_secs(60));
    assert_eq!(last.await.unwrap().unwrap().operation.scope, lapsing);
    let read = buffers_of_take(&schema.admin, &tools).await;
    assert!(read < 100, "a take that found nothing read {read} buffers");
    let none = queue.take(&names, OwnerToken::random(), Duration::from_secs(60));
    assert_eq!(none.await.unwrap(), None);
    drop(store);
    schema.drop().await;
}

/// An end whose record a live request took over (the whole cluster was down past the operation's life) leaves
/// the record as that request made it, and still ends the operation.
#[tokio::test]
async fn an_end_leaves_a_record_taken_over_alone() {
    let Some(store) = open_server(StoreOptions::default()).await else {
        return;
    };
    let queue = store.deferred().unwrap();
    let tool = format!("tool-{}", OwnerToken::random().to_hex());
    let scope = deferred(&store, &*queue, &operation(&tool, 1)).await;
    let worker = OwnerToken::random();
    queue
        .take(&[tool], worker, Duration::from_secs(60))
        .await
        .unwrap();
    let [p, r, k] = sql::key(&scope);
    let client = store.client().await.unwrap();
    let take_over = "UPDATE ballast_idempotency SET owner = gen_random_uuid() \
                     WHERE principal = $1 AND route = $2 AND key = $3";
    client.execute(take_over, &[&p, &r, &k]).await.unwrap();
    queue.begin_attempt(&scope, worker).await.unwrap();
    let done = crate::conformance::response(200, b"{}");
    queue
        .finish(&scope, worker, &Finish::Completed(done.clone()), true)
        .await
        .unwrap();
    let ended = queue.lookup(&scope).await.unwrap().unwrap();
    assert_eq!((ended.state, ended.last), (OperationState::Completed, Some(done)));
    let record = store.lookup(&scope).await.unwrap().unwrap();
    assert_eq!(
        record.state,
        RecordState::Claimed,
        "the other request's record is untouched"
    );
}
