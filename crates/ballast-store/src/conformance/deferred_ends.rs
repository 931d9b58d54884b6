//! The suite's cases for how a deferred operation is given back and ended (`deferred_conformance_tests!`), beside
//! how it is queued and taken (`deferred.rs`): a reschedule, each end with its record, the ttl, depth and reap.

use std::time::Duration;

use super::deferred::{deferred, opened, operation, take, take_when_due, tool};
use super::{LONG, Opener, PATIENCE, SHORT, request, response};
use crate::{ClaimOutcome, Finish, NewOperation, OperationState, StoreError, StoreOptions};

/// A rescheduled operation waits in the queue again, counts only attempts that reached the upstream, keeps its
/// last answer, and its record goes back to `claimed` (a claim of the key is still in progress).
pub async fn a_rescheduled_operation_waits_and_counts_its_attempts(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let tool = tool();
    let (scope, _) = deferred(&*store, &*queue, &operation(&tool, 1)).await;
    let (_, worker) = take(&*queue, &tool, LONG).await.expect("due");
    queue.begin_attempt(&scope, worker).await.unwrap();
    let refusal = response(503, b"{\"error\":\"busy\"}");
    queue
        .reschedule(&scope, worker, Duration::from_millis(300), true, Some(&refusal))
        .await
        .unwrap();
    let waiting = queue.lookup(&scope).await.unwrap().unwrap();
    assert_eq!(waiting.state, OperationState::Queued);
    assert_eq!(waiting.attempts, 1);
    assert_eq!(waiting.last, Some(refusal.clone()));
    assert!(waiting.due_in > Duration::ZERO && waiting.due_in <= Duration::from_millis(300));
    assert!(
        matches!(
            queue.finish(&scope, worker, &Finish::Expired, false).await,
            Err(StoreError::NotHeld)
        ),
        "a rescheduled operation is no longer the worker's"
    );
    let retry = store
        .claim(&scope, &request("{\"amount\":5}", SHORT))
        .await
        .unwrap();
    assert!(matches!(retry, ClaimOutcome::InProgress { .. }), "{retry:?}");
    let (_, worker) = take_when_due(&*queue, &tool, LONG).await;
    queue
        .reschedule(&scope, worker, Duration::ZERO, false, None)
        .await
        .unwrap();
    let waiting = queue.lookup(&scope).await.unwrap().unwrap();
    assert_eq!(
        waiting.attempts, 1,
        "an attempt refused before it left is not counted"
    );
    assert_eq!(waiting.last, Some(refusal), "the last answer is kept");
}

/// Each end writes the operation and its record together: completed and rejected replay the answer, gave-up
/// and expired release the key (a later call runs), outcome-unknown is final.
pub async fn each_end_settles_the_record_with_the_operation(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let tool = tool();
    let ok = response(200, b"{\"refund\":\"r-1\"}");
    let refused = response(422, b"{\"error\":\"no such order\"}");
    let busy = response(503, b"{\"error\":\"busy\"}");
    let ends = [
        (
            Finish::Completed(ok.clone()),
            OperationState::Completed,
            Some(ClaimOutcome::Completed(ok)),
        ),
        (
            Finish::Rejected(refused.clone()),
            OperationState::Failed,
            Some(ClaimOutcome::Completed(refused)),
        ),
        (Finish::GaveUp(Some(busy.clone())), OperationState::Failed, None),
        (Finish::Expired, OperationState::Expired, None),
        (
            Finish::OutcomeUnknown,
            OperationState::OutcomeUnknown,
            Some(ClaimOutcome::OutcomeUnknown),
        ),
    ];
    for (end, state, replay) in ends {
        let (scope, _) = deferred(&*store, &*queue, &operation(&tool, 1)).await;
        let (_, worker) = take(&*queue, &tool, LONG).await.expect("due");
        queue.begin_attempt(&scope, worker).await.unwrap();
        queue.finish(&scope, worker, &end, true).await.unwrap();
        let done = queue.lookup(&scope).await.unwrap().unwrap();
        assert_eq!(done.state, state, "{end:?}");
        assert_eq!(done.attempts, 1);
        assert_eq!(done.last.as_ref(), end.last());
        assert!(done.took.is_some(), "a finished operation says how long it took");
        assert_eq!(done.due_in, Duration::ZERO);
        let claim = store
            .claim(&scope, &request("{\"amount\":5}", SHORT))
            .await
            .unwrap();
        assert_eq!(claim, replay.unwrap_or(ClaimOutcome::Acquired), "{end:?}");
        assert!(
            matches!(
                queue.finish(&scope, worker, &Finish::Expired, false).await,
                Err(StoreError::NotHeld)
            ),
            "an ended operation takes no second end"
        );
    }
    assert_eq!(
        take(&*queue, &tool, LONG).await,
        None,
        "ended operations are never taken"
    );
}

/// The ttl caps the due time, and an operation past it is due (for its worker to end it expired); a key whose
/// operation ended can be claimed and deferred again, replacing the ended one.
pub async fn the_ttl_bounds_the_wait_and_an_ended_key_defers_again(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let tool = tool();
    let short = NewOperation {
        ttl: SHORT,
        due_in: LONG,
        ..operation(&tool, 1)
    };
    let (scope, _) = deferred(&*store, &*queue, &short).await;
    let queued = queue.lookup(&scope).await.unwrap().unwrap();
    assert!(
        queued.due_in <= SHORT,
        "due at the ttl at the latest: {:?}",
        queued.due_in
    );
    let (taken, worker) = take_when_due(&*queue, &tool, LONG).await;
    assert_eq!(taken.operation.expires_in, Duration::ZERO);
    queue
        .finish(&scope, worker, &Finish::Expired, false)
        .await
        .unwrap();
    let claim = request("{\"amount\":5}", SHORT);
    assert_eq!(store.claim(&scope, &claim).await.unwrap(), ClaimOutcome::Acquired);
    let again = queue
        .defer(&scope, claim.owner, &operation(&tool, 2))
        .await
        .unwrap();
    assert_eq!(
        (again.state, again.priority, again.attempts),
        (OperationState::Queued, 2, 0)
    );
    assert_eq!(
        queue.lookup(&scope).await.unwrap().unwrap().state,
        OperationState::Queued
    );
}

/// Depth counts unfinished operations per queue and class, with the oldest one's age; reap deletes ended
/// operations past the retention and nothing else.
pub async fn depth_counts_waiting_work_and_reap_deletes_old_ends(opener: Opener) {
    let options = StoreOptions {
        retention: Duration::from_millis(500),
    };
    let Some((store, queue)) = opened(opener, options).await else {
        return;
    };
    let tool = tool();
    let (first, _) = deferred(&*store, &*queue, &operation(&tool, 3)).await;
    deferred(&*store, &*queue, &operation(&tool, 3)).await;
    deferred(&*store, &*queue, &operation(&tool, 0)).await;
    let (_, worker) = take(&*queue, &tool, LONG).await.expect("due");
    let mut depth: Vec<_> = queue
        .depth()
        .await
        .unwrap()
        .into_iter()
        .filter(|d| d.tool == tool)
        .map(|d| (d.priority, d.queued, d.in_progress))
        .collect();
    depth.sort();
    assert_eq!(depth, [(0, 1, 0), (3, 1, 1)]);
    // A store's clock may count whole milliseconds (SQLite's does): let some pass, or a fast store reads an age
    // of zero.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let oldest = queue
        .depth()
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.tool == tool && d.priority == 3);
    assert!(oldest.is_some_and(|d| d.oldest > Duration::ZERO && d.oldest < PATIENCE));
    let held = queue.lookup(&first).await.unwrap().unwrap();
    assert_eq!(
        held.state,
        OperationState::InProgress,
        "of equal class and due time, the first deferred goes first"
    );
    queue
        .finish(&first, worker, &Finish::Expired, false)
        .await
        .unwrap();
    let give_up = crate::clock::monotonic_after(PATIENCE);
    loop {
        queue.reap().await.unwrap();
        if queue.lookup(&first).await.unwrap().is_none() {
            break;
        }
        assert!(
            !crate::clock::passed(give_up),
            "the ended operation was never reaped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: u64 = (queue.depth().await.unwrap().iter())
        .filter(|d| d.tool == tool)
        .map(|d| d.queued + d.in_progress)
        .sum();
    assert_eq!(left, 2, "reap deletes only ended operations");
}
