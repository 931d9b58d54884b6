//! docs/deploy.md's nginx example, run as written: the block marked ```` ```nginx conf.d/ballast.conf ```` is
//! included in a minimal `nginx.conf` (its pid, logs and temporary files in a temporary prefix), only its
//! `listen` port and its three `server` addresses replaced — two by `ballast serve` gateways on one Redis, the
//! third by a port nothing listens on (an instance that is down). Through nginx: a tool call answers with
//! Ballast's headers and the caller's request id, a side effect sent again and again with one key runs once
//! and is replayed by both gateways, and a streamed answer reaches the caller event by event.
//!
//! The machine's nginx (`BALLAST_TEST_NGINX`, else `nginx` on the `PATH`, else `/usr/sbin/nginx`) and Redis
//! (`BALLAST_TEST_REDIS_URL`): where one is missing the test says so and skips, unless
//! `BALLAST_REQUIRE_SERVICES=1`, where it fails (`scripts/services` installs both). Loopback only, real time,
//! bounded polling.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ballast_testkit::{ConfigText, Samples, deployment, server_sent_events};
use serde_json::json;

use crate::support;
use crate::support::gateway::{Gateway, chaos, client, executions, header, read};

/// The guide whose example this test runs.
const DEPLOY_MD: &str = include_str!("../../../../docs/deploy.md");

/// The info string of the example's fence.
const FENCE: &str = "```nginx conf.d/ballast.conf";

/// The model's streams stall for a second after their third event: time enough to see that the events before the
/// stall reached the caller while the stream was still open.
const STALLING_STREAMS: &str = r#"
[endpoints.model]
stream = { stall = 1.0, stall_after_chunks = 3, stall_for = "1s" }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_nginx_example_as_written_passes_calls_replays_side_effects_once_and_streams() {
    let Some(nginx) = nginx_binary() else { return };
    let Some((redis, _)) =
        support::raw::service("Redis", "BALLAST_TEST_REDIS_URL", "redis://127.0.0.1:6379").await
    else {
        return;
    };
    let upstream = chaos(STALLING_STREAMS).await;
    let config = ConfigText::new()
        .store(&redis)
        .tool(
            "lookup_order",
            "{chaos}/tools/lookup_order",
            "per_try_timeout = \"2s\"",
        )
        .tool(
            "process_payment",
            "{chaos}/tools/process_payment",
            "side_effects = true\nper_try_timeout = \"2s\"",
        )
        .model("agent", &[deployment("{chaos}/v1", "mock")], "")
        .build();
    let gateways = [(); 2].map(|()| Gateway::start(&config, &upstream, &[]));
    let down = free_port();
    let proxy = Nginx::start(&nginx, example(), [gateways[0].addr, gateways[1].addr, down]);
    let url = |path: &str| format!("http://{}{path}", proxy.addr);

    // A tool call, several times so that nginx meets the instance that is down: every one answered by a gateway,
    // with its deadline header and the caller's request id.
    let client = client();
    for i in 0..4 {
        let request_id = format!("deploy-nginx-{i}");
        let answer = client
            .post(url("/v1/tools/lookup_order"))
            .header("ballast-timeout-ms", "5000")
            .header("x-request-id", &request_id)
            .json(&json!({"op": format!("lookup-{i}"), "order_id": "A-1001"}))
            .send()
            .await
            .expect("nginx answers");
        let (status, headers, body) = read(answer).await;
        assert_eq!(status, 200, "{body}");
        let remaining: u64 = header(&headers, "ballast-remaining-ms")
            .parse()
            .expect("Ballast's header");
        assert!(remaining <= 5000, "{remaining}");
        assert_eq!(header(&headers, "x-request-id"), request_id);
    }

    // A side effect sent again with its key until both gateways have answered it: run once, replayed after.
    let key = unique("pay");
    let pay = || {
        client
            .post(url("/v1/tools/process_payment"))
            .header("idempotency-key", &key)
            .json(&json!({"op": key, "amount": 10}))
            .send()
    };
    let (status, headers, first) = read(pay().await.expect("nginx answers")).await;
    assert_eq!(
        (status, header(&headers, "idempotent-replayed")),
        (200, ""),
        "{first}"
    );
    let mut sent = 1;
    while !answered_by_each(&client, &gateways).await {
        assert!(
            sent < 12,
            "nginx sent {sent} calls without reaching both gateways"
        );
        let (status, headers, body) = read(pay().await.expect("nginx answers")).await;
        assert_eq!(
            (status, header(&headers, "idempotent-replayed")),
            (200, "true"),
            "{body}"
        );
        assert_eq!(body, first, "the first answer, replayed");
        sent += 1;
    }
    assert_eq!(executions(&upstream, &key).await, 1, "run once for {sent} calls");

    // A streamed chat completion: server-sent events, the first ones in the caller's hands a second before the end.
    let mut answer = client
        .post(url("/v1/chat/completions"))
        .json(&json!({"model": "agent", "stream": true, "messages": [{"role": "user", "content": "Where is order 7?"}]}))
        .send()
        .await
        .expect("nginx answers");
    assert_eq!(answer.status().as_u16(), 200);
    assert!(header(answer.headers(), "content-type").starts_with("text/event-stream"));
    let mut text = String::new();
    let mut first_event = None;
    while let Some(bytes) = answer.chunk().await.expect("the stream reads") {
        text.push_str(&String::from_utf8_lossy(&bytes));
        if first_event.is_none() && text.contains("data:") {
            first_event = Some(ballast::clock::now());
        }
    }
    let held = ballast::clock::now().saturating_duration_since(first_event.expect("an event"));
    assert!(
        held >= Duration::from_millis(500),
        "the events came all at once, at the end: {held:?}"
    );
    let events = server_sent_events(&text);
    assert_eq!(
        events[0].json()["choices"][0]["delta"]["role"],
        "assistant",
        "{text}"
    );
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
}

/// The example: the one block fenced as [`FENCE`].
fn example() -> &'static str {
    let blocks: Vec<&str> = DEPLOY_MD.split(&format!("\n{FENCE}\n")).skip(1).collect();
    assert_eq!(blocks.len(), 1, "docs/deploy.md has one {FENCE} block");
    let end = blocks[0].find("\n```\n").expect("the block's end");
    &blocks[0][..end + 1]
}

/// Whether each gateway has answered a keyed call (its idempotency layer counted one).
async fn answered_by_each(client: &reqwest::Client, gateways: &[Gateway]) -> bool {
    for gateway in gateways {
        let text = client
            .get(gateway.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if Samples::parse(&text).total("ballast_idempotency_total", &[]) == 0.0 {
            return false;
        }
    }
    true
}

/// A loopback port nothing listens on (now).
fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("its address")
}

/// `what` and a number no other run of this test used: the key's record outlives the test in Redis.
fn unique(what: &str) -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("{what}-{}-{random:x}", std::process::id())
}

/// The nginx to run: `BALLAST_TEST_NGINX`, else `nginx` on the `PATH`, else `/usr/sbin/nginx` (root's `PATH` has
/// it; another user's may not). `None`, with the reason printed, when there is none and the run allows skipping.
fn nginx_binary() -> Option<PathBuf> {
    let candidates = match std::env::var_os("BALLAST_TEST_NGINX") {
        Some(path) => vec![PathBuf::from(path)],
        None => vec![PathBuf::from("nginx"), PathBuf::from("/usr/sbin/nginx")],
    };
    let found = candidates.into_iter().find(|nginx| {
        Command::new(nginx)
            .arg("-v")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    });
    if found.is_none() {
        assert!(
            std::env::var("BALLAST_REQUIRE_SERVICES").as_deref() != Ok("1"),
            "nginx is required (BALLAST_REQUIRE_SERVICES=1) but not installed: run scripts/services"
        );
        eprintln!("skipped: nginx is not installed; run scripts/services or set BALLAST_REQUIRE_SERVICES=1");
    }
    found
}

/// nginx running `example` in a temporary prefix, in a process group of its own (stopped on drop).
struct Nginx {
    addr: SocketAddr,
    child: Child,
    /// Its configuration, logs and temporary files: removed once nginx has stopped.
    _prefix: tempfile::TempDir,
}

impl Nginx {
    /// Checks (`nginx -t`) and starts nginx serving `example` with its listen port on a free loopback port and
    /// its three servers at `servers`; returns once it accepts connections.
    fn start(nginx: &Path, example: &str, servers: [SocketAddr; 3]) -> Nginx {
        let prefix = tempfile::tempdir().expect("a temporary directory");
        let dir = prefix.path();
        // Workers run as `nobody` when nginx starts as root: they must reach the temporary files' directories.
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let addr = free_port();
        let mut conf = replace_once(example, "listen 8080;", &format!("listen {addr};"));
        for (written, server) in ["127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"]
            .iter()
            .zip(servers)
        {
            conf = replace_once(&conf, written, &server.to_string());
        }
        std::fs::write(dir.join("ballast.conf"), conf).unwrap();
        let d = dir.display();
        let main = format!(
            "pid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 256; }}\nhttp {{\n\
             access_log {d}/access.log;\nclient_body_temp_path {d}/body;\nproxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi;\nuwsgi_temp_path {d}/uwsgi;\nscgi_temp_path {d}/scgi;\n\
             include {d}/ballast.conf;\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), main).unwrap();
        let command = |extra: &[&str]| {
            let mut command = Command::new(nginx);
            command
                .arg("-p")
                .arg(dir)
                .arg("-c")
                .arg(dir.join("nginx.conf"))
                .arg("-e")
                .arg(dir.join("error.log"))
                .args(extra);
            command
        };
        let checked = command(&["-t", "-q"]).output().expect("nginx -t runs");
        assert!(
            checked.status.success(),
            "nginx -t: {}",
            support::text(&checked.stderr)
        );
        let child = {
            use std::os::unix::process::CommandExt as _;
            command(&["-g", "daemon off;"])
                .process_group(0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("nginx starts")
        };
        let log = dir.join("error.log");
        let mut nginx = Nginx {
            addr,
            child,
            _prefix: prefix,
        };
        let child = &mut nginx.child;
        let listening = support::process::within(support::gateway::PATIENCE, || {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("nginx exited ({status}): {}", read_log(&log));
            }
            TcpStream::connect(addr).is_ok()
        });
        assert!(listening, "nginx does not listen on {addr}: {}", read_log(&log));
        nginx
    }

    /// Sends `signal` to nginx's process group: its master and its workers.
    fn signal_group(&self, signal: &str) {
        let _ = Command::new("kill")
            .args(["-s", signal, "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // TERM: nginx's fast shutdown; KILL for what is left after a bounded wait.
        self.signal_group("TERM");
        let child = &mut self.child;
        if !support::process::within(Duration::from_secs(5), || matches!(child.try_wait(), Ok(Some(_)))) {
            self.signal_group("KILL");
            let _ = self.child.wait();
        }
    }
}

/// nginx's error log, for a failure's message.
fn read_log(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `text` with `from`, which must occur exactly once, replaced by `to`: the example changed where the test
/// rewrites it is a failure, not a silent no-op.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "the nginx example has {from:?} once:\n{text}"
    );
    text.replacen(from, to, 1)
}
