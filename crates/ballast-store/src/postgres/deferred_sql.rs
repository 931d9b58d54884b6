//! The deferred queue's statements. Each is one statement, so one transaction: the operation's row and its
//! record change together or not at all. Each reads the server's clock once (`clock_timestamp()`, through the
//! one-row `c`), and every change of a held operation names the worker's token and `in_progress` in its
//! `WHERE`, so a worker whose lease was taken over changes nothing and gets `NotHeld`.
//!
//! Record writes name the token the operation keeps (`o.owner`, from the row the statement changed) and apply
//! only while the record carries it in `claimed` or `dispatched` and is live: a live request that took the
//! record over keeps what it made, and the row changes either way.

/// The server's clock, read once for the statement.
macro_rules! clock {
    () => {
        "c AS (SELECT clock_timestamp() AS now)"
    };
}

/// The primary key: `$1` principal, `$2` route, `$3` key.
macro_rules! pk {
    () => {
        "principal = $1 AND route = $2 AND key = $3"
    };
}

/// A parameter holding milliseconds, as an interval.
macro_rules! ms {
    ($param:literal) => {
        concat!($param, "::bigint * interval '1 millisecond'")
    };
}

/// The operation `o` as `deferred::operation` reads it, its times as µs from the server's clock `c`: due and
/// expiry rounded up (a time still ahead by a fraction reads as ahead), age and duration down.
macro_rules! operation {
    () => {
        "o.principal, o.route, o.key, o.tool, o.priority, o.state, o.attempts, o.max_attempts, o.request, \
         o.status, o.headers, o.body, \
         floor(extract(epoch FROM c.now - o.deferred_at) * 1000000)::bigint, \
         CASE WHEN o.state = 'queued' THEN ceil(extract(epoch FROM o.due_at - c.now) * 1000000)::bigint \
         ELSE 0 END, \
         ceil(extract(epoch FROM o.expires_at - c.now) * 1000000)::bigint, \
         floor(extract(epoch FROM o.finished_at - o.deferred_at) * 1000000)::bigint"
    };
}

/// The operation's record (`i`), while it carries the token the operation `o` keeps in `claimed` or
/// `dispatched` and is live.
macro_rules! record {
    () => {
        " WHERE i.principal = $1 AND i.route = $2 AND i.key = $3 AND i.owner = o.owner \
         AND i.state IN ('claimed', 'dispatched') AND i.expires_at > c.now"
    };
}

/// The operation of `$1`-`$3`, held by worker `$4`: what every change of a taken operation requires.
macro_rules! held {
    () => {
        concat!(
            " FROM c WHERE ",
            pk!(),
            " AND state = 'in_progress' AND worker = $4 RETURNING owner"
        )
    };
}

/// Queues an operation for the record `$1`-`$3`, which `$4` must hold (`claimed` or `dispatched`, lease run out
/// or not, the record live): the record goes back to `claimed` under the operation's own token `$16`, with its lease at `$13` ttl + `$14` grace ms and
/// its retention (`$15` ms) never ending before that, and the row is written `queued` in place of any row of the
/// key. `$5` tool, `$6` priority, `$7` max attempts, `$8` request, `$9`-`$11` the last answer (status, headers,
/// body: null, none), `$12` due ms (capped at the ttl); the row keeps `$16`. No row comes back when `$4` does not hold the record.
pub(super) const DEFER: &str = concat!(
    "WITH ",
    clock!(),
    ", r AS (UPDATE ballast_idempotency SET state = 'claimed', owner = $16, lease_until = c.now + ",
    ms!("($13::bigint + $14::bigint)"),
    ", expires_at = GREATEST(expires_at, c.now + ",
    ms!("($13::bigint + $14::bigint + $15::bigint)"),
    ") FROM c WHERE ",
    pk!(),
    " AND owner = $4 AND state IN ('claimed', 'dispatched') AND expires_at > c.now RETURNING 1), ",
    "o AS (INSERT INTO ballast_deferred AS d (principal, route, key, tool, priority, state, attempts, ",
    "max_attempts, request, status, headers, body, owner, worker, lease_until, sent, deferred_at, due_at, ",
    "expires_at, finished_at) ",
    "SELECT $1, $2, $3, $5, $6, 'queued', 0, $7, $8, $9, $10, $11, $16, NULL, NULL, false, c.now, ",
    "c.now + ",
    ms!("LEAST($12::bigint, $13::bigint)"),
    ", c.now + ",
    ms!("$13"),
    ", NULL FROM c WHERE EXISTS (SELECT FROM r) ",
    "ON CONFLICT (principal, route, key) DO UPDATE SET tool = EXCLUDED.tool, priority = EXCLUDED.priority, ",
    "state = 'queued', attempts = 0, max_attempts = EXCLUDED.max_attempts, request = EXCLUDED.request, ",
    "status = EXCLUDED.status, headers = EXCLUDED.headers, body = EXCLUDED.body, owner = EXCLUDED.owner, ",
    "worker = NULL, lease_until = NULL, sent = false, deferred_at = EXCLUDED.deferred_at, ",
    "due_at = EXCLUDED.due_at, expires_at = EXCLUDED.expires_at, finished_at = NULL RETURNING d.*) ",
    "SELECT ",
    operation!(),
    " FROM o, c"
);

/// The highest class of a queued operation of the tools `$1` (`t`) where `$cond` holds (`walk.p` the class
/// above): one probe of `ballast_deferred_queued` per tool. Null when there is none.
macro_rules! level {
    ($cond:literal) => {
        concat!(
            "(SELECT max(l.priority) AS p FROM unnest($1::text[]) AS t(tool), LATERAL (",
            "SELECT d.priority FROM ballast_deferred d WHERE d.tool = t.tool AND d.state = 'queued'",
            $cond,
            " ORDER BY d.priority DESC LIMIT 1) l)"
        )
    };
}

/// The first due operation of class `$level.p` among the tools `$1`, locked (`x`): per tool the first due
/// one nobody else has locked (one probe: the index is ordered by class, then due time), then the earliest.
/// Locks one operation per tool that has a due one; those not taken are free again at the statement's commit.
macro_rules! first_due {
    ($level:literal) => {
        concat!(
            " LEFT JOIN LATERAL (SELECT q.* FROM unnest($1::text[]) AS t(tool), c, LATERAL (",
            "SELECT d.principal, d.route, d.key, d.priority, d.due_at, d.deferred_at, false AS interrupted ",
            "FROM ballast_deferred d WHERE d.tool = t.tool AND d.state = 'queued' AND d.priority = ",
            $level,
            ".p AND d.due_at <= c.now ORDER BY d.due_at, d.deferred_at LIMIT 1 FOR UPDATE SKIP LOCKED) q ",
            "ORDER BY q.due_at, q.deferred_at LIMIT 1) x ON true"
        )
    };
}

/// Takes the first operation of the tools `$1` for worker `$2` under a lease of `$3` ms; the operation as
/// `operation!` reads it, and whether it was interrupted. No row: nothing is due.
///
/// `walk` goes down the classes present in the tools' queues, highest first, and stops at the first class with
/// a due operation it could lock (`FOR UPDATE SKIP LOCKED`: one another take is taking is passed over, never
/// waited for or taken twice). So a take reads a few index entries per class, however many operations wait.
/// The plain statement (`WHERE due_at <= now ORDER BY priority DESC, due_at LIMIT 1`) does not: it sorts every
/// due operation of the tools, or, scanning the index in order, reads every entry of each class above the first
/// due one — on a deep queue waiting out a backoff, every entry there is, on each poll of each worker.
/// `lapsed` adds, per tool, the first operation whose worker's lease ran out (locked the same way); `pick`
/// takes the first of all by class, due time, time deferred. Under READ COMMITTED a row another take changed
/// since this statement's snapshot is read as committed when locked, and passed over if it no longer
/// qualifies.
///
/// An operation taken from a worker that had begun its attempt (`sent`) counts that attempt and says so.
pub(super) const TAKE: &str = concat!(
    "WITH RECURSIVE ",
    clock!(),
    ", walk AS (SELECT top.p, x.* FROM ",
    level!(""),
    " top",
    first_due!("top"),
    " WHERE top.p IS NOT NULL UNION ALL SELECT down.p, x.* FROM walk, LATERAL ",
    level!(" AND d.priority < walk.p"),
    " down",
    first_due!("down"),
    " WHERE walk.principal IS NULL AND down.p IS NOT NULL), ",
    "lapsed AS (SELECT q.* FROM unnest($1::text[]) AS t(tool), c, LATERAL (",
    "SELECT d.principal, d.route, d.key, d.priority, d.due_at, d.deferred_at, d.sent AS interrupted ",
    "FROM ballast_deferred d WHERE d.tool = t.tool AND d.state = 'in_progress' AND d.lease_until <= c.now ",
    "ORDER BY d.priority DESC, d.due_at, d.deferred_at LIMIT 1 FOR UPDATE SKIP LOCKED) q), ",
    "pick AS (SELECT * FROM (SELECT principal, route, key, priority, due_at, deferred_at, interrupted ",
    "FROM walk WHERE principal IS NOT NULL UNION ALL SELECT * FROM lapsed) a ",
    "ORDER BY priority DESC, due_at, deferred_at LIMIT 1), ",
    "o AS (UPDATE ballast_deferred d SET state = 'in_progress', worker = $2, lease_until = c.now + ",
    ms!("$3"),
    ", attempts = d.attempts + pick.interrupted::int, sent = false FROM pick, c ",
    "WHERE d.principal = pick.principal AND d.route = pick.route AND d.key = pick.key ",
    "RETURNING d.*, pick.interrupted) ",
    "SELECT ",
    operation!(),
    ", o.interrupted FROM o, c"
);

/// The worker `$4` holding the operation `$1`-`$3` is alive: its lease runs `$5` ms from now.
pub(super) const RENEW: &str = concat!(
    "WITH ",
    clock!(),
    " UPDATE ballast_deferred SET lease_until = c.now + ",
    ms!("$5"),
    held!()
);

/// The worker `$4` is about to send its attempt: `sent`, and the record `claimed` -> `dispatched`.
pub(super) const BEGIN_ATTEMPT: &str = concat!(
    "WITH ",
    clock!(),
    ", o AS (UPDATE ballast_deferred SET sent = true",
    held!(),
    "), r AS (UPDATE ballast_idempotency i SET state = 'dispatched' FROM o, c",
    record!(),
    ") SELECT FROM o"
);

/// The worker `$4` gives the operation back: `queued`, due `$5` ms from now (capped at its ttl), `$6` attempts
/// more; its last answer `$8`-`$10` if `$7`, else kept. The record goes back to `claimed`.
pub(super) const RESCHEDULE: &str = concat!(
    "WITH ",
    clock!(),
    ", o AS (UPDATE ballast_deferred SET state = 'queued', due_at = LEAST(c.now + ",
    ms!("$5"),
    ", expires_at), attempts = attempts + $6::bigint, worker = NULL, lease_until = NULL, sent = false, ",
    "status = CASE WHEN $7::boolean THEN $8::integer ELSE status END, ",
    "headers = CASE WHEN $7::boolean THEN $9::bytea ELSE headers END, ",
    "body = CASE WHEN $7::boolean THEN $10::bytea ELSE body END",
    held!(),
    "), r AS (UPDATE ballast_idempotency i SET state = 'claimed' FROM o, c",
    record!(),
    ") SELECT FROM o"
);

/// The end of the operation held by `$4`: state `$5`, last answer `$6`-`$8` (status, headers, body: null,
/// none), `$9` attempts more; then `$record`, what its record becomes.
macro_rules! finish {
    ($record:expr) => {
        concat!(
            "WITH ",
            clock!(),
            ", o AS (UPDATE ballast_deferred SET state = $5, status = $6, headers = $7, body = $8, ",
            "attempts = attempts + $9::bigint, finished_at = c.now, worker = NULL, lease_until = NULL, ",
            "sent = false",
            held!(),
            "), r AS (",
            $record,
            ") SELECT FROM o"
        )
    };
}

/// Ends the operation and the record replays its answer (`completed`, exactly as `COMPLETE` writes it): `$10`
/// retention ms.
pub(super) const FINISH_REPLAY: &str = finish!(concat!(
    "UPDATE ballast_idempotency i SET state = 'completed', status = $6, headers = $7, body = $8, ",
    "lease_until = c.now, expires_at = c.now + ",
    ms!("$10"),
    " FROM o, c",
    record!()
));

/// Ends the operation and releases its record (nothing acted: a later call with the key runs).
pub(super) const FINISH_RELEASE: &str =
    finish!(concat!("DELETE FROM ballast_idempotency i USING o, c", record!()));

/// Ends the operation `outcome_unknown` and its record with it, the token retired (exactly as
/// `MARK_OUTCOME_UNKNOWN` writes it): `$10` retention ms.
pub(super) const FINISH_UNKNOWN: &str = finish!(concat!(
    "UPDATE ballast_idempotency i SET state = 'outcome_unknown', ",
    "owner = '00000000-0000-0000-0000-000000000000', lease_until = c.now, expires_at = c.now + ",
    ms!("$10"),
    " FROM o, c",
    record!()
));

/// The operation of `$1`-`$3`, finished ones included.
pub(super) const LOOKUP: &str = concat!(
    "WITH ",
    clock!(),
    " SELECT ",
    operation!(),
    " FROM ballast_deferred o, c WHERE ",
    pk!()
);

/// Unfinished operations per tool and class: queued, in progress, the oldest one's age in µs.
pub(super) const DEPTH: &str = concat!(
    "WITH ",
    clock!(),
    " SELECT tool, priority, count(*) FILTER (WHERE state = 'queued'), ",
    "count(*) FILTER (WHERE state = 'in_progress'), ",
    "floor(extract(epoch FROM c.now - min(deferred_at)) * 1000000)::bigint ",
    "FROM ballast_deferred, c WHERE state IN ('queued', 'in_progress') GROUP BY tool, priority, c.now"
);

/// Finished operations whose retention (`$1` ms from their end) passed. `now()` rather than
/// `clock_timestamp()`, as the records' reap: a stable value lets the planner use `ballast_deferred_finished`.
pub(super) const REAP: &str = concat!(
    "DELETE FROM ballast_deferred WHERE finished_at <= now() - ",
    ms!("$1")
);

/// The unfinished operations whose ttl ended at least `$1` ms ago and that no worker holds (`queued`, or
/// `in_progress` with its worker's lease run out), whatever their tool, at most `$3` of them, locked (`a`: one a
/// take or a worker's write holds locked is passed over, never waited for; one a take changed since the
/// statement's snapshot is read as committed when locked, and passed over if it no longer qualifies).
macro_rules! abandoned {
    () => {
        concat!(
            "a AS (SELECT d.principal, d.route, d.key FROM ballast_deferred d, c ",
            "WHERE d.state IN ('queued', 'in_progress') AND d.expires_at <= c.now - ",
            ms!("$1"),
            " AND (d.state = 'queued' OR d.lease_until <= c.now) LIMIT $3 FOR UPDATE OF d SKIP LOCKED)"
        )
    };
}

/// The record of the ended operation `o`, while it carries the operation's token in `claimed` or `dispatched`
/// and is live (`record!` for rows of many keys).
macro_rules! records {
    () => {
        " WHERE i.principal = o.principal AND i.route = o.route AND i.key = o.key AND i.owner = o.owner \
         AND i.state IN ('claimed', 'dispatched') AND i.expires_at > c.now"
    };
}

/// Ends the operations nobody works (`abandoned!`; `DeferredQueue::expire_abandoned`): one an attempt of which
/// had begun (`sent`) ends `outcome_unknown`, the attempt counted, and its record as `FINISH_UNKNOWN` writes it
/// (`$2` retention ms); any other ends `expired` and its record is released, as `FINISH_RELEASE` does. The end
/// is now; the last answer goes, as a worker's `Expired` or `OutcomeUnknown` end leaves none. One row: how many
/// ended.
pub(super) const EXPIRE_ABANDONED: &str = concat!(
    "WITH ",
    clock!(),
    ", ",
    abandoned!(),
    ", o AS (UPDATE ballast_deferred d SET ",
    "state = CASE WHEN d.state = 'in_progress' AND d.sent THEN 'outcome_unknown' ELSE 'expired' END, ",
    "attempts = d.attempts + (d.state = 'in_progress' AND d.sent)::int, finished_at = c.now, worker = NULL, ",
    "lease_until = NULL, sent = false, status = NULL, headers = NULL, body = NULL FROM a, c ",
    "WHERE d.principal = a.principal AND d.route = a.route AND d.key = a.key ",
    "RETURNING d.principal, d.route, d.key, d.owner, d.state), ",
    "released AS (DELETE FROM ballast_idempotency i USING o, c",
    records!(),
    " AND o.state = 'expired'), ",
    "unknown AS (UPDATE ballast_idempotency i SET state = 'outcome_unknown', ",
    "owner = '00000000-0000-0000-0000-000000000000', lease_until = c.now, expires_at = c.now + ",
    ms!("$2"),
    " FROM o, c",
    records!(),
    " AND o.state = 'outcome_unknown') ",
    "SELECT count(*) FROM o"
);
