//! `ballast chaos` as a user runs it: the real binary on a free port, a request, Ctrl-C.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(10);

/// A running `ballast` process, watched by a thread that waits for its exit (no polling), and killed on drop if
/// it still runs (a failing test leaves nothing behind).
struct Running {
    pid: u32,
    exit: mpsc::Receiver<Option<i32>>,
    stderr: Option<ChildStderr>,
}

impl Running {
    fn watch(mut child: Child) -> Self {
        let (pid, stderr) = (child.id(), child.stderr.take());
        let (exited, exit) = mpsc::channel();
        std::thread::spawn(move || {
            let code = child.wait().ok().and_then(|status| status.code());
            let _ = exited.send(code);
        });
        Running { pid, exit, stderr }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.exit.try_recv(), Err(mpsc::TryRecvError::Empty)) {
            let _ = Command::new("kill").args(["-9", &self.pid.to_string()]).status();
        }
    }
}

/// Starts `ballast chaos` with `args` on a free port; returns it and the address from its first line.
fn start(args: &[&str]) -> (Running, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ballast"))
        .args(["chaos", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ballast binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let running = Running::watch(child);
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        // Keep reading after the first line is taken: a closed pipe would make the server's next print fail
        // (and the server die mid-test) — a regression test for exactly that flake.
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let first = received
        .recv_timeout(PATIENCE)
        .expect("the address is printed first");
    let addr = first
        .rsplit("http://")
        .next()
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    (running, addr)
}

/// `GET path` over a plain socket; the raw answer.
fn get(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect_timeout(&addr, PATIENCE).expect("connects");
    stream.set_read_timeout(Some(PATIENCE)).expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    answer
}

/// Waits (bounded) for the process to exit; its exit code.
fn wait_for_exit(running: &mut Running) -> Option<i32> {
    running
        .exit
        .recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("ballast did not stop within {PATIENCE:?}"))
}

#[cfg(unix)]
#[test]
fn chaos_serves_on_a_free_port_and_stops_gracefully_on_ctrl_c() {
    let (mut running, addr) = start(&["--preset", "none", "--seed", "7"]);
    let health = get(addr, "/healthz");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains(r#"{"status":"ok"}"#), "{health}");
    let pid = running.pid.to_string();
    let signalled = Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill runs");
    assert!(signalled.success());
    assert_eq!(wait_for_exit(&mut running), Some(0), "a graceful stop exits 0");
}

/// Runs `ballast` with `args` to its exit (bounded); its exit code and stderr.
fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_ballast"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ballast binary starts");
    let mut running = Running::watch(child);
    let code = wait_for_exit(&mut running);
    let mut stderr = String::new();
    if let Some(pipe) = running.stderr.as_mut() {
        pipe.read_to_string(&mut stderr).expect("stderr read");
    }
    (code, stderr)
}

#[test]
fn profile_and_preset_cannot_be_combined() {
    let (code, stderr) = run_to_exit(&["chaos", "--profile", "faults.toml", "--preset", "flaky"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn an_unknown_preset_is_refused_at_start_with_its_name() {
    let (code, stderr) = run_to_exit(&["chaos", "--listen", "127.0.0.1:0", "--preset", "no-such-preset"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no-such-preset"), "{stderr}");
}

#[test]
fn a_bad_profile_file_is_refused_at_start_with_each_field_path() {
    let dir = std::env::temp_dir().join(format!("ballast-chaos-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        "[endpoints.model]\nerrors = { 503 = 0.7, 500 = 0.6 }\nlatency = { p50 = \"80ms\", p99 = \"10ms\" }\n",
    )
    .expect("profile written");
    let (code, stderr) = run_to_exit(&[
        "chaos",
        "--listen",
        "127.0.0.1:0",
        "--profile",
        file.to_str().unwrap(),
    ]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("endpoints.model"), "{stderr}");
    assert!(stderr.contains("rates sum to 1.3"), "{stderr}");
    assert!(stderr.contains("endpoints.model.latency"), "{stderr}");

    let (code, stderr) = run_to_exit(&[
        "chaos",
        "--listen",
        "127.0.0.1:0",
        "--profile",
        "/nonexistent/faults.toml",
    ]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("/nonexistent/faults.toml"), "{stderr}");
}
