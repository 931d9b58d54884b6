//! What is PostgreSQL's own in the shared state: the statements' arithmetic against ballast-core's to the bit,
//! the reap of expired shared rows, and the shared tables' place in the schema's migration.

use super::*;
use crate::conformance::planted_limits;
use crate::{Charge, Reservation, RunKey, SharedState};

/// The server's clock in µs, as the statements read it.
async fn server_now_us(client: &Object) -> f64 {
    let sql = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::float8";
    client.query_one(sql, &[]).await.unwrap().get(0)
}

async fn tat(client: &Object, key: &str) -> f64 {
    let sql = "SELECT tat FROM ballast_limits WHERE key = $1";
    client.query_one(sql, &[&key]).await.unwrap().get(0)
}

/// The reserve and correct statements write the TATs `reserve_all` and `Gcra::correct` compute, to the bit.
#[tokio::test]
async fn the_statements_compute_what_ballast_core_computes() {
    let Some(store) = open_server(StoreOptions::default()).await else {
        return;
    };
    let shared = shared::PostgresShared(store.clone());
    let client = store.client().await.unwrap();
    let now = server_now_us(&client).await;
    let (charges, planted, expected, wait) = planted_limits(now);
    for (charge, tat) in charges.iter().zip(&planted) {
        if let Some(tat) = tat {
            let sql = "INSERT INTO ballast_limits (key, tat, expires_at) \
                       VALUES ($1, $2, clock_timestamp() + interval '1 minute')";
            client.execute(sql, &[&charge.key, tat]).await.unwrap();
        }
    }
    let reservation = shared.reserve(&charges, Duration::from_secs(3600)).await;
    let Ok(Reservation::Granted(waits)) = reservation else {
        panic!("{reservation:?}");
    };
    assert!(waits.as_secs_f64() * 1e6 <= wait && waits.as_secs_f64() * 1e6 > wait - 5e6);
    for (charge, expected) in charges.iter().zip(&expected) {
        assert_eq!(
            tat(&client, &charge.key).await.to_bits(),
            expected.to_bits(),
            "{}",
            charge.key
        );
    }
    // A correction of a TAT ahead of the clock does not depend on the instant either.
    let first = &charges[0];
    for delta in [-0.75, 2.5] {
        let before = tat(&client, &first.key).await;
        shared.correct(first, delta).await.unwrap();
        let after = tat(&client, &first.key).await;
        assert_eq!(
            after.to_bits(),
            first.rate.correct(before, now, delta).to_bits(),
            "{delta}"
        );
    }
}

/// `reap` deletes runs, limits and instances past their `expires_at` along with the records, and leaves live
/// ones.
#[tokio::test]
async fn reap_deletes_expired_shared_rows() {
    let Some(store) = open_server(StoreOptions::default()).await else {
        return;
    };
    let shared = store.shared_state().unwrap();
    let (gone, kept) = (
        RunKey::new(OwnerToken::random().to_hex(), "gone"),
        RunKey::new(OwnerToken::random().to_hex(), "kept"),
    );
    shared
        .visit_run(&gone, None, Duration::from_millis(1))
        .await
        .unwrap();
    shared
        .visit_run(&kept, None, Duration::from_secs(60))
        .await
        .unwrap();
    let instance = OwnerToken::random().to_hex();
    shared
        .heartbeat(&instance, Duration::from_millis(1))
        .await
        .unwrap();
    let limit = OwnerToken::random().to_hex();
    let client = store.client().await.unwrap();
    let sql = "INSERT INTO ballast_limits (key, tat, expires_at) VALUES ($1, 0, clock_timestamp())";
    client.execute(sql, &[&limit]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.reap().await.unwrap();
    let count = |sql: &'static str, key: String| {
        let client = &client;
        async move { client.query_one(sql, &[&key]).await.unwrap().get::<_, i64>(0) }
    };
    let runs = "SELECT count(*) FROM ballast_runs WHERE owner = $1";
    assert_eq!(count(runs, gone.owner.clone()).await, 0);
    assert_eq!(count(runs, kept.owner.clone()).await, 1);
    let instances = "SELECT count(*) FROM ballast_instances WHERE id = $1";
    assert_eq!(count(instances, instance).await, 0);
    assert_eq!(
        count("SELECT count(*) FROM ballast_limits WHERE key = $1", limit).await,
        0
    );
}

/// The shared tables are a component of their own: a database that has only the records' schema gains them
/// on open, and a component this build does not know (a newer build's) does not stop it from opening — so an
/// older build opens a database that has the shared tables, and a rolling upgrade can run.
#[tokio::test]
async fn the_shared_tables_are_a_component_of_their_own() {
    let Some(schema) = PrivateSchema::create().await else {
        return;
    };
    let store = PostgresStore::open(&schema.url, StoreOptions::default())
        .await
        .unwrap();
    let setup = format!(
        "DROP TABLE {0}.ballast_runs, {0}.ballast_limits, {0}.ballast_instances;
         DELETE FROM {0}.ballast_schema WHERE component = 'shared_state';
         INSERT INTO {0}.ballast_schema VALUES ('from_the_future', 7);",
        schema.name
    );
    schema.admin.batch_execute(&setup).await.unwrap();
    drop(store);
    let store = PostgresStore::open(&schema.url, StoreOptions::default())
        .await
        .unwrap();
    let mut versions = schema.versions().await;
    versions.sort();
    let names: Vec<&str> = versions.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["deferred", "from_the_future", "idempotency", "shared_state"]
    );
    let shared = store.shared_state().unwrap();
    let limit = Charge {
        key: "rpm".to_owned(),
        rate: ballast_core::Gcra::per_minute(60, Duration::ZERO),
        cost: 1.0,
    };
    assert_eq!(
        shared.reserve(&[limit], Duration::ZERO).await.unwrap(),
        Reservation::Granted(Duration::ZERO)
    );
    drop(store);
    schema.drop().await;
}
