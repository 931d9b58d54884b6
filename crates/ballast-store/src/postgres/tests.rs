//! The conformance suite against the real server (`BALLAST_TEST_POSTGRES_URL`, default the local one), and the
//! PostgreSQL store's own behaviour: schema creation and migration, unreadable rows, unreachable servers.
//!
//! Tests that create tables do it in a PostgreSQL schema of their own (a random name on the connection's
//! `search_path`) and drop it at the end, so they never touch the shared table the suite runs against.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use super::*;
use crate::conformance::{
    Opener, Opening, acquire_for_tests as acquire, fresh_scope, request, service_unavailable, service_url,
};

fn server_url() -> String {
    service_url(
        "BALLAST_TEST_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    )
}

/// The store on the test server, or `None` (skipped) when the server is unreachable.
async fn open_server(options: StoreOptions) -> Option<PostgresStore> {
    let url = server_url();
    match PostgresStore::open(&url, options).await {
        Ok(store) => Some(store),
        Err(StoreError::Unavailable(error)) => {
            service_unavailable(&format!("PostgreSQL at {}", without_password(&url)), error)
        }
        Err(other) => panic!("opening the PostgreSQL store failed: {other}"),
    }
}

fn postgres(options: StoreOptions) -> Opening {
    Box::pin(async move {
        let store = open_server(options).await?;
        Some(Arc::new(store) as Arc<dyn IdempotencyStore>)
    })
}

const POSTGRES: Opener = postgres;

mod conformance {
    crate::conformance_tests!(super::POSTGRES);
}

mod shared_state_conformance {
    crate::shared_state_conformance_tests!(super::POSTGRES);
}

mod deferred_conformance {
    crate::deferred_conformance_tests!(super::POSTGRES);
}

/// A PostgreSQL schema of the test's own: its URL puts it first on the `search_path`.
struct PrivateSchema {
    name: String,
    url: String,
    admin: Client,
}

impl PrivateSchema {
    /// A new empty schema, or `None` (skipped) when the server is unreachable.
    async fn create() -> Option<Self> {
        let base = server_url();
        let admin = match tokio_postgres::connect(&base, NoTls).await {
            Ok((client, connection)) => {
                tokio::spawn(connection);
                client
            }
            Err(error) => {
                return service_unavailable(&format!("PostgreSQL at {}", without_password(&base)), error);
            }
        };
        let name = format!("ballast_test_{}", OwnerToken::random().to_hex());
        admin
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .unwrap();
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}options=-c%20search_path%3D{name}");
        Some(PrivateSchema { name, url, admin })
    }

    async fn drop(self) {
        self.admin
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name))
            .await
            .unwrap();
    }

    /// The versions recorded in this schema's `ballast_schema`.
    async fn versions(&self) -> Vec<(String, i32)> {
        let sql = format!("SELECT component, version FROM {}.ballast_schema", self.name);
        let rows = self.admin.query(&sql, &[]).await.unwrap();
        rows.iter().map(|row| (row.get(0), row.get(1))).collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_starting_together_create_the_schema_once() {
    let Some(schema) = PrivateSchema::create().await else {
        return;
    };
    let mut starting = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let url = schema.url.clone();
        starting.spawn(async move { PostgresStore::open(&url, StoreOptions::default()).await });
    }
    let mut stores = Vec::new();
    while let Some(opened) = starting.join_next().await {
        stores.push(opened.unwrap().expect("every process opens the store"));
    }
    let mut versions = schema.versions().await;
    versions.sort();
    let mut latest: Vec<(String, i32)> = schema::COMPONENTS
        .iter()
        .map(|(component, steps)| ((*component).to_owned(), steps.len() as i32))
        .collect();
    latest.sort();
    assert_eq!(versions, latest, "every component at this build's version");
    // The table is in the private schema, and every store uses it.
    let scope = fresh_scope();
    let claim = request("{}", Duration::from_secs(60));
    acquire(&stores[0], &scope, &claim).await;
    assert_eq!(
        stores[7].lookup(&scope).await.unwrap().map(|r| r.fingerprint),
        Some(claim.fingerprint)
    );
    let count = format!("SELECT count(*) FROM {}.ballast_idempotency", schema.name);
    let rows: i64 = schema.admin.query_one(&count, &[]).await.unwrap().get(0);
    assert_eq!(rows, 1);
    // Opening again migrates nothing and keeps the records.
    let reopened = PostgresStore::open(&schema.url, StoreOptions::default())
        .await
        .unwrap();
    assert!(reopened.lookup(&scope).await.unwrap().is_some());
    assert_eq!(schema.versions().await.len(), schema::COMPONENTS.len());
    drop(stores);
    schema.drop().await;
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let Some(schema) = PrivateSchema::create().await else {
        return;
    };
    let setup = format!(
        "CREATE TABLE {0}.ballast_schema (component text PRIMARY KEY, version integer NOT NULL);
         INSERT INTO {0}.ballast_schema VALUES ('idempotency', 99);",
        schema.name
    );
    schema.admin.batch_execute(&setup).await.unwrap();
    let error = PostgresStore::open(&schema.url, StoreOptions::default()).await;
    assert!(
        matches!(error, Err(StoreError::Corrupt(ref m)) if m.contains("99")),
        "{error:?}"
    );
    schema.drop().await;
}

#[tokio::test]
async fn an_unreadable_record_is_corrupt_not_a_panic() {
    let Some(schema) = PrivateSchema::create().await else {
        return;
    };
    let store = PostgresStore::open(&schema.url, StoreOptions::default())
        .await
        .unwrap();
    let scope = fresh_scope();
    let insert = format!(
        "INSERT INTO {}.ballast_idempotency (principal, route, key, state, fingerprint, owner, lease_until, \
         expires_at) VALUES ($1, $2, $3, 'claimed', '\\x0102'::bytea, gen_random_uuid(), \
         clock_timestamp() + interval '1 minute', clock_timestamp() + interval '1 day')",
        schema.name
    );
    let [p, r, k] = sql::key(&scope);
    schema.admin.execute(&insert, &[&p, &r, &k]).await.unwrap();
    let lookup = store.lookup(&scope).await;
    assert!(matches!(lookup, Err(StoreError::Corrupt(_))), "{lookup:?}");
    let claim = store.claim(&scope, &request("{}", Duration::from_secs(60))).await;
    assert!(matches!(claim, Err(StoreError::Corrupt(_))), "{claim:?}");
    schema.drop().await;
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    // Port 1 on the loopback: nothing listens there, so the connection is refused at once.
    let error = PostgresStore::open("postgres://postgres@127.0.0.1:1/test", StoreOptions::default()).await;
    assert!(matches!(error, Err(StoreError::Unavailable(_))), "{error:?}");
}

/// A server that accepts the connection and never answers (hung, or a black hole) fails the operation as
/// unavailable within the store's timeout instead of holding the request.
#[tokio::test]
async fn a_server_that_never_answers_is_unavailable_within_the_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            held.push(listener.accept().await.unwrap().0);
        }
    });
    let url = format!("postgres://postgres@127.0.0.1:{port}/test");
    let timeout = Duration::from_millis(300);
    let opening = PostgresStore::open_bounded(&url, StoreOptions::default(), timeout);
    // The store's own bound must fire; this outer one only keeps a broken bound from hanging the test.
    let error = tokio::time::timeout(Duration::from_secs(5), opening)
        .await
        .expect("the store's timeout did not fire");
    assert!(matches!(error, Err(StoreError::Unavailable(_))), "{error:?}");
    silent.abort();
}

#[tokio::test]
async fn a_malformed_url_is_refused_without_its_password() {
    let error = PostgresStore::open("postgres://u:secret@h:notaport/db", StoreOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::UnsupportedUrl { ref url } if url == "postgres://u:***@h:notaport/db"),
        "{error:?}"
    );
}

#[tokio::test]
async fn open_dispatches_postgres_urls_here() {
    let url = server_url();
    match crate::open(&url, StoreOptions::default()).await {
        Ok(store) => assert_eq!(store.backend(), "postgres"),
        Err(StoreError::Unavailable(error)) => {
            service_unavailable::<()>("PostgreSQL", error);
        }
        Err(other) => panic!("{other}"),
    }
}

/// Waits (bounded) until the lease on `scope` has run out on the server's clock.
async fn until_lease_expired(store: &PostgresStore, scope: &Scope) {
    let give_up = crate::clock::monotonic_after(Duration::from_secs(10));
    while !store.lookup(scope).await.unwrap().unwrap().lease_left.is_zero() {
        assert!(!crate::clock::passed(give_up), "the lease never ran out");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// 32 racers on one expired lease, through the read-then-compare-and-set path: exactly one takes the record
/// over (or, for an expired dispatch the upstream cannot deduplicate, it becomes `outcome_unknown` for all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_claims_on_an_expired_lease_have_one_winner() {
    let Some(store) = open_server(StoreOptions::default()).await.map(Arc::new) else {
        return;
    };
    for (dispatched, expired_dispatch) in [
        (false, crate::ExpiredDispatch::OutcomeUnknown),
        (true, crate::ExpiredDispatch::TakeOver),
        (true, crate::ExpiredDispatch::OutcomeUnknown),
    ] {
        let scope = Arc::new(fresh_scope());
        let holder = request("{}", Duration::from_millis(200));
        acquire(&*store, &scope, &holder).await;
        if dispatched {
            store.mark_dispatched(&scope, holder.owner).await.unwrap();
        }
        until_lease_expired(&store, &scope).await;
        let mut racers = tokio::task::JoinSet::new();
        for _ in 0..32 {
            let (store, scope) = (Arc::clone(&store), Arc::clone(&scope));
            let claim = crate::ClaimRequest {
                expired_dispatch,
                ..request("{}", Duration::from_secs(60))
            };
            racers.spawn(async move { store.claim(&scope, &claim).await.unwrap() });
        }
        let (mut took_over, mut unknown) = (0, 0);
        while let Some(outcome) = racers.join_next().await {
            match outcome.unwrap() {
                ClaimOutcome::TookOver { .. } => took_over += 1,
                ClaimOutcome::OutcomeUnknown => unknown += 1,
                ClaimOutcome::InProgress { .. } => {}
                other => panic!("a racer got {other:?}"),
            }
        }
        let case = (dispatched, expired_dispatch);
        if dispatched && expired_dispatch == crate::ExpiredDispatch::OutcomeUnknown {
            assert_eq!((took_over, unknown), (0, 32), "{case:?}");
        } else {
            assert_eq!((took_over, unknown), (1, 0), "{case:?}");
        }
    }
}

#[path = "shared_tests.rs"]
mod shared_tests;

#[path = "deferred_tests.rs"]
mod deferred_tests;
