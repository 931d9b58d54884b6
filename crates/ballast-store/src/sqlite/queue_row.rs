//! A deferred operation's row as the queue's statements read it (`queue_sql.rs`), and what it becomes: the
//! [`Operation`] the trait answers, its durations counted from the store's now.

use std::time::Duration;

use ballast_core::IdempotencyKey;
use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension, Row};

use super::sql::{PK, unavailable};
use crate::clock::from_millis;
use crate::{Operation, OperationState, Scope, StoreError, StoredResponse, decode_headers, encode_headers};

/// The columns [`Raw::of`] reads, in its order.
pub(super) const COLUMNS: &str = "principal, route, key, tool, priority, state, attempts, max_attempts, request, \
    last_status, last_headers, last_body, deferred_at, due_at, expires_at, finished_at";

/// An operation's row as stored; [`Raw::operation`] makes it what the trait answers.
pub(super) struct Raw {
    principal: String,
    route: String,
    key: String,
    tool: String,
    priority: i64,
    state: String,
    attempts: i64,
    max_attempts: i64,
    request: Vec<u8>,
    last: (Option<i64>, Option<Vec<u8>>, Option<Vec<u8>>),
    deferred_at: i64,
    due_at: i64,
    expires_at: i64,
    finished_at: Option<i64>,
}

impl Raw {
    pub(super) fn of(row: &Row<'_>) -> rusqlite::Result<Raw> {
        Ok(Raw {
            principal: row.get(0)?,
            route: row.get(1)?,
            key: row.get(2)?,
            tool: row.get(3)?,
            priority: row.get(4)?,
            state: row.get(5)?,
            attempts: row.get(6)?,
            max_attempts: row.get(7)?,
            request: row.get(8)?,
            last: (row.get(9)?, row.get(10)?, row.get(11)?),
            deferred_at: row.get(12)?,
            due_at: row.get(13)?,
            expires_at: row.get(14)?,
            finished_at: row.get(15)?,
        })
    }

    /// The operation at `now` (durations from it), or why the row cannot be one.
    pub(super) fn operation(self, now: i64) -> Result<Operation, StoreError> {
        let which = format!("{}/{}/{}", self.principal, self.route, self.key);
        let corrupt =
            |what: &str| StoreError::Corrupt(format!("the deferred operation's {what} of {which:?}"));
        let key = IdempotencyKey::parse(&self.key).map_err(|_| corrupt("key"))?;
        let state = OperationState::parse(&self.state).ok_or_else(|| corrupt("state"))?;
        let last = match self.last {
            (None, _, _) => None,
            (Some(status), headers, body) => Some(StoredResponse {
                status: u16::try_from(status).map_err(|_| corrupt("status"))?,
                headers: decode_headers(&headers.unwrap_or_default())?,
                body: Bytes::from(body.unwrap_or_default()),
            }),
        };
        let since = |from: i64, to: i64| from_millis(to.saturating_sub(from));
        Ok(Operation {
            scope: Scope::new(self.principal, self.route, key),
            tool: self.tool,
            priority: u8::try_from(self.priority).map_err(|_| corrupt("priority"))?,
            state,
            attempts: u32::try_from(self.attempts).map_err(|_| corrupt("attempts"))?,
            max_attempts: u32::try_from(self.max_attempts).map_err(|_| corrupt("max_attempts"))?,
            request: Bytes::from(self.request),
            last,
            age: since(self.deferred_at, now),
            due_in: match state {
                OperationState::Queued => since(now, self.due_at),
                _ => Duration::ZERO,
            },
            expires_in: since(now, self.expires_at),
            took: self.finished_at.map(|end| since(self.deferred_at, end)),
        })
    }
}

/// The operation of the scope `pk` names (principal, route, key), if there is one, at `now`.
pub(super) fn read(
    connection: &Connection,
    pk: [&str; 3],
    now: i64,
) -> Result<Option<Operation>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM ballast_deferred WHERE {PK}");
    let raw = connection
        .prepare_cached(&sql)
        .map_err(unavailable)?
        .query_row(pk, Raw::of)
        .optional()
        .map_err(unavailable)?;
    raw.map(|raw| raw.operation(now)).transpose()
}

/// The primary key of `scope`'s row, as [`read`] and the statements' `?1`..`?3` take it.
pub(super) fn pk(scope: &Scope) -> [&str; 3] {
    [scope.principal(), scope.route(), scope.key().as_str()]
}

/// A stored answer as the row's three `last_*` columns (all `NULL` for none).
pub(super) fn last_columns(last: Option<&StoredResponse>) -> (Option<i64>, Option<Vec<u8>>, Option<&[u8]>) {
    match last {
        Some(response) => (
            Some(i64::from(response.status)),
            Some(encode_headers(&response.headers)),
            Some(&response.body[..]),
        ),
        None => (None, None, None),
    }
}
