//! What is Redis's own in the shared state: the scripts' arithmetic against ballast-core's to the bit, where
//! the keys live, and that they expire by themselves.

use ballast_core::Gcra;

use super::*;
use crate::conformance::planted_limits;
use crate::{Charge, Reservation, RunKey, SharedState};

/// The server's clock in µs, as the scripts read it.
async fn server_now_us(raw: &mut ConnectionManager) -> f64 {
    let (seconds, micros): (i64, i64) = redis::cmd("TIME").query_async(raw).await.unwrap();
    (seconds * 1_000_000 + micros) as f64
}

async fn tat(raw: &mut ConnectionManager, key: &str) -> f64 {
    let text: String = raw.get(key).await.unwrap();
    text.parse().unwrap()
}

/// The reserve and correct scripts write the TATs `reserve_all` and `Gcra::correct` compute, to the bit.
#[tokio::test]
async fn the_scripts_compute_what_ballast_core_computes() {
    let Some(store) = connect(&private_prefix(), StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let now = server_now_us(&mut raw).await;
    let (charges, planted, expected, wait) = planted_limits(now);
    for (charge, tat) in charges.iter().zip(&planted) {
        if let Some(tat) = tat {
            let text = format!("{tat:?}");
            let _: () = raw
                .set_ex(store.shared.limit_key(&charge.key), text, 60)
                .await
                .unwrap();
        }
    }
    let reservation = store.shared.reserve(&charges, Duration::from_secs(3600)).await;
    let Ok(Reservation::Granted(waits)) = reservation else {
        panic!("{reservation:?}");
    };
    assert!(waits.as_secs_f64() * 1e6 <= wait && waits.as_secs_f64() * 1e6 > wait - 5e6);
    for (charge, expected) in charges.iter().zip(&expected) {
        let key = store.shared.limit_key(&charge.key);
        assert_eq!(
            tat(&mut raw, &key).await.to_bits(),
            expected.to_bits(),
            "{}",
            charge.key
        );
    }
    // A correction of a TAT ahead of the clock does not depend on the instant either.
    let first = &charges[0];
    for delta in [-0.75, 2.5] {
        let before = tat(&mut raw, &store.shared.limit_key(&first.key)).await;
        store.shared.correct(first, delta).await.unwrap();
        let after = tat(&mut raw, &store.shared.limit_key(&first.key)).await;
        assert_eq!(
            after.to_bits(),
            first.rate.correct(before, now, delta).to_bits(),
            "{delta}"
        );
    }
}

/// Runs, limits and the instance set sit beside the records under the prefix's base (the prefix without its
/// `idem:`), and every one carries an expiry, so nothing is left for a reap.
#[tokio::test]
async fn shared_keys_expire_by_themselves() {
    let base = private_prefix();
    let Some(store) = connect(&format!("{base}idem:"), StoreOptions::default()).await else {
        return;
    };
    let mut raw = raw(&store).await;
    let shared = store.shared_state().unwrap();
    let run = RunKey::new(OwnerToken::random().to_hex(), "run");
    shared.visit_run(&run, None, LONG).await.unwrap();
    let limit = Charge {
        key: OwnerToken::random().to_hex(),
        rate: Gcra::per_minute(60, Duration::from_secs(1)),
        cost: 1.0,
    };
    shared
        .reserve(std::slice::from_ref(&limit), Duration::ZERO)
        .await
        .unwrap();
    shared
        .heartbeat(&OwnerToken::random().to_hex(), LONG)
        .await
        .unwrap();
    let run_key = format!("{base}run:{}", run.storage_key());
    let limit_key = format!("{base}limit:{}", limit.key);
    let instances_key = format!("{base}instances");
    for key in [&run_key, &limit_key, &instances_key] {
        let ttl: i64 = raw.pttl(key).await.unwrap();
        assert!(ttl > 0, "{key} has no expiry ({ttl})");
    }
    // The limit's TAT is one interval ahead; the key outlives it by the keep.
    let ttl: i64 = raw.pttl(&limit_key).await.unwrap();
    let keep = crate::shared_wire::LIMIT_KEEP.as_millis() as i64;
    assert!(ttl > keep && ttl <= keep + 3_000, "{ttl}");
}

/// A give-back to a run that is gone creates no key (which would have no expiry).
#[tokio::test]
async fn a_give_back_to_a_forgotten_run_leaves_no_key() {
    let Some(store) = connect(&private_prefix(), StoreOptions::default()).await else {
        return;
    };
    let run = RunKey::new("owner", "gone");
    store.shared.give_back_run_retry(&run).await.unwrap();
    let exists: bool = raw(&store)
        .await
        .exists(store.shared.run_key(&run))
        .await
        .unwrap();
    assert!(!exists);
}
