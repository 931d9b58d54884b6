//! The suite's case for operations nobody works ([`DeferredQueue::expire_abandoned`](crate::DeferredQueue);
//! `crate::deferred`, "Operations nobody works"), beside the queue's other cases (`deferred.rs`).

use std::time::Duration;

use super::deferred::{deferred, opened, operation, take, tool};
use super::{LONG, Opener, PATIENCE, SHORT, request, response};
use crate::{ClaimOutcome, Finish, NewOperation, OperationState, StoreError, StoreOptions};

/// The grace the case ends operations after. Not zero: the case shares its server with the others, and one of
/// them waits for its own short-lived operation to fall due at its ttl and takes it then — a zero grace could
/// end it first.
const GRACE: Duration = Duration::from_secs(1);

/// Past its ttl and the grace, an operation nobody holds ends, whatever its tool: one never taken (its tool has
/// no worker) and one whose worker died before its attempt end `expired` and release their keys; one whose
/// worker died with its attempt begun ends `outcome_unknown`, the attempt counted, its record too. One a live
/// worker holds stays its worker's, one within its ttl waits on, and nothing ends within the grace.
pub async fn operations_nobody_works_end_after_their_ttl_and_grace(opener: Opener) {
    let Some((store, queue)) = opened(opener, StoreOptions::default()).await else {
        return;
    };
    let short = |tool: &str| NewOperation {
        ttl: SHORT,
        ..operation(tool, 1)
    };
    let (orphaned, dead, quiet, live) = (tool(), tool(), tool(), tool());
    let (never_taken, _) = deferred(&*store, &*queue, &short(&orphaned)).await;
    let (sent, _) = deferred(&*store, &*queue, &short(&dead)).await;
    let (_, dead_worker) = take(&*queue, &dead, SHORT).await.expect("due");
    queue.begin_attempt(&sent, dead_worker).await.unwrap();
    let (unsent, _) = deferred(&*store, &*queue, &short(&quiet)).await;
    take(&*queue, &quiet, SHORT).await.expect("due");
    let (held, _) = deferred(&*store, &*queue, &short(&live)).await;
    let (_, live_worker) = take(&*queue, &live, LONG).await.expect("due");
    let (waiting, _) = deferred(&*store, &*queue, &operation(&tool(), 1)).await;
    let state = |scope| {
        let queue = &queue;
        async move { queue.lookup(scope).await.unwrap().expect("an operation").state }
    };

    tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
    queue.expire_abandoned(LONG).await.unwrap();
    assert_eq!(
        state(&never_taken).await,
        OperationState::Queued,
        "within the grace"
    );
    assert_eq!(state(&sent).await, OperationState::InProgress, "within the grace");
    assert_eq!(
        state(&unsent).await,
        OperationState::InProgress,
        "within the grace"
    );

    let give_up = crate::clock::monotonic_after(PATIENCE);
    let mut ended = 0;
    loop {
        ended += queue.expire_abandoned(GRACE).await.unwrap();
        let mut finished = true;
        for scope in [&never_taken, &sent, &unsent] {
            finished &= state(scope).await.is_finished();
        }
        if finished {
            break;
        }
        assert!(
            !crate::clock::passed(give_up),
            "the abandoned operations never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ended >= 3, "each end is counted: {ended}");

    let claim = || request("{\"amount\":5}", SHORT);
    for (scope, end, attempts, record) in [
        (&never_taken, OperationState::Expired, 0, ClaimOutcome::Acquired),
        (
            &sent,
            OperationState::OutcomeUnknown,
            1,
            ClaimOutcome::OutcomeUnknown,
        ),
        (&unsent, OperationState::Expired, 0, ClaimOutcome::Acquired),
    ] {
        let operation = queue.lookup(scope).await.unwrap().unwrap();
        assert_eq!((operation.state, operation.attempts), (end, attempts), "{end:?}");
        assert!(
            operation.took.is_some(),
            "an ended operation says how long it took"
        );
        assert_eq!(operation.last, None);
        assert_eq!(store.claim(scope, &claim()).await.unwrap(), record, "{end:?}");
    }
    assert!(
        matches!(
            queue
                .finish(&sent, dead_worker, &Finish::Completed(response(200, b"{}")), true)
                .await,
            Err(StoreError::NotHeld)
        ),
        "the dead worker's late end is refused"
    );
    let depth = queue.depth().await.unwrap();
    assert!(
        !depth
            .iter()
            .any(|d| [&orphaned, &dead, &quiet].contains(&&d.tool)),
        "ended operations leave the depth: {depth:?}"
    );

    assert_eq!(
        state(&held).await,
        OperationState::InProgress,
        "a live worker keeps it"
    );
    assert_eq!(state(&waiting).await, OperationState::Queued, "within its ttl");
    queue
        .finish(&held, live_worker, &Finish::Expired, false)
        .await
        .unwrap();
}
