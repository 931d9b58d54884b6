//! The processes the flash-sale bench and the demo start from the `ballast` binary (`ballast serve`, `ballast
//! chaos`): started on 127.0.0.1:0 (a gateway instance restarted, on the port it had), their address read from the
//! first line they print, and never left behind.
//!
//! Why a guard that kills on drop: a bench that fails half-way (an error, a panic unwinding, a Ctrl-C that the
//! command turns into an early return) must not leave a gateway listening on the machine. Every path out of the
//! code that started a child drops its [`ChildProcess`], and the drop kills the child and waits for it (a killed
//! process is reaped at once, so the wait is short). [`ChildProcess::stop`] is the graceful way (SIGTERM, then a
//! bounded wait, then the kill), [`ChildProcess::kill`] the abrupt one (SIGKILL at once: a gateway instance killed
//! mid-sale). Each child runs in a process group of its own, so a Ctrl-C in the terminal
//! reaches the parent alone, and the parent decides the order its children stop in.
//!
//! What a parent killed with SIGKILL leaves is beyond any guard: nothing of the parent runs then.
//!
//! (The overhead bench has its own, older `overhead::process`, which pins its processes to CPUs and reads their
//! CPU time; the two could share this start-up and guard.)

use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
#[cfg(unix)]
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use tokio::sync::oneshot;

/// How long a child may take to print its address.
const START: Duration = Duration::from_secs(20);
/// How often [`ChildProcess::stop`] looks whether the child has exited.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// A running child process, killed and waited for on drop.
#[derive(Debug)]
pub(crate) struct ChildProcess {
    child: Child,
    /// What it is, in messages: `ballast serve`.
    name: String,
    /// The address from its first line.
    addr: SocketAddr,
    /// Where its stderr goes.
    log: PathBuf,
}

impl ChildProcess {
    /// Starts `binary args` in `dir` with `env` added (and `RUST_LOG` removed, so it logs at its default level),
    /// its stderr to `dir/<log_name>.log`, and waits (at most 20 s) for its first line, which ends with
    /// `http://ADDR`.
    pub(crate) async fn start(
        binary: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        dir: &Path,
        log_name: &str,
    ) -> Result<ChildProcess, String> {
        let name = format!(
            "{} {}",
            binary.file_name().map_or_else(
                || binary.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            ),
            args.first().copied().unwrap_or_default()
        );
        let log = dir.join(format!("{log_name}.log"));
        let stderr = File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let mut command = Command::new(binary);
        command
            .args(args)
            .current_dir(dir)
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (first, first_line) = oneshot::channel();
        // Reads every line, so that the child's later prints never meet a closed pipe.
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            if let Some(line) = lines.next() {
                let _ = first.send(line);
            }
            lines.for_each(drop);
        });
        // From here on, an early return drops the guard: the child is killed.
        let mut started = ChildProcess {
            child,
            name,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        let line = match tokio::time::timeout(START, first_line).await {
            Ok(Ok(line)) => line,
            Ok(Err(_)) => return Err(started.failure("exited before printing its address")),
            Err(_) => return Err(started.failure(&format!("printed no address within {START:?}"))),
        };
        started.addr = line
            .rsplit("http://")
            .next()
            .and_then(|a| a.trim().parse().ok())
            .ok_or_else(|| started.failure(&format!("printed no address: {line:?}")))?;
        Ok(started)
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its process id.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited, and how (without waiting).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Stops it gracefully: SIGTERM, then up to `grace` for it to exit; killed after that. How it exited.
    pub(crate) async fn stop(mut self, grace: Duration) -> Result<ExitStatus, String> {
        if let Some(status) = self.exited() {
            return Ok(status);
        }
        self.terminate();
        let mut waited = Duration::ZERO;
        while waited < grace {
            if let Some(status) = self.exited() {
                return Ok(status);
            }
            tokio::time::sleep(EXIT_POLL).await;
            waited += EXIT_POLL;
        }
        let _ = self.child.kill();
        let status = self.child.wait().map_err(|e| format!("{}: {e}", self.name))?;
        Err(format!(
            "{} did not stop within {grace:?} of SIGTERM and was killed ({status})",
            self.name
        ))
    }

    /// Kills it at once — SIGKILL (elsewhere than Unix, the platform's kill): nothing of it runs after, no
    /// shutdown of its own — and waits for it to be gone. How it exited.
    pub(crate) fn kill(mut self) -> Result<ExitStatus, String> {
        if let Some(status) = self.exited() {
            return Ok(status);
        }
        let _ = self.child.kill();
        self.child.wait().map_err(|e| format!("{}: {e}", self.name))
    }

    /// Asks it to stop: SIGTERM (elsewhere than Unix, a kill). It may have exited since: then there is nothing
    /// to signal, and the caller's wait says how it ended.
    fn terminate(&mut self) {
        #[cfg(unix)]
        {
            use rustix::process::{Pid, Signal, kill_process};
            let _ = kill_process(Pid::from_child(&self.child), Signal::TERM);
        }
        #[cfg(not(unix))]
        {
            let _ = self.child.kill();
        }
    }

    /// A start-up failure: what happened, how it exited (killing it if it has not), and the tail of its log.
    fn failure(&mut self, what: &str) -> String {
        let status = match self.exited() {
            Some(status) => status.to_string(),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                "killed".to_owned()
            }
        };
        format!(
            "{} {what} ({status}); the end of its log ({}):\n{}",
            self.name,
            self.log.display(),
            log_tail(&self.log)
        )
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The last 20 lines of a log file.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
