//! The suite's cases for [`SharedState`] (runs and live instances here, account limits in `shared_limits`), for
//! backends that have one (`shared_state_conformance_tests!`).
//!
//! Two handles opened separately on one server stand for two gateway instances: what one writes, the other
//! must see, and what both do at once must add up as if one had done it all. Runs and limits get random keys,
//! so the cases run in parallel on one server; times are real, with short ttls and bounded polling.

use std::sync::Arc;
use std::time::Duration;

use super::{LONG, Opener, PATIENCE, SHORT, open};
use crate::{
    AllowanceRule, IdempotencyStore, OwnerToken, RetryTake, RunKey, RunState, SharedState, StoreOptions,
};

/// The shared state of a store opened by `opener`: the backend must have one.
fn shared_of(store: &dyn IdempotencyStore) -> Arc<dyn SharedState> {
    store.shared_state().unwrap_or_else(|| {
        panic!(
            "the {} store has no shared state: run the shared-state suite only for backends that have one",
            store.backend()
        )
    })
}

/// Two instances on the backend's server (two handles, opened separately), or `None` when it is skipped.
pub(crate) async fn two_instances(opener: Opener) -> Option<(Arc<dyn SharedState>, Arc<dyn SharedState>)> {
    let first = open(opener, StoreOptions::default()).await?;
    let second = open(opener, StoreOptions::default()).await?;
    Some((shared_of(&*first), shared_of(&*second)))
}

/// A name no other test uses.
pub(crate) fn unique(what: &str) -> String {
    format!("{what}-{}", OwnerToken::random().to_hex())
}

/// Asserts that `state`'s deadline is `about` ms away, give or take the time the test took since it offered it.
#[track_caller]
fn assert_deadline_near(state: RunState, about: i64) {
    let left = state.deadline_in_ms.expect("the run has a deadline");
    assert!(
        (about - 5_000..=about).contains(&left),
        "deadline {left} ms away, expected about {about}"
    );
}

/// The run's deadline is the earliest any instance ever offered: a later offer changes nothing, a visit
/// without an offer only reads it, and the other instance sees the same deadline.
pub async fn a_run_keeps_the_earliest_deadline_offered(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let run = RunKey::new(unique("owner"), "run-1");
    let fresh = one.visit_run(&run, None, LONG).await.unwrap();
    assert_eq!(
        fresh,
        RunState {
            deadline_in_ms: None,
            calls: 0,
            taken: 0
        }
    );
    let offered = one.visit_run(&run, Some(Duration::from_secs(60)), LONG).await;
    assert_eq!(
        offered.unwrap().deadline_in_ms,
        Some(60_000),
        "an offer is the run's deadline at once"
    );
    let earlier = other.visit_run(&run, Some(Duration::from_secs(30)), LONG).await;
    assert_deadline_near(earlier.unwrap(), 30_000);
    let later = one.visit_run(&run, Some(Duration::from_secs(50)), LONG).await;
    assert_deadline_near(later.unwrap(), 30_000);
    assert_deadline_near(other.visit_run(&run, None, LONG).await.unwrap(), 30_000);
    let passed = one.visit_run(&run, Some(Duration::ZERO), LONG).await.unwrap();
    assert!(passed.deadline_in_ms.is_some_and(|left| left <= 0), "{passed:?}");
}

/// A run nobody visits for its ttl is forgotten: the next visit finds a fresh run (no deadline, no calls, no
/// retries taken) that takes the deadline it is offered, whatever the old one was.
pub async fn a_run_is_forgotten_after_its_ttl(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let run = RunKey::new(unique("owner"), "run-1");
    let rule = AllowanceRule { base: 1, share: 0.0 };
    one.visit_run(&run, Some(Duration::from_secs(30)), SHORT)
        .await
        .unwrap();
    assert!(one.take_run_retry(&run, 1, rule, SHORT).await.unwrap().taken);
    let kept = other.visit_run(&run, None, SHORT).await.unwrap();
    assert_deadline_near(kept, 30_000);
    assert_eq!((kept.calls, kept.taken), (1, 1));
    // Each look keeps the run for another SHORT, so look less often than that.
    let give_up = crate::clock::monotonic_after(PATIENCE);
    loop {
        tokio::time::sleep(SHORT + Duration::from_millis(150)).await;
        let state = other
            .visit_run(&run, Some(Duration::from_secs(60)), SHORT)
            .await
            .unwrap();
        if state.deadline_in_ms > Some(30_000) {
            assert_eq!((state.calls, state.taken), (0, 0), "a forgotten run starts over");
            assert_deadline_near(state, 60_000);
            return;
        }
        assert!(
            !crate::clock::passed(give_up),
            "the run was never forgotten: {state:?}"
        );
    }
}

/// The allowance is `base + floor(share x calls)` over the calls every instance reported; taking stops at it,
/// and a give-back returns one retry, never going below zero.
pub async fn the_allowance_counts_every_instances_calls(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let run = RunKey::new(unique("owner"), "run-1");
    let rule = AllowanceRule { base: 1, share: 0.5 };
    let take = |store: &Arc<dyn SharedState>, calls: u64| {
        let (store, run) = (Arc::clone(store), run.clone());
        async move { store.take_run_retry(&run, calls, rule, LONG).await.unwrap() }
    };
    let taken = |left| RetryTake { taken: true, left };
    assert_eq!(take(&one, 2).await, taken(1), "2 calls: 1 + 1 retries, 1 taken");
    assert_eq!(
        take(&other, 2).await,
        taken(1),
        "4 calls from both: 1 + 2 retries, 2 taken"
    );
    assert_eq!(take(&one, 0).await, taken(0));
    let refused = RetryTake {
        taken: false,
        left: 0,
    };
    assert_eq!(take(&other, 0).await, refused, "the allowance is spent");
    let state = one.visit_run(&run, None, LONG).await.unwrap();
    assert_eq!((state.calls, state.taken), (4, 3));
    other.give_back_run_retry(&run).await.unwrap();
    assert_eq!(
        take(&one, 0).await,
        taken(0),
        "a given-back retry can be taken again"
    );
    assert_eq!(take(&other, 1).await, refused, "5 calls: still 1 + 2");
    for _ in 0..5 {
        one.give_back_run_retry(&run).await.unwrap();
    }
    assert_eq!(
        other.visit_run(&run, None, LONG).await.unwrap().taken,
        0,
        "never below zero"
    );
    let unknown = RunKey::new(unique("owner"), "never-visited");
    other.give_back_run_retry(&unknown).await.unwrap();
    let state = one.visit_run(&unknown, None, LONG).await.unwrap();
    assert_eq!((state.calls, state.taken), (0, 0));
}

/// 2 instances x 20 tasks taking at once from one run take exactly its allowance.
pub async fn concurrent_takes_never_exceed_the_allowance(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let run = Arc::new(RunKey::new(unique("owner"), "run-1"));
    let rule = AllowanceRule { base: 10, share: 0.0 };
    let mut takers = tokio::task::JoinSet::new();
    for store in [&one, &other] {
        for _ in 0..20 {
            let (store, run) = (Arc::clone(store), Arc::clone(&run));
            takers.spawn(async move { store.take_run_retry(&run, 0, rule, LONG).await.unwrap().taken });
        }
    }
    let mut taken = 0;
    while let Some(took) = takers.join_next().await {
        taken += usize::from(took.unwrap());
    }
    assert_eq!(taken, 10, "exactly the allowance");
    assert_eq!(one.visit_run(&run, None, LONG).await.unwrap().taken, 10);
}

/// Two owners' runs of one id are two runs, even where owner and id would join into the same text.
pub async fn owners_keep_their_runs_apart(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let owner = unique("owner");
    let first = RunKey::new(format!("{owner}:x"), "y");
    let second = RunKey::new(owner.clone(), "x:y");
    let third = RunKey::new(unique("owner"), "y");
    let rule = AllowanceRule { base: 1, share: 0.0 };
    one.visit_run(&first, Some(Duration::from_secs(30)), LONG)
        .await
        .unwrap();
    assert!(one.take_run_retry(&first, 3, rule, LONG).await.unwrap().taken);
    for run in [&second, &third] {
        let state = other.visit_run(run, None, LONG).await.unwrap();
        assert_eq!(
            state,
            RunState {
                deadline_in_ms: None,
                calls: 0,
                taken: 0
            },
            "{run:?}"
        );
        assert!(
            other.take_run_retry(run, 0, rule, LONG).await.unwrap().taken,
            "{run:?}"
        );
    }
}

/// Live instances are counted across handles; one that stops beating drops out after its ttl. (Counted
/// relative to what the first beat saw: other processes beating on the same server during the case — another
/// run of this suite — would move the count.)
pub async fn live_instances_are_counted_until_they_stop(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let (steady, leaving) = (unique("instance"), unique("instance"));
    let patience = Duration::from_secs(5);
    let alone = one.heartbeat(&steady, patience).await.unwrap();
    assert!(alone >= 1, "a beating instance counts itself");
    let both = other.heartbeat(&leaving, SHORT * 2).await.unwrap();
    assert_eq!(both, alone + 1, "the other instance counts both");
    assert_eq!(one.heartbeat(&steady, patience).await.unwrap(), both);
    let give_up = crate::clock::monotonic_after(PATIENCE);
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let count = one.heartbeat(&steady, patience).await.unwrap();
        if count == alone {
            return;
        }
        assert_eq!(count, both, "only the silent instance may drop out");
        assert!(
            !crate::clock::passed(give_up),
            "the silent instance never dropped out"
        );
    }
}
