//! A store from its URL: the scheme picks the backend.

use std::sync::Arc;

use crate::{IdempotencyStore, StoreError, StoreOptions};

/// Opens the store `url` names, creating or migrating its schema: `sqlite://PATH` (a file, WAL) or
/// `sqlite::memory:` (the embedded default), `postgres://...` / `postgresql://...`, `redis://...` (TLS to Redis,
/// `rediss://`, is refused with a message until it is built).
///
/// ```
/// # tokio_test_block_on(async {
/// use ballast_store::{StoreOptions, open};
/// let store = open("sqlite::memory:", StoreOptions::default()).await.unwrap();
/// assert_eq!(store.backend(), "sqlite");
/// assert!(open("mysql://x", StoreOptions::default()).await.is_err());
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
pub async fn open(url: &str, options: StoreOptions) -> Result<Arc<dyn IdempotencyStore>, StoreError> {
    if url == "sqlite::memory:" || url.starts_with("sqlite://") {
        return open_sqlite(url, options).await;
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return open_postgres(url, options).await;
    }
    if url.starts_with("redis://") || url.starts_with("rediss://") {
        return open_redis(url, options).await;
    }
    Err(StoreError::UnsupportedUrl {
        url: without_password(url),
    })
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(url: &str, options: StoreOptions) -> Result<Arc<dyn IdempotencyStore>, StoreError> {
    Ok(Arc::new(crate::SqliteStore::open(url, options).await?))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(_: &str, _: StoreOptions) -> Result<Arc<dyn IdempotencyStore>, StoreError> {
    Err(StoreError::BackendDisabled { backend: "sqlite" })
}

#[cfg(feature = "postgres")]
async fn open_postgres(url: &str, options: StoreOptions) -> Result<Arc<dyn IdempotencyStore>, StoreError> {
    Ok(Arc::new(crate::PostgresStore::open(url, options).await?))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(_: &str, _: StoreOptions) -> Result<Arc<dyn IdempotencyStore>, StoreError> {
    Err(StoreError::BackendDisabled { backend: "postgres" })
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str, options: StoreOptions) -> Result<Arc<dyn IdempotencyStore>, StoreError> {
    Ok(Arc::new(crate::RedisStore::open(url, options).await?))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(_: &str, _: StoreOptions) -> Result<Arc<dyn IdempotencyStore>, StoreError> {
    Err(StoreError::BackendDisabled { backend: "redis" })
}

/// `url` with the password of its userinfo (`user:password@`) replaced by `***`, for error messages.
pub(crate) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_an_error_message() {
        assert_eq!(
            without_password("mysql://u:secret@h:1/db"),
            "mysql://u:***@h:1/db"
        );
        assert_eq!(without_password("mysql://h/db"), "mysql://h/db");
        assert_eq!(without_password("nonsense"), "nonsense");
        assert_eq!(without_password("x://u@h"), "x://u@h");
    }

    #[tokio::test]
    async fn an_unknown_scheme_is_refused_by_name() {
        let error = open("mysql://u:secret@h/db", StoreOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::UnsupportedUrl { ref url } if url == "mysql://u:***@h/db"));
        assert!(!error.to_string().contains("secret"));
    }
}
