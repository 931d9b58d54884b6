//! A `ballast` command running in the background of a test (`ballast demo`, a long bench): what it prints, line
//! by line, its children, signals, and its exit — real time, every wait bounded.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// A running `ballast` command, killed on drop.
pub(crate) struct Running {
    pid: u32,
    lines: mpsc::Receiver<String>,
    /// Every line read so far, for failure messages.
    seen: Vec<String>,
    stderr: Arc<Mutex<String>>,
    /// Told when stderr is read to its end.
    stderr_read: mpsc::Receiver<()>,
    exit: mpsc::Receiver<Option<i32>>,
    exited: bool,
}

impl Running {
    /// Starts `ballast args`.
    pub(crate) fn start(args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ballast"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the ballast binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let collected = Arc::clone(&stderr);
        let (read_to_end, stderr_read) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                collected
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            let _ = read_to_end.send(());
        });
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        let pid = child.id();
        let (exited, exit) = mpsc::channel();
        std::thread::spawn(move || {
            let code = child.wait().ok().and_then(|status| status.code());
            let _ = exited.send(code);
        });
        Running {
            pid,
            lines,
            seen: Vec::new(),
            stderr,
            stderr_read,
            exit,
            exited: false,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Every line it prints on stdout until one that `last` accepts (included), waiting at most `patience` for
    /// each.
    pub(crate) fn lines_until(&mut self, patience: Duration, last: impl Fn(&str) -> bool) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = self.lines.recv_timeout(patience).unwrap_or_else(|_| {
                panic!(
                    "no such line within {patience:?}; stdout so far:\n{}\nstderr:\n{}",
                    self.seen.join("\n"),
                    self.stderr()
                )
            });
            self.seen.push(line.clone());
            let done = last(&line);
            lines.push(line);
            if done {
                return lines;
            }
        }
    }

    /// What it wrote on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends `signal` (`-INT`, `-TERM`).
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {} failed", self.pid);
    }

    /// Waits at most `patience` for it to exit; its exit code (`None`: killed by a signal). Its stderr is then read
    /// to its end (within `patience` again: a child of its own may hold the pipe), so [`stderr`](Self::stderr) has
    /// its last words — the exit can be seen before the reader has them.
    pub(crate) fn wait_for_exit(&mut self, patience: Duration) -> Option<i32> {
        let code = self
            .exit
            .recv_timeout(patience)
            .unwrap_or_else(|_| panic!("it did not exit within {patience:?}; stderr:\n{}", self.stderr()));
        self.exited = true;
        let _ = self.stderr_read.recv_timeout(patience);
        code
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.exited {
            let _ = Command::new("kill")
                .args(["-9", &self.pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The processes whose parent is `pid` (from `/proc`), with their command lines.
pub(crate) fn children(pid: u32) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| parent(child) == Some(pid))
        .map(|child| {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (child, text.trim().to_owned())
        })
        .collect()
}

/// Whether process `pid` exists and is not a zombie.
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|end| stat[end + 1..].split_whitespace().next());
    state.is_some_and(|state| state != "Z" && state != "X")
}

/// The parent of process `pid`.
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

pub(crate) use ballast_testkit::within;
