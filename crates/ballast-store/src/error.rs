//! The one error type of every store.

use std::error::Error as StdError;

/// A boxed error from a backend's driver (kept as the source of [`StoreError::Unavailable`]).
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Why a store operation did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached or failed to answer (connection refused, I/O error, timeout, a driver
    /// error). Nothing can be concluded about the record: before a claim, fail closed (503, nothing runs); after
    /// the upstream answered, keep retrying the write.
    #[error("the idempotency store is unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The caller does not hold the record in a state this change applies to: its lease ran out and another
    /// request took it over (a displaced owner's late write), or the record was released, finished or reaped, or
    /// the change skips a step (`outcome_unknown` before `dispatched`). Nothing was changed.
    #[error(
        "this request no longer holds its idempotency key in a state that allows this change (the lease ran out and another request took it over, or the record already finished)"
    )]
    NotHeld,
    /// A stored record could not be read back (a value this version does not understand).
    #[error("an idempotency record could not be read: {0}")]
    Corrupt(String),
    /// The URL names no backend this build supports.
    #[error(
        "{url:?} is not a supported store URL (use sqlite://PATH, sqlite::memory:, redis://HOST or postgres://...; TLS to Redis, rediss://, is not built yet)"
    )]
    UnsupportedUrl {
        /// The URL as given, with any password removed.
        url: String,
    },
    /// The URL names a backend whose cargo feature is off in this build.
    #[error(
        "the {backend} store is not compiled into this build (enable the ballast-store feature \"{backend}\")"
    )]
    BackendDisabled {
        /// `sqlite`, `postgres` or `redis`.
        backend: &'static str,
    },
}

impl StoreError {
    /// A driver's error as [`StoreError::Unavailable`].
    pub fn unavailable(error: impl Into<BoxError>) -> Self {
        StoreError::Unavailable(error.into())
    }
}
