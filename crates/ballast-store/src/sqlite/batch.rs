//! One drainer at a time runs the store's operations, in order, several to a transaction (group commit).
//!
//! Why: SQLite has one connection here (the process holds the file), so operations run one after another
//! whatever the callers do. Handing each one to a blocking thread of its own had 32 concurrent requests park
//! 32 threads on the connection's lock — each with its stack and its allocator arena (the gateway's peak memory)
//! and a futex storm for the CPU — and commit 32 transactions, each writing its pages to the WAL again. Now an
//! operation joins a queue; whoever finds no drainer running starts one (`spawn_blocking`, so tokio's paused
//! clock still knows work is in flight), and the drainer takes everything queued, runs it in one transaction,
//! each operation inside a savepoint of its own (one that fails is undone alone), commits once, and only then
//! answers each caller: nothing is acknowledged before it is durable. Alone, an operation is a transaction of
//! its own, as before.
//!
//! If SQLite ends a transaction itself (an I/O error, a full disk), what ran in it is answered with that error
//! and the rest goes on in a new one. An operation that panics is undone and answered as the store's failure.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::file::Identity;
use crate::StoreError;
use crate::clock::unix_millis;

/// At most this many operations share a transaction: a long queue is committed in steps, so the first callers
/// are not kept waiting for the last.
const MAX_BATCH: usize = 64;

/// The connection and the queue of operations waiting for it.
pub(super) struct Shared {
    connection: Mutex<Connection>,
    queue: Mutex<Queue>,
    /// The file the connection opened (none in memory): checked before every transaction.
    file: Option<Identity>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Box<dyn Operation>>,
    /// A drainer is running (or about to): a new operation only joins the queue.
    draining: bool,
}

impl Shared {
    pub(super) fn new(connection: Connection, file: Option<Identity>) -> Arc<Shared> {
        Arc::new(Shared {
            connection: Mutex::new(connection),
            queue: Mutex::default(),
            file,
        })
    }

    /// Runs `work` on the connection at the store's time (its wall clock, Unix milliseconds), inside a
    /// transaction; its result once that transaction is committed.
    pub(super) async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Connection, i64) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = lock(&self.queue);
            queue.waiting.push(Box::new(Op { work, reply }));
            !std::mem::replace(&mut queue.draining, true)
        };
        if start {
            let drainer = Drainer {
                shared: Arc::clone(self),
                done: false,
            };
            tokio::task::spawn_blocking(move || drainer.drain());
        }
        answer.await.map_err(|_| {
            StoreError::unavailable("the SQLite store's operation was lost (its thread stopped or panicked)")
        })?
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The one drainer: runs what is queued until the queue is empty. If it is dropped without running (the runtime
/// shutting down), the next operation starts another, and those queued are answered as failed.
struct Drainer {
    shared: Arc<Shared>,
    done: bool,
}

impl Drainer {
    fn drain(mut self) {
        loop {
            let batch = {
                let mut queue = lock(&self.shared.queue);
                if queue.waiting.is_empty() {
                    queue.draining = false;
                    self.done = true;
                    return;
                }
                let take = queue.waiting.len().min(MAX_BATCH);
                queue.waiting.drain(..take).collect::<Vec<_>>()
            };
            // The file deleted, replaced or made read-only since it was opened: what would be written goes to a
            // file nobody will open again (or against the operator's wish), so nothing runs and nothing is
            // acknowledged until it is back.
            if let Some(Err(why)) = self.shared.file.as_ref().map(Identity::verify) {
                batch.into_iter().for_each(|operation| operation.fail(&why));
                continue;
            }
            let connection = lock(&self.shared.connection);
            run_batch(&connection, batch, self.shared.file.as_ref());
        }
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        if !self.done {
            let mut queue = lock(&self.shared.queue);
            queue.draining = false;
            // Dropped unanswered: their callers hear that the store failed.
            queue.waiting.clear();
        }
    }
}

/// An operation waiting for the connection.
trait Operation: Send {
    /// Runs it; what to answer once its transaction ends.
    fn run(self: Box<Self>, connection: &Connection) -> Box<dyn Ran>;
    /// Answers it without running it.
    fn fail(self: Box<Self>, why: &str);
}

/// An operation that ran, waiting for its transaction to end.
trait Ran: Send {
    /// It succeeded: its writes are kept.
    fn succeeded(&self) -> bool;
    /// Answers its caller: its result if it failed (its writes were undone whatever became of the
    /// transaction) or the transaction committed, else why the transaction did not.
    fn answer(self: Box<Self>, committed: Result<(), &str>);
}

struct Op<F, T> {
    work: F,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<F, T> Operation for Op<F, T>
where
    F: FnOnce(&Connection, i64) -> Result<T, StoreError> + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Box<Self>, connection: &Connection) -> Box<dyn Ran> {
        let Op { work, reply } = *self;
        Box::new(Done {
            result: work(connection, unix_millis()),
            reply,
        })
    }

    fn fail(self: Box<Self>, why: &str) {
        let _ = self.reply.send(Err(StoreError::unavailable(why.to_owned())));
    }
}

struct Done<T> {
    result: Result<T, StoreError>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T: Send + 'static> Ran for Done<T> {
    fn succeeded(&self) -> bool {
        self.result.is_ok()
    }

    fn answer(self: Box<Self>, committed: Result<(), &str>) {
        let answer = match (self.result, committed) {
            (Ok(_), Err(why)) => Err(StoreError::unavailable(why.to_owned())),
            (result, _) => result,
        };
        let _ = self.reply.send(answer);
    }
}

/// Runs `batch` in as few transactions as SQLite allows (one, unless it ends one itself), answering each
/// operation once its transaction has ended — and, on a file, once the file is found to be still the one opened
/// (else what committed went where nobody will look, and is answered as the store's failure).
fn run_batch(connection: &Connection, batch: Vec<Box<dyn Operation>>, file: Option<&Identity>) {
    let alone = batch.len() == 1;
    let mut operations = batch.into_iter().peekable();
    while operations.peek().is_some() {
        if let Err(error) = execute(connection, "BEGIN IMMEDIATE") {
            let why = format!("SQLite could not begin a transaction: {error}");
            operations.for_each(|operation| operation.fail(&why));
            return;
        }
        let mut ran: Vec<Box<dyn Ran>> = Vec::new();
        let mut ended = None;
        for operation in operations.by_ref() {
            let (done, step) = run_one(connection, operation, alone);
            ran.extend(done);
            if let Err(why) = step {
                ended = Some(why);
                break;
            }
        }
        let ended = match ended {
            Some(why) => Err(why),
            None => execute(connection, "COMMIT")
                .map_err(|error| format!("SQLite could not commit: {error}"))
                .and_then(|()| file.map_or(Ok(()), Identity::verify)),
        };
        if ended.is_err() && !connection.is_autocommit() {
            let _ = execute(connection, "ROLLBACK");
        }
        let committed = ended.as_ref().map(|_| ()).map_err(String::as_str);
        for done in ran {
            done.answer(committed);
        }
    }
}

/// Runs one operation inside a savepoint of its own (none when it is alone: then its transaction is its own),
/// undone when it fails or panics. With it, `Err` when the transaction must not commit — SQLite ended it, or the
/// lone operation failed — saying why.
fn run_one(
    connection: &Connection,
    operation: Box<dyn Operation>,
    alone: bool,
) -> (Option<Box<dyn Ran>>, Result<(), String>) {
    if !alone && let Err(error) = execute(connection, "SAVEPOINT operation") {
        let why = format!("SQLite could not start an operation: {error}");
        operation.fail(&why);
        return (None, Err(why));
    }
    // A panic drops the operation's reply unanswered: its caller hears that the store failed.
    let done = std::panic::catch_unwind(AssertUnwindSafe(|| operation.run(connection))).ok();
    if connection.is_autocommit() {
        // SQLite rolled the whole transaction back (an I/O error, a full disk): nothing in it will land.
        return (done, Err("SQLite rolled the transaction back".to_owned()));
    }
    let keep = done.as_ref().is_some_and(|done| done.succeeded());
    let end = match (alone, keep) {
        (true, true) => Ok(()),
        (true, false) => Err("the operation failed".to_owned()),
        (false, true) => execute(connection, "RELEASE operation")
            .map_err(|error| format!("SQLite could not end an operation: {error}")),
        (false, false) => execute(connection, "ROLLBACK TO operation")
            .and_then(|()| execute(connection, "RELEASE operation"))
            .map_err(|error| format!("SQLite could not undo an operation: {error}")),
    };
    (done, end)
}

fn execute(connection: &Connection, sql: &str) -> Result<(), rusqlite::Error> {
    connection.prepare_cached(sql)?.execute([]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection() -> Connection {
        let connection = Connection::open_in_memory().unwrap();
        connection
            .execute_batch("CREATE TABLE t (name TEXT PRIMARY KEY)")
            .unwrap();
        connection
    }

    fn names(connection: &Connection) -> Vec<String> {
        let mut statement = connection.prepare("SELECT name FROM t ORDER BY name").unwrap();
        statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// An operation that inserts `name`, then does `then` (which may fail, panic or end the transaction).
    fn insert(
        name: &'static str,
        then: impl FnOnce(&Connection) -> Result<(), StoreError> + Send + 'static,
    ) -> (Box<dyn Operation>, oneshot::Receiver<Result<(), StoreError>>) {
        let (reply, answer) = oneshot::channel();
        let work = move |connection: &Connection, _now: i64| {
            connection
                .execute("INSERT INTO t (name) VALUES (?1)", [name])
                .map_err(StoreError::unavailable)?;
            then(connection)
        };
        (Box::new(Op { work, reply }), answer)
    }

    fn ok(_: &Connection) -> Result<(), StoreError> {
        Ok(())
    }

    fn answered(answer: oneshot::Receiver<Result<(), StoreError>>) -> Result<(), StoreError> {
        answer
            .blocking_recv()
            .unwrap_or_else(|_| Err(StoreError::Corrupt("unanswered".into())))
    }

    #[test]
    fn operations_of_a_batch_share_its_commit_and_a_failed_one_is_undone_alone() {
        let connection = connection();
        let (a, a_answer) = insert("a", ok);
        let (b, b_answer) = insert("b", |_| Err(StoreError::NotHeld));
        let (c, c_answer) = insert("c", |_| panic!("a bug in an operation"));
        let (d, d_answer) = insert("d", ok);
        run_batch(&connection, vec![a, b, c, d], None);
        assert!(answered(a_answer).is_ok());
        assert!(
            matches!(answered(b_answer), Err(StoreError::NotHeld)),
            "its own error"
        );
        assert!(
            matches!(answered(c_answer), Err(StoreError::Corrupt(_))),
            "a panic goes unanswered"
        );
        assert!(answered(d_answer).is_ok());
        assert_eq!(names(&connection), ["a", "d"]);
        assert!(connection.is_autocommit(), "the transaction ended");
    }

    #[test]
    fn a_lone_operation_is_its_own_transaction() {
        let connection = connection();
        let (a, a_answer) = insert("a", |_| Err(StoreError::NotHeld));
        run_batch(&connection, vec![a], None);
        assert!(matches!(answered(a_answer), Err(StoreError::NotHeld)));
        assert!(names(&connection).is_empty(), "undone");
        let (b, b_answer) = insert("b", ok);
        run_batch(&connection, vec![b], None);
        assert!(answered(b_answer).is_ok());
        assert_eq!(names(&connection), ["b"]);
    }

    #[test]
    fn a_transaction_sqlite_ended_fails_what_ran_in_it_and_the_rest_goes_on() {
        let connection = connection();
        let (a, a_answer) = insert("a", ok);
        // As SQLite does on an I/O error or a full disk: the whole transaction is rolled back under us.
        let (b, b_answer) = insert("b", |connection| {
            connection
                .execute_batch("ROLLBACK")
                .map_err(StoreError::unavailable)
        });
        let (c, c_answer) = insert("c", ok);
        run_batch(&connection, vec![a, b, c], None);
        for answer in [a_answer, b_answer] {
            let error = answered(answer).unwrap_err();
            assert!(
                error.to_string().contains("rolled the transaction back"),
                "{error}"
            );
        }
        assert!(answered(c_answer).is_ok(), "in a transaction of its own");
        assert_eq!(names(&connection), ["c"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_operations_are_all_answered_once_committed() {
        let shared = Shared::new(connection(), None);
        let calls = (0..200).map(|i| {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                shared
                    .run(move |connection, _now| {
                        connection
                            .execute("INSERT INTO t (name) VALUES (?1)", [format!("n{i:03}")])
                            .map(|_| i)
                            .map_err(StoreError::unavailable)
                    })
                    .await
            })
        });
        let answers = answers_of(calls).await;
        assert_eq!(answers, (0..200).collect::<Vec<_>>());
        let count = shared
            .run(|connection, _now| {
                connection
                    .query_row("SELECT COUNT(*) FROM t", [], |row| row.get::<_, i64>(0))
                    .map_err(StoreError::unavailable)
            })
            .await
            .unwrap();
        assert_eq!(count, 200);
        // The last answer goes out once its batch commits, just before the drainer finds the queue empty and
        // stops: bounded polling for that step, on its blocking thread.
        let mut polls = 0;
        while lock(&shared.queue).draining {
            polls += 1;
            assert!(polls < 10_000, "the drainer did not stop when the queue emptied");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    async fn answers_of<T>(
        handles: impl Iterator<Item = tokio::task::JoinHandle<Result<T, StoreError>>>,
    ) -> Vec<T> {
        let mut out = Vec::new();
        for handle in handles {
            out.push(handle.await.unwrap().unwrap());
        }
        out
    }

    #[tokio::test]
    async fn a_drainer_that_never_ran_leaves_the_store_usable() {
        let shared = Shared::new(connection(), None);
        let (stranded, answer) = insert("a", ok);
        {
            let mut queue = lock(&shared.queue);
            queue.waiting.push(stranded);
            queue.draining = true;
        }
        drop(Drainer {
            shared: Arc::clone(&shared),
            done: false,
        });
        assert!(answer.await.is_err(), "answered as failed, not left waiting");
        let later = shared.run(|_, _| Ok(7)).await;
        assert_eq!(later.unwrap(), 7);
    }
}
