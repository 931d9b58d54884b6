//! The `ballast serve` processes of one `gateway` run ([`Fleet`]), and the instance killed mid-sale
//! ([`KillPlan`]).
//!
//! By default one process with its SQLite store in the run's temporary directory, as the bench has always run the
//! gateway. With [`Instances`] of N on a shared store (`--instances N --store URL`), N processes with the same
//! configuration, each on a port of its own, whose `[store]` is that Redis or PostgreSQL: SQLite is one process
//! (a second one on the same file fails at start), so several instances need a store they can share.
//!
//! The kill (`--kill-one-at SECONDS`): that long into the run — before time scaling, scaled as every other
//! duration of the scenario is — instance 0 is killed with SIGKILL: nothing of it runs after, as when a machine or
//! the OOM killer takes it; claims it held stay in the store until their lease runs out, and answers it had not
//! sent are lost. It is restarted at once with the same configuration on the same port (`--listen
//! 127.0.0.1:PORT`, so a load balancer's list of backends stays right) and waited for, within a bound, until it
//! prints its address: it accepts from then on. Meanwhile its callers find the port closed and retry on another
//! instance ([`super::spread`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast::clock;
use ballast_core::Instant;
use tokio::task::JoinHandle;

use super::fleet::Kill;
use crate::child::ChildProcess;

/// How long a restarted instance may take to listen again (each try also waits up to 20 s for its address).
const RESTART: Duration = Duration::from_secs(20);
/// How soon a restart that failed (the port not yet free) is tried again.
const RESTART_POLL: Duration = Duration::from_millis(25);

/// How many `ballast serve` instances a `gateway` run starts, on which store, and whether one is killed mid-sale.
#[derive(Clone, Debug, PartialEq)]
pub struct Instances {
    count: usize,
    store: Option<String>,
    kill_one_at: Option<Duration>,
}

impl Default for Instances {
    /// One instance with its own SQLite store: the gateway as the bench has always run it.
    fn default() -> Self {
        Instances {
            count: 1,
            store: None,
            kill_one_at: None,
        }
    }
}

impl Instances {
    /// `count` instances on the shared `store` (a `redis://` or `postgres://` URL; `None`: each run's one instance
    /// has its own SQLite store), instance 0 killed `kill_one_at` into each run (before time scaling). Refused:
    /// no instance, several without a shared store, a store that is not shared (SQLite is one process), and a
    /// kill with fewer than two instances (its callers would have nowhere to go).
    pub fn new(
        count: usize,
        store: Option<String>,
        kill_one_at: Option<Duration>,
    ) -> Result<Instances, String> {
        if count == 0 {
            return Err("--instances must be at least 1".to_owned());
        }
        match &store {
            Some(url) if store_kind(url).is_none() => {
                return Err(format!(
                    "--store {url:?}: a shared store is a redis://… or postgres://… URL; SQLite is one process (without \
                     --store, each run's gateway has its own SQLite file)"
                ));
            }
            None if count > 1 => {
                return Err(format!(
                    "--instances {count} needs --store redis://… or postgres://…: the instances share one store, and \
                     SQLite is one process"
                ));
            }
            _ => {}
        }
        if kill_one_at.is_some() && count < 2 {
            return Err(
                "--kill-one-at needs --instances 2 or more: the killed instance's callers retry on another"
                    .to_owned(),
            );
        }
        Ok(Instances {
            count,
            store,
            kill_one_at,
        })
    }

    /// How many.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The shared store's URL (`None`: each run's own SQLite).
    pub fn store(&self) -> Option<&str> {
        self.store.as_deref()
    }

    /// When instance 0 is killed in each run, before time scaling.
    pub fn kill_one_at(&self) -> Option<Duration> {
        self.kill_one_at
    }

    /// What a strategy's name says of them: `3 instances`, the store's kind; nothing for the default.
    pub(super) fn describe(&self) -> Vec<String> {
        let mut said = Vec::new();
        if self.count > 1 {
            said.push(format!("{} instances", self.count));
        }
        said.extend(self.store.as_deref().and_then(store_kind).map(str::to_owned));
        said
    }
}

/// `redis` or `postgres` for a shared store's URL (`None`: not one).
pub(crate) fn store_kind(url: &str) -> Option<&'static str> {
    if url.starts_with("redis://") {
        Some("redis")
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Some("postgres")
    } else {
        None
    }
}

/// One run's `ballast serve` processes, killed and waited for when dropped, then their directory removed.
#[derive(Debug)]
pub(super) struct Fleet {
    binary: PathBuf,
    /// The config file's path.
    config: String,
    env: Vec<(String, String)>,
    addrs: Vec<SocketAddr>,
    /// By index; `None` while one is down.
    running: Mutex<Vec<Option<ChildProcess>>>,
    // Dropped after the processes.
    dir: tempfile::TempDir,
}

impl Fleet {
    /// Starts `count` processes of `binary serve` with the config file `config` in `dir`, `env` added, each on a
    /// free port; one is logged to `serve.log` (as ever), several to `serve-N.log`.
    pub(super) async fn start(
        binary: &Path,
        config: String,
        env: Vec<(String, String)>,
        dir: tempfile::TempDir,
        count: usize,
    ) -> Result<Fleet, String> {
        let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let args = ["serve", "--config", &config, "--listen", "127.0.0.1:0"];
        let logs: Vec<String> = match count {
            1 => vec!["serve".to_owned()],
            _ => (0..count).map(|i| format!("serve-{i}")).collect(),
        };
        let started = futures::future::try_join_all(
            logs.iter()
                .map(|log| ChildProcess::start(binary, &args, &vars, dir.path(), log)),
        )
        .await?;
        Ok(Fleet {
            binary: binary.to_owned(),
            addrs: started.iter().map(ChildProcess::addr).collect(),
            running: Mutex::new(started.into_iter().map(Some).collect()),
            config,
            env,
            dir,
        })
    }

    /// Where each listens.
    pub(super) fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Kills instance `index` with SIGKILL and waits for it to be gone.
    fn kill(&self, index: usize) -> Result<(), String> {
        let child = lock(&self.running)[index].take();
        let child = child.ok_or_else(|| format!("instance {index} is not running"))?;
        child.kill().map(drop)
    }

    /// Starts instance `index` again on its port, trying again while the port is not yet free, within 20 s.
    async fn restart(&self, index: usize) -> Result<(), String> {
        let listen = self.addrs[index].to_string();
        let args = ["serve", "--config", &self.config, "--listen", &listen];
        let vars: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let log = format!("serve-{index}-restarted");
        let give_up = clock::now() + RESTART;
        loop {
            match ChildProcess::start(&self.binary, &args, &vars, self.dir.path(), &log).await {
                Ok(child) if child.addr() != self.addrs[index] => {
                    return Err(format!("restarted on {}, not on {listen}", child.addr()));
                }
                Ok(child) => {
                    lock(&self.running)[index] = Some(child);
                    return Ok(());
                }
                Err(error) if clock::now() >= give_up => return Err(error),
                Err(_) => tokio::time::sleep(RESTART_POLL).await,
            }
        }
    }
}

/// The kill of instance 0 at a time into the run, and what came of it.
#[derive(Debug)]
pub(super) struct KillPlan {
    /// From the run's start (scaled).
    at: Duration,
    times: Arc<Mutex<Kill>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl KillPlan {
    /// Instance 0 killed `at` (scaled) into the run.
    pub(super) fn new(at: Duration) -> KillPlan {
        KillPlan {
            at,
            times: Arc::new(Mutex::new(Kill {
                instance: 0,
                at,
                killed_at: None,
                back_at: None,
                failure: None,
            })),
            task: Mutex::new(None),
        }
    }

    /// The run started at `start`: kills instance 0 of `fleet` when it is time, then restarts it.
    pub(super) fn arm(&self, fleet: Arc<Fleet>, start: Instant) {
        let (at, times) = (self.at, Arc::clone(&self.times));
        let since = move || clock::now().saturating_duration_since(start);
        let task = tokio::spawn(async move {
            tokio::time::sleep_until(clock::to_tokio(start + at)).await;
            if let Err(error) = fleet.kill(0) {
                lock(&times).failure = Some(error);
                return;
            }
            lock(&times).killed_at = Some(since());
            match fleet.restart(0).await {
                Ok(()) => lock(&times).back_at = Some(since()),
                Err(error) => lock(&times).failure = Some(error),
            }
        });
        *lock(&self.task) = Some(task);
    }

    /// Once every conversation has ended: a kill under way ends with its restart; one not yet due never happens.
    pub(super) async fn settle(&self) {
        let Some(task) = lock(&self.task).take() else {
            return;
        };
        if lock(&self.times).killed_at.is_none() {
            task.abort();
        }
        // Aborted or done, the task is gone once awaited: nothing it holds outlives the run.
        let _ = task.await;
    }

    /// What came of it so far.
    pub(super) fn report(&self) -> Kill {
        lock(&self.times).clone()
    }
}

impl Drop for KillPlan {
    fn drop(&mut self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_instances_need_a_shared_store_and_a_kill_needs_two() {
        let redis = Some("redis://127.0.0.1:6379".to_owned());
        let ok = Instances::new(3, redis.clone(), Some(Duration::from_secs(5))).expect("valid");
        assert_eq!(ok.describe(), ["3 instances", "redis"]);
        assert_eq!(
            Instances::new(1, redis.clone(), None).unwrap().describe(),
            ["redis"]
        );
        let postgres = Some("postgresql://postgres@127.0.0.1/db".to_owned());
        assert_eq!(
            Instances::new(2, postgres, None).unwrap().describe(),
            ["2 instances", "postgres"]
        );
        assert!(Instances::default().describe().is_empty());
        let error = Instances::new(2, None, None).unwrap_err();
        assert!(
            error.contains("needs --store") && error.contains("SQLite is one process"),
            "{error}"
        );
        let sqlite = Instances::new(2, Some("sqlite://x.db".into()), None).unwrap_err();
        assert!(sqlite.contains("SQLite is one process"), "{sqlite}");
        let kill = Instances::new(1, redis, Some(Duration::from_secs(1))).unwrap_err();
        assert!(kill.contains("--instances 2 or more"), "{kill}");
        assert!(Instances::new(0, None, None).is_err());
    }
}
