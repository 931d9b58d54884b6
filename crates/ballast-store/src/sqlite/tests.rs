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
}

/// The suite again on a file (WAL), the form a deployment uses.
fn file(options: StoreOptions) -> Opening {
    Box::pin(async move {
        static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
        let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
        let url = format!("sqlite://{}", dir.path().join("conformance.db").display());
        let store: Arc<dyn IdempotencyStore> = Arc::new(SqliteStore::open(&url, options).await.unwrap());
        Some(store)
    })
}

const FILE: Opener = file;

mod conformance_file {
    crate::conformance_tests!(super::FILE);
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
