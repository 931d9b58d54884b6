//! The one conformance suite: every backend runs every test here, one per row of DESIGN.md's table and per state
//! transition, so the backends cannot drift apart.
//!
//! A backend's tests call [`conformance_tests!`](crate::conformance_tests) with an [`Opener`]; each suite
//! function becomes a `#[tokio::test]` of that backend. The tests use real time with short leases and bounded
//! polling (STYLE.md: a store is another process, where paused time fires spurious timeouts), and each test
//! works in scopes of its own (a random principal), so they run in parallel against one shared server.
//!
//! Backends with a [`SharedState`](crate::SharedState) (Redis, PostgreSQL) also call
//! [`shared_state_conformance_tests!`](crate::shared_state_conformance_tests) with the same [`Opener`]: two
//! handles it opens stand for two gateway instances on one server.
//!
//! [`service_url`] and [`service_unavailable`] are the shared rule for servers that may be missing: skip with a
//! printed reason on a laptop, fail where `BALLAST_REQUIRE_SERVICES=1` (CI).

mod abandoned;
mod cases;
mod deferred;
mod deferred_ends;
mod expiry;
mod lease;
mod shared;
mod shared_limits;

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ballast_core::{Fingerprint, IdempotencyKey, fingerprint};
use bytes::Bytes;

pub use abandoned::*;
pub use cases::*;
pub use deferred::*;
pub use deferred_ends::*;
pub use expiry::*;
pub use lease::*;
pub use shared::*;
pub use shared_limits::*;

use crate::{ClaimOutcome, ClaimRequest, ExpiredDispatch, IdempotencyStore, OwnerToken, Scope, StoreOptions};

/// Opens a fresh handle on the backend under test with these options, or `None` when its server is missing
/// and the run allows skipping (see [`service_unavailable`]).
pub type Opener = fn(StoreOptions) -> Opening;

/// What an [`Opener`] returns: the store, once open.
pub type Opening = Pin<Box<dyn Future<Output = Option<Arc<dyn IdempotencyStore>>> + Send>>;

/// The suite as `#[tokio::test]`s of the calling module, each opening its store with `$opener`.
#[macro_export]
macro_rules! conformance_tests {
    ($opener:expr) => {
        $crate::conformance_tests!(@tests $opener;
            claim_acquires_a_new_key,
            lookup_of_an_unknown_key_is_none,
            same_key_while_claimed_is_in_progress,
            same_key_while_dispatched_is_in_progress,
            another_fingerprint_is_a_mismatch_in_every_state,
            completed_responses_replay_exactly,
            released_claims_leave_nothing_behind,
            outcome_unknown_is_final,
            writes_by_another_owner_are_rejected,
            transitions_out_of_order_are_rejected,
            principals_are_isolated,
            routes_are_isolated,
            concurrent_claims_have_one_winner,
            an_expired_claim_is_taken_over,
            a_displaced_owner_cannot_write,
            an_expired_dispatch_becomes_outcome_unknown,
            an_expired_dispatch_is_taken_over_when_the_upstream_deduplicates,
            finished_records_expire_after_the_retention,
            reap_deletes_expired_records,
            a_live_holder_renews_its_lease,
            a_late_renewal_is_accepted_when_nobody_took_over,
            renewal_by_anyone_but_the_holder_is_refused,
            a_late_answer_settles_an_expiry_made_outcome_unknown,
            a_late_release_clears_an_expiry_made_outcome_unknown,
            a_late_answer_after_a_take_over_is_refused,
            the_retired_token_writes_nothing,
            a_working_store_passes_its_check,
        );
    };
    (@tests $opener:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::conformance::$name($opener).await;
            }
        )+
    };
}

/// The shared-state suite as `#[tokio::test]`s of the calling module, each opening two handles with `$opener`
/// (a backend whose `shared_state()` is `None` fails every one: call it only for backends that share state).
#[macro_export]
macro_rules! shared_state_conformance_tests {
    ($opener:expr) => {
        $crate::conformance_tests!(@tests $opener;
            a_run_keeps_the_earliest_deadline_offered,
            a_run_is_forgotten_after_its_ttl,
            the_allowance_counts_every_instances_calls,
            concurrent_takes_never_exceed_the_allowance,
            owners_keep_their_runs_apart,
            a_burst_goes_at_once_then_refusals_say_when,
            a_caller_that_may_wait_books_its_slot,
            charges_are_booked_together_or_not_at_all,
            a_limit_holds_across_instances,
            corrections_move_the_tat_and_refunds_stop_at_now,
            live_instances_are_counted_until_they_stop,
        );
    };
}

/// The deferred-queue suite as `#[tokio::test]`s of the calling module (every built-in backend has a queue).
#[macro_export]
macro_rules! deferred_conformance_tests {
    ($opener:expr) => {
        $crate::conformance_tests!(@tests $opener;
            a_deferred_operation_is_queued_and_holds_its_key,
            takes_follow_priority_then_due_time,
            within_a_class_the_earliest_due_goes_first,
            concurrent_workers_never_take_one_operation_twice,
            a_dead_workers_operation_is_taken_again_as_interrupted,
            a_rescheduled_operation_waits_and_counts_its_attempts,
            each_end_settles_the_record_with_the_operation,
            the_ttl_bounds_the_wait_and_an_ended_key_defers_again,
            depth_counts_waiting_work_and_reap_deletes_old_ends,
            operations_nobody_works_end_after_their_ttl_and_grace,
        );
    };
}

/// The server URL for tests: the environment variable `var` if set, else `default`.
pub fn service_url(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// Whether missing services fail the run (`BALLAST_REQUIRE_SERVICES=1`, set by CI) instead of skipping.
pub fn services_required() -> bool {
    std::env::var("BALLAST_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// A test's server is unreachable: panics where services are required, else prints why the test is skipped
/// and returns `None`.
pub fn service_unavailable<T>(what: &str, error: impl Display) -> Option<T> {
    assert!(
        !services_required(),
        "{what} is required (BALLAST_REQUIRE_SERVICES=1) but unreachable: {error}"
    );
    eprintln!("skipped: {what} is unreachable ({error}); start it or set BALLAST_REQUIRE_SERVICES=1 to fail");
    None
}

/// A long lease: nothing in a test outlives it.
pub(crate) const LONG: Duration = Duration::from_secs(60);
/// A short lease: tests that need a lease to run out wait about this long.
pub(crate) const SHORT: Duration = Duration::from_millis(300);
/// Longest wait for something the store's clock decides (a lease, a retention), so a broken store fails the
/// test instead of hanging it.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// A scope no other test uses: a random principal.
pub(crate) fn fresh_scope() -> Scope {
    Scope::new(
        format!("p-{}", OwnerToken::random().to_hex()),
        "POST /v1/tools/refund",
        random_key(),
    )
}

pub(crate) fn random_key() -> IdempotencyKey {
    IdempotencyKey::parse(&OwnerToken::random().to_hex()).expect("32 hex digits are a valid key")
}

pub(crate) fn print(body: &str) -> Fingerprint {
    fingerprint(
        "POST",
        "/v1/tools/refund",
        Some("application/json"),
        body.as_bytes(),
    )
    .expect("the suite's bodies name no member twice")
}

pub(crate) fn request(body: &str, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        fingerprint: print(body),
        owner: OwnerToken::random(),
        lease,
        expired_dispatch: ExpiredDispatch::OutcomeUnknown,
    }
}

pub(crate) async fn open(opener: Opener, options: StoreOptions) -> Option<Arc<dyn IdempotencyStore>> {
    opener(options).await
}

/// Claims `scope` with `request`, which must be acquired (for the backends' own tests; unused when the suite is
/// built only for the `conformance` feature).
#[cfg(test)]
pub(crate) use acquire as acquire_for_tests;

/// Claims `scope` with `request`, which must be acquired.
pub(crate) async fn acquire(store: &dyn IdempotencyStore, scope: &Scope, request: &ClaimRequest) {
    let outcome = store.claim(scope, request).await.expect("claim");
    assert_eq!(outcome, ClaimOutcome::Acquired, "a fresh scope must be acquired");
}

pub(crate) fn response(status: u16, body: &'static [u8]) -> crate::StoredResponse {
    crate::StoredResponse {
        status,
        headers: vec![
            ("content-type".to_owned(), b"application/json".to_vec()),
            ("x-request-id".to_owned(), vec![b'r', 0x80, b'1']),
        ],
        body: Bytes::from_static(body),
    }
}

/// Claims with `request` until the answer is not `InProgress` (the lease ran out), within [`PATIENCE`].
pub(crate) async fn claim_after_lease(
    store: &dyn IdempotencyStore,
    scope: &Scope,
    request: &ClaimRequest,
) -> ClaimOutcome {
    let give_up = crate::clock::monotonic_after(PATIENCE);
    loop {
        let outcome = store.claim(scope, request).await.expect("claim");
        if !matches!(outcome, ClaimOutcome::InProgress { .. }) {
            return outcome;
        }
        assert!(
            !crate::clock::passed(give_up),
            "the lease never ran out: still {outcome:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
