//! `ballast demo`: what Ballast is for, in one command. It starts the chaos upstream (`ballast chaos --preset
//! flaky`) and the gateway of README's quick start in front of it (`examples/quickstart.toml`, its SQLite store in
//! a temporary directory, a key made for the demo), runs a short flash sale — the naive code, the `ballast` crate
//! in process and agents through the gateway, side by side ([`flash_sale_strategies`]) — and then leaves the
//! gateway serving, with what to try it with ([`Demo::instructions`]), until it is stopped ([`Demo::stop`]).
//!
//! The demo's gateway and upstream are children of the demo: started on 127.0.0.1:0, killed if the demo fails,
//! stopped gracefully (gateway first, then the upstream) when it ends. The flash sale's runs start their own
//! upstream and gateway per strategy, as `ballast bench flash-sale` does, so that each meets a fresh upstream.

mod snippets;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use snippets::Snippets;

use crate::child::ChildProcess;
use crate::flash_sale::{Naive, Strategy, ThroughGateway, WithBallast};

/// Agents of the demo's flash sale, by default.
pub const DEFAULT_AGENTS: u32 = 200;
/// The demo's clock, by default: the three runs take about 30 s in all (the naive code's 30 s timeouts and its
/// retries after them make its run the longest).
pub const DEFAULT_TIME_SCALE: f64 = 0.5;
/// The gateway's configuration: README's quick start, its upstream's address replaced by the demo's.
const QUICKSTART: &str = include_str!("../../../../examples/quickstart.toml");
/// The upstream's address in [`QUICKSTART`].
const QUICKSTART_UPSTREAM: &str = "http://127.0.0.1:9000";
/// The environment variable [`QUICKSTART`]'s principal reads its key from.
const KEY_ENV: &str = "BALLAST_KEY_DEV";
/// How long the gateway may take to stop: its drain delay (1 s) and grace (10 s), and a margin.
const GATEWAY_GRACE: Duration = Duration::from_secs(15);
/// How long the upstream may take to stop.
const UPSTREAM_GRACE: Duration = Duration::from_secs(5);
/// How often [`Demo::exited`] looks at the children.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// The strategies of the demo's flash sale: `naive`, `ballast` (in process) and `gateway` (`ballast serve`,
/// started from `binary`, the `ballast` binary).
pub fn flash_sale_strategies(binary: &Path) -> Vec<Box<dyn Strategy>> {
    vec![
        Box::new(Naive),
        Box::new(WithBallast),
        Box::new(ThroughGateway::new(binary.to_owned(), Default::default())),
    ]
}

/// Where the demo draws its flash sale's chart: `ballast-demo-flash-sale.svg` in the system's temporary
/// directory (it stays after the demo, to be opened).
pub fn default_chart_path() -> PathBuf {
    std::env::temp_dir().join("ballast-demo-flash-sale.svg")
}

/// The demo's upstream and gateway, serving.
#[derive(Debug)]
pub struct Demo {
    upstream: ChildProcess,
    gateway: ChildProcess,
    key: String,
    seed: u64,
    /// The gateway's config, store and logs; removed when the demo ends.
    dir: tempfile::TempDir,
}

impl Demo {
    /// Starts the upstream (`ballast chaos --preset flaky --seed SEED`) and the gateway in front of it, both from
    /// `binary`.
    pub async fn start(binary: &Path, seed: u64) -> Result<Demo, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
        let seed_text = seed.to_string();
        let upstream = ChildProcess::start(
            binary,
            &[
                "chaos",
                "--preset",
                "flaky",
                "--seed",
                &seed_text,
                "--listen",
                "127.0.0.1:0",
            ],
            &[],
            dir.path(),
            "chaos",
        )
        .await?;
        let config = QUICKSTART.replace(QUICKSTART_UPSTREAM, &format!("http://{}", upstream.addr()));
        let path = dir.path().join("ballast.toml");
        std::fs::write(&path, config).map_err(|e| format!("cannot write the gateway's config: {e}"))?;
        let key = format!("demo-{}", uuid::Uuid::new_v4().simple());
        let path = path.display().to_string();
        let gateway = ChildProcess::start(
            binary,
            &["serve", "--config", &path, "--listen", "127.0.0.1:0"],
            &[(KEY_ENV, &key)],
            dir.path(),
            "serve",
        )
        .await?;
        Ok(Demo {
            upstream,
            gateway,
            key,
            seed,
            dir,
        })
    }

    /// The gateway's root URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.gateway.addr())
    }

    /// The key callers send (`Authorization: Bearer KEY`).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The upstream's root URL.
    pub fn upstream_url(&self) -> String {
        format!("http://{}", self.upstream.addr())
    }

    /// The children's process ids: the gateway's, the upstream's.
    pub fn process_ids(&self) -> (u32, u32) {
        (self.gateway.id(), self.upstream.id())
    }

    /// The snippets, filled in.
    pub fn snippets(&self) -> Snippets {
        Snippets::new(&self.url(), &self.key)
    }

    /// What to try the gateway with: its URLs, and the snippets (between fences, as they are to be saved).
    pub fn instructions(&self) -> String {
        let (url, key) = (self.url(), &self.key);
        let snippets = self.snippets();
        format!(
            "The gateway of README's quick start (examples/quickstart.toml) is serving, in front of the chaos \
             upstream (`ballast chaos --preset flaky --seed {seed}`: 10 % 503, 2 % hangs). Ctrl-C stops both.\n\n\
             \x20 gateway   {url}   (key {key})\n\
             \x20 metrics   curl -s {url}/metrics -H 'Authorization: Bearer {key}'\n\
             \x20 status    curl -s {url}/status -H 'Authorization: Bearer {key}'\n\
             \x20 upstream  {upstream}   (its ledger of side effects: {upstream}/ledger)\n\
             \x20 model `agent`; tools `lookup_order`, `create_refund`, `process_payment`\n\n\
             A refund with curl (send it twice: the second answer is the first, replayed — `Idempotent-Replayed: \
             true` — and the upstream's ledger counts one refund):\n\n```sh\n{curl}\n```\n\n\
             An agent in Python (`pip install openai`; save as agent.py, run `python agent.py`):\n\n\
             ```python\n{python}\n```\n\n\
             The same agent in TypeScript (`npm install openai`; save as agent.ts, run `npx tsx agent.ts`):\n\n\
             ```typescript\n{typescript}\n```\n\n\
             Each prints the model's last answer: `Done: the refund of order 1234 went through (op ...)`.\n",
            seed = self.seed,
            upstream = self.upstream_url(),
            curl = snippets.curl,
            python = snippets.python,
            typescript = snippets.typescript,
        )
    }

    /// Completes when a child exits on its own (it should not while the demo runs), saying which and how.
    pub async fn exited(&mut self) -> String {
        loop {
            if let Some(status) = self.gateway.exited() {
                return format!("the gateway exited ({status})");
            }
            if let Some(status) = self.upstream.exited() {
                return format!("the chaos upstream exited ({status})");
            }
            tokio::time::sleep(WATCH_EVERY).await;
        }
    }

    /// Stops the gateway (SIGTERM: it drains and stops), then the upstream, each waited for; killed when they
    /// take too long (which is then the error).
    pub async fn stop(self) -> Result<(), String> {
        let Demo {
            upstream,
            gateway,
            dir,
            ..
        } = self;
        let gateway = gateway.stop(GATEWAY_GRACE).await;
        let upstream = upstream.stop(UPSTREAM_GRACE).await;
        drop(dir);
        for (name, stopped) in [("the gateway", gateway), ("the chaos upstream", upstream)] {
            let status = stopped?;
            if !status.success() {
                return Err(format!("{name} stopped with {status}"));
            }
        }
        Ok(())
    }
}
