use std::sync::Arc;

use super::*;
use crate::conformance::{Opener, Opening, acquire_for_tests as acquire, fresh_scope, request};
use crate::{ClaimOutcome, IdempotencyStore, RecordState};

fn memory(options: StoreOptions) -> Opening {
    Box::pin(async move {
        let store: Arc<dyn IdempotencyStore> =
            Arc::new(SqliteStore::open("sqlite::memory:", options).await.unwrap());
        Some(store)
    })
}

const MEMORY: Opener = memory;

mod conformance_memory {
    crate::conformance_tests!(super::MEMORY);
    crate::deferred_conformance_tests!(super::MEMORY);
}

/// The suite again on a file (WAL), the form a deployment uses: a file per opening, since one process holds a
/// file at a time.
fn file(options: StoreOptions) -> Opening {
    Box::pin(async move {
        static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
        static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
        let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let url = format!(
            "sqlite://{}",
            dir.path().join(format!("conformance-{n}.db")).display()
        );
        let store: Arc<dyn IdempotencyStore> = Arc::new(SqliteStore::open(&url, options).await.unwrap());
        Some(store)
    })
}

const FILE: Opener = file;

mod conformance_file {
    crate::conformance_tests!(super::FILE);
    crate::deferred_conformance_tests!(super::FILE);
}

#[test]
fn urls_name_memory_or_a_file() {
    assert_eq!(parse_url("sqlite::memory:").unwrap(), Location::Memory);
    assert_eq!(
        parse_url("sqlite://ballast.db").unwrap(),
        Location::File {
            path: "ballast.db".into(),
            synchronous_full: false
        }
    );
    assert_eq!(
        parse_url("sqlite:///var/lib/b.db?synchronous=full").unwrap(),
        Location::File {
            path: "/var/lib/b.db".into(),
            synchronous_full: true
        }
    );
    for bad in [
        "sqlite://",
        "sqlite://x.db?fsync=off",
        "sqlite:x.db",
        "sqlite::memory:x",
    ] {
        assert!(
            matches!(parse_url(bad), Err(StoreError::UnsupportedUrl { .. })),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn completed_records_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("restart.db").display());
    let scope = fresh_scope();
    let claim = request("{}", std::time::Duration::from_secs(60));
    let stored = crate::StoredResponse {
        status: 201,
        headers: vec![],
        body: bytes::Bytes::from_static(b"once"),
    };
    {
        let store = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
        acquire(&store, &scope, &claim).await;
        store.mark_dispatched(&scope, claim.owner).await.unwrap();
        store.complete(&scope, claim.owner, &stored).await.unwrap();
    }
    let reopened = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
    let again = reopened
        .claim(&scope, &request("{}", std::time::Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(again, ClaimOutcome::Completed(stored.clone()));
    assert_eq!(
        reopened.lookup(&scope).await.unwrap().unwrap().state,
        RecordState::Completed(stored)
    );
}

/// Regression: with the file deleted (or replaced) while serving, calls were still acknowledged — written to an
/// inode nobody would open again — and after a restart a completed payment ran a second time.
#[tokio::test]
async fn a_file_moved_away_replaced_or_made_read_only_fails_every_operation_until_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.db");
    let store = SqliteStore::open(&format!("sqlite://{}", path.display()), StoreOptions::default())
        .await
        .unwrap();
    store.check().await.unwrap();
    let claim = || request("{}", std::time::Duration::from_secs(60));
    acquire(&store, &fresh_scope(), &claim()).await;
    let unavailable = |result: Result<ClaimOutcome, StoreError>, why: &str| {
        let error = result.expect_err("refused");
        assert!(matches!(error, StoreError::Unavailable(_)), "{error}");
        assert!(error.to_string().contains(why), "{error}");
    };
    let aside = dir.path().join("aside.db");
    std::fs::rename(&path, &aside).unwrap();
    unavailable(store.claim(&fresh_scope(), &claim()).await, "deleted or moved");
    assert!(store.check().await.is_err());
    std::fs::rename(&aside, &path).unwrap();
    store.check().await.unwrap();
    acquire(&store, &fresh_scope(), &claim()).await;
    let mut permissions = std::fs::metadata(&path).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(&path, permissions.clone()).unwrap();
    unavailable(store.claim(&fresh_scope(), &claim()).await, "read-only");
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(&path, permissions).unwrap();
    store.check().await.unwrap();
    std::fs::copy(&path, &aside).unwrap();
    std::fs::rename(&aside, &path).unwrap();
    unavailable(store.claim(&fresh_scope(), &claim()).await, "replaced");
}

#[tokio::test]
async fn a_missing_directory_is_an_error_not_a_panic() {
    let error = SqliteStore::open("sqlite:///nonexistent-ballast-dir/x.db", StoreOptions::default()).await;
    assert!(matches!(error, Err(StoreError::Unavailable(_))), "{error:?}");
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("newer.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    let error = SqliteStore::open(&format!("sqlite://{}", path.display()), StoreOptions::default()).await;
    assert!(
        matches!(error, Err(StoreError::Corrupt(ref m)) if m.contains("99")),
        "{error:?}"
    );
}

/// DESIGN.md, "SQLite store": a restarted single instance settles what its previous run left in flight at once
/// — `claimed` records are released (nothing was sent) and `dispatched` ones settle on the next claim, as an
/// expired dispatch does — instead of answering 409 until a lease runs out.
#[tokio::test]
async fn a_restart_settles_what_the_previous_run_left_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("in-flight.db").display());
    let long = std::time::Duration::from_secs(600);
    let (claimed, unknown, resent) = (fresh_scope(), fresh_scope(), fresh_scope());
    {
        let store = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
        acquire(&store, &claimed, &request("{}", long)).await;
        for scope in [&unknown, &resent] {
            let holder = request("{}", long);
            acquire(&store, scope, &holder).await;
            store.mark_dispatched(scope, holder.owner).await.unwrap();
        }
    }
    let store = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
    assert_eq!(
        store.lookup(&claimed).await.unwrap(),
        None,
        "a claim left by the crash is released"
    );
    acquire(&store, &claimed, &request("{}", long)).await;
    assert_eq!(
        store.claim(&unknown, &request("{}", long)).await.unwrap(),
        ClaimOutcome::OutcomeUnknown,
        "a dispatch left by the crash settles at once"
    );
    let taker = crate::ClaimRequest {
        expired_dispatch: crate::ExpiredDispatch::TakeOver,
        ..request("{}", long)
    };
    assert_eq!(
        store.claim(&resent, &taker).await.unwrap(),
        ClaimOutcome::TookOver {
            was: crate::InFlight::Dispatched
        },
        "a deduplicating upstream gets the same key again at once"
    );
}

/// One process holds a SQLite store: a second open of the same file fails, saying why and what to do, and the
/// holder keeps working.
#[tokio::test]
async fn a_second_holder_of_the_file_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("held.db").display());
    let holder = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
    let error = SqliteStore::open(&url, StoreOptions::default())
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    assert!(
        message.contains("held.db") && message.contains("another gateway") && message.contains("PostgreSQL"),
        "{message}"
    );
    let scope = fresh_scope();
    acquire(
        &holder,
        &scope,
        &request("{}", std::time::Duration::from_secs(60)),
    )
    .await;
    drop(holder);
    let next = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
    assert_eq!(
        next.lookup(&scope).await.unwrap(),
        None,
        "released at the next start"
    );
}

/// The opcodes SQLite runs for `sql` on `connection`.
fn opcodes(connection: &rusqlite::Connection, sql: &str) -> Vec<String> {
    let mut statement = connection.prepare(&format!("EXPLAIN {sql}")).unwrap();
    // Unbound parameters: EXPLAIN only compiles the statement.
    let mut rows = statement.raw_query();
    let mut opcodes = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        opcodes.push(row.get::<_, String>(1).unwrap());
    }
    opcodes
}

/// The writes of the request path build no temporary b-tree: neither the state CHECK of the table nor the
/// states a transition applies to are `IN` lists of constants, which SQLite builds into one on every execution
/// (a fifth of each write's instructions, measured).
#[test]
fn the_request_path_writes_build_no_temporary_btree() {
    let connection = connect(&Location::Memory).unwrap();
    let dispatched = sql::transition_sql("state = 'dispatched'", &[&RecordState::Claimed]);
    let completed = sql::transition_sql(
        "state = 'completed', status = ?6",
        &[
            &RecordState::Claimed,
            &RecordState::Dispatched,
            &RecordState::OutcomeUnknown,
        ],
    );
    for statement in [sql::CLAIM, &dispatched, &completed] {
        let opcodes = opcodes(&connection, statement);
        assert!(
            !opcodes.iter().any(|op| op == "OpenEphemeral"),
            "{statement}: {opcodes:?}"
        );
    }
}

/// A file written by schema version 1 (whose state check was an `IN` list) is rebuilt as version 3 when opened,
/// its records kept as they were, and the check still refuses a state that does not exist.
#[tokio::test]
async fn a_version_1_file_is_migrated_keeping_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    let scope = fresh_scope();
    let claim = request("{}", std::time::Duration::from_secs(60));
    {
        let v1 = rusqlite::Connection::open(&path).unwrap();
        v1.execute_batch(
            "CREATE TABLE ballast_idempotency (
                principal TEXT NOT NULL, route TEXT NOT NULL, key TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('claimed', 'dispatched', 'completed', 'outcome_unknown')),
                fingerprint BLOB NOT NULL, owner BLOB NOT NULL, lease_until INTEGER NOT NULL,
                expires_at INTEGER NOT NULL, status INTEGER, headers BLOB, body BLOB,
                PRIMARY KEY (principal, route, key)
            ) WITHOUT ROWID;
            CREATE INDEX ballast_idempotency_expires ON ballast_idempotency (expires_at);
            PRAGMA user_version = 1;",
        )
        .unwrap();
        v1.execute(
            "INSERT INTO ballast_idempotency VALUES (?1, ?2, ?3, 'completed', ?4, ?5, 0, ?6, 201, ?7, ?8)",
            rusqlite::params![
                scope.principal(),
                scope.route(),
                scope.key().as_str(),
                &claim.fingerprint.as_bytes()[..],
                &claim.owner.as_bytes()[..],
                i64::MAX,
                crate::encode_headers(&[("content-type".to_owned(), b"text/plain".to_vec())]),
                &b"refunded"[..],
            ],
        )
        .unwrap();
    }
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::open(&url, StoreOptions::default()).await.unwrap();
    let Some(record) = store.lookup(&scope).await.unwrap() else {
        panic!("the record survives the migration")
    };
    let RecordState::Completed(stored) = record.state else {
        panic!("{record:?}")
    };
    assert_eq!((stored.status, &stored.body[..]), (201, &b"refunded"[..]));
    assert_eq!(record.fingerprint, claim.fingerprint);
    drop(store);
    let connection = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, 3);
    let refused = connection.execute(
        "UPDATE ballast_idempotency SET state = 'lost' WHERE key = ?1",
        [scope.key().as_str()],
    );
    assert!(refused.is_err(), "the state check holds: {refused:?}");
}

/// SQLite shares no state between instances: one process holds the file, and its memory is the truth.
#[tokio::test]
async fn sqlite_has_no_shared_state() {
    let store = SqliteStore::open("sqlite::memory:", StoreOptions::default())
        .await
        .unwrap();
    assert!(store.shared_state().is_none());
}

mod deferred;
