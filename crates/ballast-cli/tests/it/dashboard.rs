//! `/dashboard` in a real browser: Debian's Chromium, headless, driven by playwright-core
//! (`tests/browser/dashboard.mjs`) while the real gateway serves calls to a chaos upstream that fails. The page
//! must load without a console or page error under its Content-Security-Policy, ask for the admin key when
//! `/status` refuses it, and show — worst first, named at the top — the open breaker, a retry rate that rises and
//! a "failing" chip while the upstream fails (never "All clear"). A screenshot lands in the target directory (`CARGO_TARGET_TMPDIR/dashboard.png`).
//!
//! Needs `/usr/bin/chromium` (scripts/services), node and playwright-core (scripts/sdk-clients): without them the
//! test skips with the reason, unless `BALLAST_REQUIRE_SERVICES=1`, where it fails.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use ballast_testkit::ConfigText;
use serde_json::{Value, json};

use crate::support;
use support::gateway::{Gateway, chaos, client};

/// Where the tests expect Debian's Chromium.
const CHROMIUM: &str = "/usr/bin/chromium";

/// The admin principal's key: `/status` (and so the page's data) needs it.
const KEY: (&str, &str) = ("BALLAST_KEY_OPS", "ops-key-for-the-dashboard-test");

/// How long the page may take to show both the open breaker and the rise (history points come every 5 s; a
/// loaded CI machine renders slowly): the script's `--timeout`, counted from `loaded`.
const BROWSER_PATIENCE: Duration = Duration::from_secs(90);

/// How long the script may take to print `loaded`: more than the sum of its own bounds before it (launching
/// Chromium 30 s, loading the page 15 s, the key's form 10 s, the first card 10 s), so that it fails with its own
/// reason rather than this test with none.
const LOAD_PATIENCE: Duration = Duration::from_secs(75);

/// How long the script may take to exit after its `--timeout`: the screenshot, closing Chromium.
const EXIT_PATIENCE: Duration = Duration::from_secs(30);

/// The script, in a process group of its own; on drop (a panic included) it is stopped with its Chromium.
struct Node(Child);

impl Node {
    /// Sends `signal` to node's process group.
    fn signal_group(&self, signal: &str) {
        let _ = Command::new("kill")
            .args(["-s", signal, "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
    }

    /// Its exit status, waiting at most `patience`.
    fn wait(&mut self, patience: Duration) -> Option<ExitStatus> {
        let mut status = None;
        support::process::within(patience, || {
            status = self.0.try_wait().ok().flatten();
            status.is_some()
        });
        status
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(Some(_))) {
            return;
        }
        // TERM: playwright's handler kills Chromium (a process group of its own) before node exits; KILL for what
        // is left after a bounded wait.
        self.signal_group("TERM");
        if self.wait(Duration::from_secs(5)).is_none() {
            self.signal_group("KILL");
            let _ = self.0.wait();
        }
    }
}

/// Whether Chromium and node are here; `false` with the reason printed when not and the run does not require them.
fn browser_available() -> bool {
    let node = Command::new("node").arg("--version").output();
    let missing = if !Path::new(CHROMIUM).exists() {
        Some(format!("{CHROMIUM} is missing (scripts/services installs it)"))
    } else if !node.is_ok_and(|o| o.status.success()) {
        Some("node is not on PATH".to_owned())
    } else {
        None
    };
    let Some(why) = missing else {
        return support::sdk::installed();
    };
    let required = std::env::var("BALLAST_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "the browser test is required (BALLAST_REQUIRE_SERVICES=1): {why}"
    );
    eprintln!("skipped: {why}");
    false
}

fn config() -> String {
    let failing = "per_try_timeout = \"1s\"\nretry = { max_attempts = 3, base = \"20ms\", cap = \"50ms\" }\n\
                   breaker = { consecutive_failures = 8, consecutive_spread = \"0s\", failure_rate = 0.0, \
                   open_for = \"60s\" }\nthrottle = { enabled = false }";
    ConfigText::new()
        .store("sqlite://{dir}/ballast.db")
        // Sorted by name it would come first: the page must put the failing one before it.
        .tool(
            "catalog",
            "{healthy}/tools/lookup_order",
            "per_try_timeout = \"1s\"",
        )
        .tool("lookup_order", "{chaos}/tools/lookup_order", failing)
        .raw(&format!(
            "[[principals]]\nname = \"ops\"\nkey_env = \"{}\"\nadmin = true\n",
            KEY.0
        ))
        .build()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dashboard_shows_the_open_breaker_first_and_a_rising_retry_rate_while_the_upstream_fails() {
    if !browser_available() {
        return;
    }
    let failing = chaos("[endpoints.lookup_order]\nerrors = { 503 = 1.0 }\n").await;
    let healthy = chaos("").await;
    let gateway = Gateway::start_with(&config(), &[("chaos", &failing), ("healthy", &healthy)], &[KEY]);
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/dashboard.mjs");
    let mut command = Command::new("node");
    command
        .arg(&script)
        .args(["--url", &gateway.url("/dashboard"), "--key", KEY.1])
        .args(["--target", "lookup_order"])
        .args(["--timeout", &BROWSER_PATIENCE.as_secs().to_string()])
        .arg("--screenshot")
        .arg(&screenshot)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut browser = {
        use std::os::unix::process::CommandExt as _;
        Node(command.process_group(0).spawn().expect("node runs"))
    };
    let (lines, printed) = mpsc::channel();
    let stdout = browser.0.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    // The page is up, showing /status, before the upstream's failures begin: the rise happens under its eyes.
    let first = (printed.recv_timeout(LOAD_PATIENCE))
        .unwrap_or_else(|_| panic!("the page did not load within {LOAD_PATIENCE:?}"));
    assert_eq!(first, "loaded", "dashboard.mjs: {first}");

    let stop = Arc::new(AtomicBool::new(false));
    let traffic = tokio::spawn(calls(gateway.url(""), Arc::clone(&stop)));
    let (status, lines, browser) = tokio::task::spawn_blocking(move || {
        let status = browser.wait(BROWSER_PATIENCE + EXIT_PATIENCE);
        // Its last lines: the reader ends at the end of node's stdout, soon after node exits.
        let mut lines = Vec::new();
        while let Ok(line) = printed.recv_timeout(Duration::from_secs(5)) {
            lines.push(line);
        }
        (status, lines, browser)
    })
    .await
    .expect("the browser's waiter");
    stop.store(true, Ordering::SeqCst);
    let sent = traffic.await.expect("the traffic task");
    let status = status.unwrap_or_else(|| {
        drop(browser);
        panic!(
            "dashboard.mjs did not exit within {:?}",
            BROWSER_PATIENCE + EXIT_PATIENCE
        )
    });
    let result: Value = (lines.last())
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or(Value::Null);
    assert!(
        status.success() && result["ok"] == true,
        "dashboard.mjs failed ({status}) after {sent} calls: {result}\ngateway stderr:\n{}",
        gateway.stderr()
    );
    assert!(screenshot.exists(), "{} was written", screenshot.display());
}

/// Calls `lookup_order` (and now and then the healthy `catalog`) every 100 ms until `stop`; how many were sent.
async fn calls(base: String, stop: Arc<AtomicBool>) -> u64 {
    let client = client();
    let authorization = format!("Bearer {}", KEY.1);
    let mut every = tokio::time::interval(Duration::from_millis(100));
    let mut sent = 0;
    while !stop.load(Ordering::SeqCst) {
        every.tick().await;
        let tool = if sent % 5 == 4 { "catalog" } else { "lookup_order" };
        let body = json!({"op": format!("o-dash-{sent}"), "order_id": "A-1001"});
        let url = format!("{base}/v1/tools/{tool}");
        let _ = client
            .post(url)
            .header("authorization", &authorization)
            .json(&body)
            .send()
            .await;
        sent += 1;
    }
    sent
}
