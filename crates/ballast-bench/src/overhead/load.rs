//! The load generator: N connections, each a closed loop (send, read the whole answer, send again) for a fixed
//! time after a warm-up, over hyper's client connection (one TCP connection each, no pool). Latencies are kept
//! for percentiles; what came back other than a 2xx is counted as an error.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ballast::clock;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What a load is sent as.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// Where.
    pub(crate) addr: SocketAddr,
    /// The request's path.
    pub(crate) path: String,
    /// Headers every request carries besides the body's type (the key as the caller's SDK sends it, Anthropic's
    /// version).
    pub(crate) headers: Vec<(&'static str, String)>,
    /// Whether each request carries an `Idempotency-Key` of its own (a new operation each time).
    pub(crate) keyed: bool,
    /// Each request a call of a run (`ballast-run-id`), a new run every this many requests on a connection.
    pub(crate) runs_of: Option<u64>,
    /// The JSON body.
    pub(crate) body: Bytes,
    /// What a request's latency is timed to.
    pub(crate) until: Until,
    /// Text a 2xx answer's body must hold to count as answered (an MCP result's `"isError":false`); else an error.
    pub(crate) expect: Option<&'static str>,
}

/// What a request's latency is timed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Until {
    /// The whole answer.
    Whole,
    /// A streamed answer's first content event: the first time its body so far holds this text (the rest is
    /// read too, and counted for throughput, but not timed).
    FirstContent(&'static str),
}

/// What one load measured.
#[derive(Clone, Debug, Default)]
pub(crate) struct Measured {
    /// Requests answered 2xx in the measured time.
    pub(crate) requests: u64,
    /// Requests answered otherwise, or failed.
    pub(crate) errors: u64,
    /// The measured time.
    pub(crate) elapsed: Duration,
    /// Each answered request's latency (sorted).
    pub(crate) latencies: Vec<Duration>,
}

impl Measured {
    /// Requests per second.
    pub(crate) fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    /// The `q` quantile of the latencies (0..=1).
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let index = ((self.latencies.len() - 1) as f64 * q).round() as usize;
        self.latencies[index.min(self.latencies.len() - 1)]
    }
}

/// Sends `target` over `connections` closed loops: `warmup` unmeasured, then `duration` measured.
pub(crate) async fn run(
    target: &Target,
    connections: usize,
    warmup: Duration,
    duration: Duration,
) -> Measured {
    // Keys never repeat across loads: each keyed request is a new operation, never a replay.
    static KEYS: std::sync::LazyLock<Arc<AtomicU64>> =
        std::sync::LazyLock::new(|| Arc::new(AtomicU64::new(0)));
    let counter = Arc::clone(&KEYS);
    let start = clock::now();
    let measure_from = start + warmup;
    let until = measure_from + duration;
    let loops: Vec<_> = (0..connections)
        .map(|_| {
            let (target, counter) = (target.clone(), Arc::clone(&counter));
            tokio::spawn(async move { closed_loop(target, counter, measure_from, until).await })
        })
        .collect();
    let mut measured = Measured {
        elapsed: duration,
        ..Measured::default()
    };
    for result in futures::future::join_all(loops).await {
        let Ok(part) = result else {
            measured.errors += 1;
            continue;
        };
        measured.requests += part.requests;
        measured.errors += part.errors;
        measured.latencies.extend(part.latencies);
    }
    measured.latencies.sort_unstable();
    measured
}

async fn closed_loop(
    target: Target,
    counter: Arc<AtomicU64>,
    measure_from: ballast_core::Instant,
    until: ballast_core::Instant,
) -> Measured {
    // Run ids never repeat across connections and loads: each run is a new one, never a deadline long past.
    static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
    let connection = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
    let mut sent = 0;
    let mut measured = Measured::default();
    let Ok(mut sender) = connect(target.addr).await else {
        measured.errors += 1;
        return measured;
    };
    loop {
        let began = clock::now();
        if began >= until {
            return measured;
        }
        let run = target
            .runs_of
            .map(|calls| format!("run-{connection}-{}", sent / calls.max(1)));
        sent += 1;
        let request = request(&target, counter.fetch_add(1, Ordering::Relaxed), run.as_deref());
        let (ok, ended) = match sender.send_request(request).await {
            Ok(response) if response.status().is_success() => {
                read(response.into_body(), target.until, target.expect).await
            }
            Ok(response) => {
                let _ = response.into_body().collect().await;
                (false, clock::now())
            }
            Err(_) => (false, clock::now()),
        };
        if began >= measure_from && ended <= until {
            if ok {
                measured.requests += 1;
                measured.latencies.push(ended.saturating_duration_since(began));
            } else {
                measured.errors += 1;
            }
        }
        if !ok {
            // A failed connection is replaced; the loop goes on.
            match connect(target.addr).await {
                Ok(fresh) => sender = fresh,
                Err(_) => return measured,
            }
        } else if sender.ready().await.is_err() {
            match connect(target.addr).await {
                Ok(fresh) => sender = fresh,
                Err(_) => return measured,
            }
        }
    }
}

/// Reads `body` to its end: whether it all came (holding `expect`, when given), and when the latency stops (the end,
/// or the first content event).
async fn read(
    mut body: hyper::body::Incoming,
    until: Until,
    expect: Option<&str>,
) -> (bool, ballast_core::Instant) {
    let holds = |seen: &[u8], text: &str| seen.windows(text.len()).any(|w| w == text.as_bytes());
    let mut seen = Vec::new();
    let mut first_content = None;
    loop {
        match body.frame().await {
            None => {
                let ended = first_content.unwrap_or_else(clock::now);
                return (expect.is_none_or(|text| holds(&seen, text)), ended);
            }
            Some(Err(_)) => return (false, clock::now()),
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                let watching = matches!(until, Until::FirstContent(_)) && first_content.is_none();
                if watching || expect.is_some() {
                    seen.extend_from_slice(&data);
                }
                if let (Until::FirstContent(marker), None) = (until, first_content)
                    && holds(&seen, marker)
                {
                    first_content = Some(clock::now());
                }
            }
        }
    }
}

async fn connect(addr: SocketAddr) -> std::io::Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    Ok(sender)
}

/// The `n`-th request of every load, as a call of `run` when given.
fn request(target: &Target, n: u64, run: Option<&str>) -> Request<Full<Bytes>> {
    let mut builder = Request::post(target.path.as_str())
        .header(http::header::HOST, target.addr.to_string())
        .header(http::header::CONTENT_TYPE, "application/json");
    for (name, value) in &target.headers {
        builder = builder.header(*name, value.as_str());
    }
    if target.keyed {
        builder = builder.header("idempotency-key", format!("bench-{}-{n}", std::process::id()));
    }
    if let Some(run) = run {
        builder = builder.header("ballast-run-id", run);
    }
    builder
        .body(Full::new(target.body.clone()))
        .expect("a valid request")
}
