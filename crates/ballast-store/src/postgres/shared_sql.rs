//! The shared state's statements. Each reads the server's clock once (`clock_timestamp()`, through the one-row
//! `c`: `c.at` the timestamp, `c.now` the same instant in µs since 1970 as a double, the unit of a limit's TAT)
//! and treats a row past its `expires_at` as absent.

/// The server's clock, read once for the statement.
macro_rules! clock {
    () => {
        "c AS (SELECT t.at, (extract(epoch FROM t.at) * 1000000)::float8 AS now \
         FROM (SELECT clock_timestamp() AS at) t)"
    };
}

/// Whether the run row `r` found by an upsert is live (else it counts as absent: a fresh run).
macro_rules! live {
    () => {
        "r.expires_at > (SELECT at FROM c)"
    };
}

/// The run's calls after a take: its live count plus `EXCLUDED.calls` (`$3`).
macro_rules! calls_after {
    () => {
        concat!(
            "(CASE WHEN ",
            live!(),
            " THEN r.calls ELSE 0 END + EXCLUDED.calls)"
        )
    };
}

/// A run's allowance for `$calls` calls: `$4` base + floor(`$5` share x calls), as `AllowanceRule::limit`
/// computes it in doubles, capped at 2^53 (as the Redis script is).
macro_rules! allowance {
    ($calls:expr) => {
        concat!(
            "($4::bigint + least(floor($5::float8 * (",
            $calls,
            ")::float8), 9007199254740992)::bigint)"
        )
    };
}

/// Whether a take finds a retry left: the live retries taken below the allowance of the calls after it.
macro_rules! takes {
    () => {
        concat!(
            "(CASE WHEN ",
            live!(),
            " THEN r.taken ELSE 0 END < ",
            allowance!(calls_after!()),
            ")"
        )
    };
}

/// A visit to run (`$1` owner, `$2` id): `$3` the offered deadline in ms from now (null: none), `$4` the ttl in
/// ms. The run keeps the earlier deadline (`LEAST` passes a null by); a run past its `expires_at` starts over.
/// Returns the deadline in ms from now (rounded down; null: none), the calls and the retries taken.
pub(super) const VISIT_RUN: &str = concat!(
    "WITH ",
    clock!(),
    ", v AS (INSERT INTO ballast_runs AS r (owner, id, deadline_at, expires_at) ",
    "SELECT $1, $2, c.at + $3::bigint * interval '1 millisecond', c.at + $4::bigint * interval '1 millisecond' ",
    "FROM c ON CONFLICT (owner, id) DO UPDATE SET ",
    "deadline_at = CASE WHEN ",
    live!(),
    " THEN LEAST(r.deadline_at, EXCLUDED.deadline_at) ELSE EXCLUDED.deadline_at END, ",
    "calls = CASE WHEN ",
    live!(),
    " THEN r.calls ELSE 0 END, ",
    "taken = CASE WHEN ",
    live!(),
    " THEN r.taken ELSE 0 END, ",
    "expires_at = EXCLUDED.expires_at ",
    "RETURNING deadline_at, calls, taken) ",
    "SELECT floor(extract(epoch FROM v.deadline_at - c.at) * 1000)::bigint, v.calls, v.taken FROM v, c"
);

/// A take on run (`$1`, `$2`): adds `$3` calls, then takes a retry if the allowance (`$4` base, `$5` share) has
/// one left; `$6` the ttl in ms. Returns whether it took one, the calls and the retries taken.
pub(super) const TAKE_RUN_RETRY: &str = concat!(
    "WITH ",
    clock!(),
    " INSERT INTO ballast_runs AS r (owner, id, calls, taken, took, expires_at) ",
    "SELECT $1, $2, $3, t.took::int, t.took, c.at + $6::bigint * interval '1 millisecond' FROM c, ",
    "(SELECT 0 < ",
    allowance!("$3::bigint"),
    " AS took) t ",
    "ON CONFLICT (owner, id) DO UPDATE SET ",
    "deadline_at = CASE WHEN ",
    live!(),
    " THEN r.deadline_at END, ",
    "calls = ",
    calls_after!(),
    ", taken = CASE WHEN ",
    live!(),
    " THEN r.taken ELSE 0 END + ",
    takes!(),
    "::int, took = ",
    takes!(),
    ", expires_at = EXCLUDED.expires_at ",
    "RETURNING took, calls, taken"
);

/// Gives back one retry of the live run (`$1`, `$2`), never below 0.
pub(super) const GIVE_BACK_RUN_RETRY: &str = concat!(
    "WITH ",
    clock!(),
    " UPDATE ballast_runs SET taken = taken - 1 FROM c ",
    "WHERE owner = $1 AND id = $2 AND taken > 0 AND expires_at > c.at"
);

/// When a limit's row expires: `LIMIT_KEEP` (`$keep` µs) past its TAT plus tolerance, capped at 1e16 µs (the
/// year 2286) so that a TAT pushed absurdly far still makes a timestamp.
macro_rules! limit_expiry {
    ($tat:expr, $tolerance:expr, $keep:expr) => {
        concat!(
            "to_timestamp(least(",
            $tat,
            " + ",
            $tolerance,
            " + ",
            $keep,
            ", 1e16::float8) / 1000000)"
        )
    };
}

/// Creates the rows of limits that have none (`$1` the keys in lock order, `$2` keep µs), idle (TAT 0), so
/// that [`RESERVE`] finds a row to lock. Keys in one order, so that two of these never wait on each other.
pub(super) const ENSURE_LIMITS: &str = concat!(
    "INSERT INTO ballast_limits (key, tat, expires_at) ",
    "SELECT k, 0, clock_timestamp() + $2::float8 * interval '1 microsecond' FROM unnest($1::text[]) AS k ",
    "ON CONFLICT (key) DO NOTHING"
);

/// Reserves limits together or none: ballast-core's `reserve_all` in one statement, with the same double
/// arithmetic in the same order. `$1` keys, `$2` intervals µs, `$3` tolerances µs, `$4` costs (one per charge),
/// `$5` max wait µs, `$6` keep µs.
///
/// `l` locks the limits' rows (`FOR UPDATE`, in byte order of their keys, so reservations of the same limits
/// never deadlock) and reads their TATs: under READ COMMITTED, a row another reservation changed since this
/// statement's snapshot is waited for and read as that one committed it. `d` decides from those TATs; `u`
/// writes the new TATs if granted — the rows are still locked by this statement, and the `UPDATE` applies to
/// their latest versions (PostgreSQL re-reads a row changed since the snapshot before updating it), so nothing
/// can come between the read and the write. The lock is held for this one statement and its commit.
///
/// A limit without a row cannot be locked (two statements would both see it absent): then `complete` is false,
/// nothing is written, and the caller creates the missing rows ([`ENSURE_LIMITS`]) and asks again. Returns the
/// wait µs, whether granted, whether every limit had a row.
pub(super) const RESERVE: &str = concat!(
    "WITH ",
    clock!(),
    ", a AS (SELECT * FROM unnest($1::text[], $2::float8[], $3::float8[], $4::float8[]) ",
    "AS a(key, interval_us, tolerance_us, cost)), ",
    "l AS MATERIALIZED (SELECT b.key, CASE WHEN b.expires_at > c.at THEN b.tat ELSE 0 END AS tat ",
    "FROM ballast_limits b, c WHERE b.key = ANY($1::text[]) ORDER BY b.key COLLATE \"C\" FOR UPDATE OF b), ",
    "d AS (SELECT coalesce(max(greatest(l.tat - a.tolerance_us - c.now, 0)), 0) AS wait, ",
    "(SELECT count(*) FROM l) = (SELECT count(DISTINCT key) FROM a) AS complete ",
    "FROM a JOIN l USING (key), c), ",
    "g AS (SELECT d.wait, d.complete AND d.wait <= greatest($5::float8, 0) AS granted FROM d), ",
    "n AS (SELECT a.key, a.tolerance_us, ",
    "greatest(l.tat, c.now + g.wait) + greatest(a.cost, 0) * a.interval_us AS tat ",
    "FROM a JOIN l USING (key), c, g WHERE g.granted), ",
    "u AS (UPDATE ballast_limits b SET tat = n.tat, expires_at = ",
    limit_expiry!("n.tat", "n.tolerance_us", "$6::float8"),
    " FROM n WHERE b.key = n.key) ",
    "SELECT g.wait, g.granted, d.complete FROM g, d"
);

/// The TAT of `b` corrected by `$4` delta units of `$2` µs at `c.now`, as `Gcra::correct` computes it.
macro_rules! corrected {
    () => {
        "CASE WHEN $4::float8 < 0 \
         THEN greatest(b.tat + $4::float8 * $2::float8, least(b.tat, c.now)) \
         ELSE b.tat + $4::float8 * $2::float8 END"
    };
}

/// Corrects the live limit `$1` (`$2` interval µs, `$3` tolerance µs) by `$4` units; `$5` keep µs. A limit
/// without a live row is left alone (it was idle at least the keep; a debt is forgiven).
pub(super) const CORRECT: &str = concat!(
    "WITH ",
    clock!(),
    " UPDATE ballast_limits b SET tat = ",
    corrected!(),
    ", expires_at = ",
    limit_expiry!(corrected!(), "$3::float8", "$5::float8"),
    " FROM c WHERE b.key = $1 AND b.expires_at > c.at"
);

/// Instance `$1` is alive for `$2` ms; returns the live instances, this one included (the others as the
/// statement's snapshot has them, this one as it just wrote itself).
pub(super) const HEARTBEAT: &str = concat!(
    "WITH ",
    clock!(),
    ", beat AS (INSERT INTO ballast_instances (id, seen_at, expires_at) ",
    "SELECT $1, c.at, c.at + $2::bigint * interval '1 millisecond' FROM c ",
    "ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at, expires_at = EXCLUDED.expires_at) ",
    "SELECT 1 + count(*) FROM ballast_instances, c WHERE id <> $1 AND expires_at > c.at"
);
