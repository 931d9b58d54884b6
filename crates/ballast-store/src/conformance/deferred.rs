//! The suite's cases for the [`DeferredQueue`] (`deferred_conformance_tests!`): every built-in backend has one.
//!
//! Each case works in queues of its own (a random tool name) and scopes of its own, so the cases run in
//! parallel on one server. Two handles opened separately stand for two gateway instances where it matters.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::{LONG, Opener, PATIENCE, SHORT, acquire, fresh_scope, open, request};
use crate::{
    ClaimOutcome, DeferredQueue, Finish, IdempotencyStore, NewOperation, OperationState, OwnerToken, Scope,
    StoreError, StoreOptions, Taken,
};

/// The queue of a store opened by `opener`: the backend must have one.
fn queue_of(store: &dyn IdempotencyStore) -> Arc<dyn DeferredQueue> {
    store
        .deferred()
        .unwrap_or_else(|| panic!("the {} store has no deferred queue", store.backend()))
}

pub(super) async fn opened(
    opener: Opener,
    options: StoreOptions,
) -> Option<(Arc<dyn IdempotencyStore>, Arc<dyn DeferredQueue>)> {
    let store = open(opener, options).await?;
    let queue = queue_of(&*store);
    Some((store, queue))
}

/// A queue name no other case uses.
pub(super) fn tool() -> String {
    format!("tool-{}", OwnerToken::random().to_hex())
}

pub(super) fn operation(tool: &str, priority: u8) -> NewOperation {
    NewOperation {
        tool: tool.to_owned(),
        priority,
        request: Bytes::from_static(b"{\"amount\":5}"),
        max_attempts: 3,
        ttl: LONG,
        due_in: Duration::ZERO,
        last: None,
    }
}

/// Claims a fresh scope and defers it as `new`; returns the scope and the record's owner.
pub(super) async fn deferred(
    store: &dyn IdempotencyStore,
    queue: &dyn DeferredQueue,
    new: &NewOperation,
) -> (Scope, OwnerToken) {
    let scope = fresh_scope();
    let claim = request("{\"amount\":5}", SHORT);
    acquire(store, &scope, &claim).await;
    queue.defer(&scope, claim.owner, new).await.expect("defer");
    (scope, claim.owner)
}

pub(super) async fn take(
    queue: &dyn DeferredQueue,
    tool: &str,
    lease: Duration,
) -> Option<(Taken, OwnerToken)> {
    let worker = OwnerToken::random();
    let taken = queue
        .take(&[tool.to_owned()], worker, lease)
        .await
        .expect("take")?;
    Some((taken, worker))
}

/// Takes from `tool` until something is due, within [`PATIENCE`].
pub(super) async fn take_when_due(
    queue: &dyn DeferredQueue,
    tool: &str,
    lease: Duration,
) -> (Taken, OwnerToken) {
    let give_up = crate::clock::monotonic_after(PATIENCE);
    loop {
        if let Some(taken) = take(queue, tool, lease).await {
            return taken;
        }
        assert!(
            !crate::clock::passed(give_up),
            "nothing became due in {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Only the record's holder defers it; the operation is queued with what it was given, and its record stays
/// held (a live retry of the key is in progress for the operation's life, not run a second time).
pub async fn a_deferred_operation_is_queued_and_holds_its_key(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let tool = tool();
    let scope = fresh_scope();
    let claim = request("{\"amount\":5}", SHORT);
    let new = operation(&tool, 3);
    assert!(matches!(
        queue.defer(&scope, claim.owner, &new).await,
        Err(StoreError::NotHeld)
    ));
    acquire(&*store, &scope, &claim).await;
    let stranger = OwnerToken::random();
    assert!(matches!(
        queue.defer(&scope, stranger, &new).await,
        Err(StoreError::NotHeld)
    ));
    store.mark_dispatched(&scope, claim.owner).await.unwrap();
    let queued = queue.defer(&scope, claim.owner, &new).await.unwrap();
    assert_eq!(queued.state, OperationState::Queued);
    assert_eq!((queued.tool.as_str(), queued.priority), (tool.as_str(), 3));
    assert_eq!((queued.attempts, queued.max_attempts), (0, 3));
    assert_eq!(queued.request, new.request);
    assert_eq!(queued.took, None);
    assert!(queued.expires_in > LONG - Duration::from_secs(5));
    assert_eq!(
        queue.lookup(&scope).await.unwrap().map(|o| o.state),
        Some(OperationState::Queued)
    );
    // The short claim lease was stretched: a retry of the key after it is still in progress.
    tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
    let retry = store
        .claim(&scope, &request("{\"amount\":5}", SHORT))
        .await
        .unwrap();
    let ClaimOutcome::InProgress { lease_left, .. } = retry else {
        panic!("a deferred key must stay in progress, got {retry:?}");
    };
    assert!(
        lease_left > LONG,
        "the record's lease covers the operation's life: {lease_left:?}"
    );
    // Another principal sees nothing.
    let other = Scope::new("someone-else", scope.route(), scope.key().clone());
    assert_eq!(queue.lookup(&other).await.unwrap(), None);
}

/// Workers take the highest class first, then the earliest due; only from the queues they name; nothing before
/// it is due.
pub async fn takes_follow_priority_then_due_time(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let (payments, lookups) = (tool(), tool());
    let (low, _) = deferred(&*store, &*queue, &operation(&lookups, 0)).await;
    let (high_later, _) = deferred(&*store, &*queue, &operation(&payments, 3)).await;
    let (high_first, _) = deferred(
        &*store,
        &*queue,
        &NewOperation {
            due_in: Duration::ZERO,
            ..operation(&payments, 3)
        },
    )
    .await;
    let (not_due, _) = deferred(
        &*store,
        &*queue,
        &NewOperation {
            due_in: Duration::from_millis(800),
            ..operation(&payments, 3)
        },
    )
    .await;
    let both = [lookups.clone(), payments.clone()];
    let mut order = Vec::new();
    for _ in 0..3 {
        let worker = OwnerToken::random();
        let taken = queue
            .take(&both, worker, LONG)
            .await
            .unwrap()
            .expect("a due operation");
        assert_eq!(taken.operation.state, OperationState::InProgress);
        assert!(!taken.interrupted);
        order.push(taken.operation.scope);
    }
    assert_eq!(order[2], low, "the low class goes last");
    assert_eq!(
        [&order[0], &order[1]].map(|s| s == &high_later || s == &high_first),
        [true, true]
    );
    assert_eq!(
        queue.take(&both, OwnerToken::random(), LONG).await.unwrap(),
        None,
        "the fourth is not due"
    );
    let (taken, _) = take_when_due(&*queue, &payments, LONG).await;
    assert_eq!(taken.operation.scope, not_due);
    assert_eq!(take(&*queue, &lookups, LONG).await, None);
}

/// Due times order a class: of two equal operations, the one due first is taken first.
pub async fn within_a_class_the_earliest_due_goes_first(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let tool = tool();
    let later = NewOperation {
        due_in: Duration::from_millis(300),
        ..operation(&tool, 2)
    };
    let (second, _) = deferred(&*store, &*queue, &later).await;
    let sooner = NewOperation {
        due_in: Duration::from_millis(100),
        ..operation(&tool, 2)
    };
    let (first, _) = deferred(&*store, &*queue, &sooner).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (one, _) = take(&*queue, &tool, LONG).await.expect("due");
    let (two, _) = take(&*queue, &tool, LONG).await.expect("due");
    assert_eq!([one.operation.scope, two.operation.scope], [first, second]);
}

/// Many workers on two instances take many operations at once: each is taken exactly once.
pub async fn concurrent_workers_never_take_one_operation_twice(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let Some((_, other)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let tool = tool();
    let mut scopes = Vec::new();
    for _ in 0..20 {
        scopes.push(deferred(&*store, &*queue, &operation(&tool, 1)).await.0);
    }
    let mut workers = Vec::new();
    for n in 0..8 {
        let queue = if n % 2 == 0 {
            Arc::clone(&queue)
        } else {
            Arc::clone(&other)
        };
        let tool = tool.clone();
        workers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some((taken, _)) = take(&*queue, &tool, LONG).await {
                got.push(taken.operation.scope);
            }
            got
        }));
    }
    let mut taken = Vec::new();
    for worker in workers {
        taken.extend(worker.await.unwrap());
    }
    taken.sort_by_key(Scope::storage_key);
    scopes.sort_by_key(Scope::storage_key);
    assert_eq!(taken, scopes, "every operation once, none twice");
}

/// A worker that dies mid-attempt leaves its operation to the next take once its lease ran out, told as
/// interrupted (the attempt counted); the dead worker can no longer write. A live worker renews and keeps it.
pub async fn a_dead_workers_operation_is_taken_again_as_interrupted(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let tool = tool();
    let (scope, _) = deferred(&*store, &*queue, &operation(&tool, 1)).await;
    let (taken, dead) = take(&*queue, &tool, SHORT).await.expect("due");
    assert_eq!(taken.operation.scope, scope);
    queue.begin_attempt(&scope, dead).await.unwrap();
    assert!(matches!(
        queue.renew(&scope, OwnerToken::random(), LONG).await,
        Err(StoreError::NotHeld)
    ));
    let (again, worker) = take_when_due(&*queue, &tool, LONG).await;
    assert_eq!(again.operation.scope, scope);
    assert!(again.interrupted, "the dead worker had begun an attempt");
    assert_eq!(again.operation.attempts, 1);
    assert!(matches!(
        queue.renew(&scope, dead, LONG).await,
        Err(StoreError::NotHeld)
    ));
    assert!(matches!(
        queue.finish(&scope, dead, &Finish::Expired, false).await,
        Err(StoreError::NotHeld)
    ));
    queue.renew(&scope, worker, SHORT).await.unwrap();
    tokio::time::sleep(SHORT / 2).await;
    queue.renew(&scope, worker, SHORT).await.unwrap();
    tokio::time::sleep(SHORT / 2).await;
    assert_eq!(take(&*queue, &tool, LONG).await, None, "a renewed lease keeps it");
    // A worker that never began an attempt leaves it uninterrupted.
    queue
        .reschedule(&scope, worker, Duration::ZERO, false, None)
        .await
        .unwrap();
    let (quiet, _) = take(&*queue, &tool, SHORT).await.expect("due");
    let (after, _) = take_when_due(&*queue, &tool, LONG).await;
    assert_eq!(quiet.operation.scope, after.operation.scope);
    assert!(!after.interrupted);
}
