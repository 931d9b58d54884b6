//! The gateway as a user runs it: the real `ballast serve` on a free loopback port, its config in a temporary
//! directory (its SQLite store beside it), the chaos upstream in this process on a real listener, and bounded
//! polling — real time, short timeouts, never a fixed sleep.

use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use ballast_chaos::{ChaosServer, Profile};
use serde_json::Value;

/// The longest any bounded wait of these tests lasts.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// The chaos upstream with the profile `toml`, served in this process on 127.0.0.1.
pub(crate) async fn chaos(toml: &str) -> ChaosServer {
    let profile = Profile::from_toml_str(toml).expect("a valid chaos profile");
    ballast_chaos::spawn(profile)
        .await
        .expect("the chaos upstream starts")
}

/// A running `ballast serve`.
pub(crate) struct Gateway {
    pub(crate) addr: SocketAddr,
    pid: u32,
    exit: mpsc::Receiver<Option<i32>>,
    /// What it printed on stdout after its first line.
    stdout: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    dir: Arc<tempfile::TempDir>,
    config: PathBuf,
    env: Vec<(String, String)>,
    /// The process may open this many files (soft and hard), when set.
    files: Option<u64>,
}

impl Gateway {
    /// `ballast serve` with `config` (`{chaos}` replaced by the upstream's base URL, `{dir}` by the gateway's
    /// directory) and the environment variables `env`.
    pub(crate) fn start(config: &str, upstream: &ChaosServer, env: &[(&str, &str)]) -> Gateway {
        Gateway::start_with(config, &[("chaos", upstream)], env)
    }

    /// `ballast serve` with `config`, each `{name}` of `upstreams` replaced by that upstream's base URL (`{dir}` by
    /// the gateway's directory), and the environment variables `env`.
    pub(crate) fn start_with(
        config: &str,
        upstreams: &[(&str, &ChaosServer)],
        env: &[(&str, &str)],
    ) -> Gateway {
        let (dir, path, env) = Gateway::written(config, upstreams, env);
        Gateway::spawn(dir, path, env, None)
    }

    /// `config` written in a new directory (`{dir}` and each `{name}` of `upstreams` replaced), with `env`.
    fn written(
        config: &str,
        upstreams: &[(&str, &ChaosServer)],
        env: &[(&str, &str)],
    ) -> (Arc<tempfile::TempDir>, PathBuf, Vec<(String, String)>) {
        let dir = Arc::new(tempfile::tempdir().expect("a temporary directory"));
        let mut text = config.replace("{dir}", &dir.path().display().to_string());
        for (name, upstream) in upstreams {
            text = text.replace(&format!("{{{name}}}"), upstream.url("").trim_end_matches('/'));
        }
        let path = dir.path().join("ballast.toml");
        std::fs::write(&path, text).expect("the config is written");
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        (dir, path, env)
    }

    /// [`Gateway::start`] with the process's file limit (`RLIMIT_NOFILE`, soft and hard) set to `files` before
    /// it starts (util-linux's `prlimit`, which then runs it in its place).
    pub(crate) fn start_with_file_limit(
        config: &str,
        upstream: &ChaosServer,
        env: &[(&str, &str)],
        files: u64,
    ) -> Gateway {
        let (dir, config, env) = Gateway::written(config, &[("chaos", upstream)], env);
        Gateway::spawn(dir, config, env, Some(files))
    }

    /// The same gateway started again, on the same config and store, at a new port (after a kill or a stop).
    pub(crate) fn restart(self) -> Gateway {
        let (dir, config, env, files) = (
            Arc::clone(&self.dir),
            self.config.clone(),
            self.env.clone(),
            self.files,
        );
        drop(self);
        Gateway::spawn(dir, config, env, files)
    }

    fn spawn(
        dir: Arc<tempfile::TempDir>,
        config: PathBuf,
        env: Vec<(String, String)>,
        files: Option<u64>,
    ) -> Gateway {
        let mut command = match files {
            Some(files) => {
                let mut command = Command::new("prlimit");
                command
                    .arg(format!("--nofile={files}:{files}"))
                    .arg("--")
                    .arg(env!("CARGO_BIN_EXE_ballast"));
                command
            }
            None => Command::new(env!("CARGO_BIN_EXE_ballast")),
        };
        let mut child = command
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .args(["--listen", "127.0.0.1:0"])
            .current_dir(dir.path())
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the ballast binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let collected = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut text = String::new();
            let mut reader = BufReader::new(stderr_pipe);
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                *collected.lock().unwrap() = text.clone();
            }
        });
        let (pid, exit) = watch(child);
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            // Keep reading: a closed pipe would make the server's next print fail.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let first = received.recv_timeout(PATIENCE).unwrap_or_else(|_| {
            panic!(
                "ballast serve printed no address; stderr:\n{}",
                stderr.lock().unwrap()
            )
        });
        let addr = first
            .rsplit("http://")
            .next()
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("no address in {first:?}"));
        Gateway {
            addr,
            pid,
            exit,
            stdout: received,
            stderr,
            dir,
            config,
            env,
            files,
        }
    }

    /// `http://addr/path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The next line it printed on stdout that starts with `prefix` (waiting for it, bounded).
    pub(crate) fn printed(&self, prefix: &str) -> String {
        loop {
            let line = self
                .stdout
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|_| panic!("no line starting {prefix:?}"));
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// The gateway's directory (its config and SQLite store).
    pub(crate) fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// What it wrote on stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends `signal` (`-TERM`, `-KILL`).
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} failed");
    }

    /// Waits (bounded) for the process to exit; its exit code (`None` when killed by a signal).
    pub(crate) fn wait_for_exit(&self) -> Option<i32> {
        self.exit
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("ballast serve did not stop within {PATIENCE:?}"))
    }

    /// Kills it with SIGKILL and waits until it is gone.
    pub(crate) fn kill9(&self) {
        self.signal("-KILL");
        let _ = self.wait_for_exit();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if matches!(self.exit.try_recv(), Err(mpsc::TryRecvError::Empty)) {
            // It may have exited since: then kill has nothing to say.
            let _ = Command::new("kill")
                .args(["-9", &self.pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A thread waits for the child's exit (no polling); its pid and the channel the exit code arrives on.
fn watch(mut child: Child) -> (u32, mpsc::Receiver<Option<i32>>) {
    let pid = child.id();
    let (exited, exit) = mpsc::channel();
    std::thread::spawn(move || {
        let code = child.wait().ok().and_then(|status| status.code());
        let _ = exited.send(code);
    });
    (pid, exit)
}

/// A client whose requests give up after [`PATIENCE`].
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(PATIENCE)
        .build()
        .expect("a reqwest client")
}

/// `POST /v1/tools/{tool}` with a JSON `body` and `headers`.
pub(crate) async fn call(
    client: &reqwest::Client,
    gateway: &Gateway,
    tool: &str,
    body: &Value,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = client.post(gateway.url(&format!("/v1/tools/{tool}"))).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("the gateway answers")
}

/// An answer's status, headers and JSON body.
pub(crate) async fn read(response: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("a body");
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, headers, body)
}

/// A header's value as text (`""` when absent).
pub(crate) fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// `GET url` as JSON.
pub(crate) async fn get_json(url: &str) -> Value {
    json_of(client().get(url)).await
}

async fn json_of(request: reqwest::RequestBuilder) -> Value {
    request
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON")
}

/// The executions the chaos ledger recorded for `op`.
pub(crate) async fn executions(upstream: &ChaosServer, op: &str) -> u64 {
    get_json(&upstream.url("/ledger")).await["ops"][op]["executions"]
        .as_u64()
        .unwrap_or(0)
}

/// Polls `check` until it gives `Some`, at most [`PATIENCE`]; panics with `what` otherwise (the test kit's poll).
pub(crate) async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    ballast_testkit::eventually(PATIENCE, what, check).await
}
