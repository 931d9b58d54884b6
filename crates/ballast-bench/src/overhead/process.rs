//! The processes under test: started from the `ballast` binary (pinned to a CPU with `taskset` where there are
//! two or more), their address read from their first line, their CPU time and peak memory read from `/proc`.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a process may take to print its address.
const START: Duration = Duration::from_secs(20);

/// A running process, killed on drop.
#[derive(Debug)]
pub(crate) struct Running {
    child: Child,
    /// The address from its first line.
    pub(crate) addr: SocketAddr,
}

impl Running {
    /// Starts `binary args` (on `cpu` when given), with `env`, and waits for its first line (`... http://ADDR`).
    pub(crate) fn start(
        binary: &Path,
        args: &[&str],
        cpu: Option<usize>,
        env: &[(&str, &str)],
        dir: &Path,
    ) -> Result<Running, String> {
        let mut command = match cpu {
            Some(cpu) => {
                let mut command = Command::new("taskset");
                command.args(["-c", &cpu.to_string()]).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command
            .args(args)
            .current_dir(dir)
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let first = received
            .recv_timeout(START)
            .map_err(|_| format!("{} {} printed no address", binary.display(), args.join(" ")))?;
        let addr = first
            .rsplit("http://")
            .next()
            .and_then(|a| a.trim().parse().ok())
            .ok_or_else(|| format!("no address in {first:?}"))?;
        Ok(Running { child, addr })
    }

    /// Its CPU time so far (user + system), from `/proc/PID/stat`.
    pub(crate) fn cpu_time(&self) -> Option<Duration> {
        cpu_time(self.child.id())
    }

    /// Its peak resident memory in bytes (`VmHWM` of `/proc/PID/status`).
    pub(crate) fn peak_rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// User + system CPU time of process `pid`.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces, inside parentheses): state is the first.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) as f64 / clock_ticks()))
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 when it cannot be asked).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::LazyLock<f64> = std::sync::LazyLock::new(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    });
    *TICKS
}

/// Pins every thread of this process to `cpu` (`taskset -a -p`); whether it worked.
pub(crate) fn pin_self(cpu: usize) -> bool {
    Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            &cpu.to_string(),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
