//! The accept loop and its connections on real loopback sockets, in paused time.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::*;

/// A fresh connection with `bytes` written on it (a raw client).
async fn send(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream
}

const LIMITS: Limits = TEST_LIMITS;

/// Whether the peer is still connected: nothing to read and no end within `wait` (paused time).
async fn still_open(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1];
    tokio::time::timeout(wait, stream.read(&mut buf)).await.is_err()
}

async fn start(limits: Limits) -> (SocketAddr, Arc<ConnectionStats>, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        // More than loopback's socket buffers hold: a caller that reads none of it blocks the writes.
        .route("/big", axum::routing::get(|| async { vec![b'x'; 32 << 20] }));
    let stats = Arc::new(ConnectionStats::default());
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(serve(listener, router, limits, Arc::clone(&stats), stopped));
    (addr, stats, stop)
}

/// Reads what the peer sends until it closes (bounded by the paused clock's auto-advance).
async fn answer(stream: &mut TcpStream) -> String {
    let mut text = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(600), stream.read_to_end(&mut text)).await;
    String::from_utf8_lossy(&text).into_owned()
}

const GET: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";

#[tokio::test(start_paused = true)]
async fn a_connection_that_sends_nothing_or_half_a_head_is_closed_at_the_header_timeout() {
    let (addr, stats, _stop) = start(LIMITS).await;
    let started = clock::now();
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut half = send(addr, b"GET /healthz HTTP/1.1\r\nhost:").await;
    assert_eq!(answer(&mut silent).await, "", "closed without an answer");
    assert_eq!(answer(&mut half).await, "");
    let waited = clock::now().saturating_duration_since(started);
    assert!(
        waited >= LIMITS.header_timeout && waited < LIMITS.header_timeout * 2,
        "{waited:?}"
    );
    assert_eq!(stats.timed_out.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn a_kept_alive_connection_is_closed_at_the_idle_timeout_not_the_header_timeout() {
    let (addr, _stats, _stop) = start(LIMITS).await;
    let mut stream = send(addr, GET).await;
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let answered = clock::now();
    assert_eq!(answer(&mut stream).await, "", "then closed, idle");
    let idle = clock::now().saturating_duration_since(answered);
    assert!(
        idle >= LIMITS.idle_timeout && idle < LIMITS.idle_timeout + Duration::from_secs(1),
        "{idle:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn at_the_cap_a_new_connection_takes_the_place_of_the_idlest() {
    let (addr, stats, _stop) = start(LIMITS).await;
    let mut idle = Vec::new();
    for _ in 0..LIMITS.max {
        idle.push(TcpStream::connect(addr).await.unwrap());
        tokio::time::advance(Duration::from_millis(10)).await;
    }
    // A well-behaved caller past the cap is served: the oldest idle connection made room, at once — long before
    // its header timeout — and only it.
    let started = clock::now();
    let mut caller = send(addr, GET).await;
    let mut buf = [0u8; 1024];
    let n = caller.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    assert_eq!(answer(&mut idle[0]).await, "", "the idlest was closed");
    assert!(clock::now().saturating_duration_since(started) < Duration::from_secs(1));
    assert!(
        still_open(&mut idle[1], Duration::from_secs(1)).await,
        "the others were not"
    );
    assert_eq!(stats.evicted.load(Ordering::Relaxed), 1);
    assert!(stats.open.load(Ordering::Relaxed) <= LIMITS.max);
}

#[tokio::test(start_paused = true)]
async fn at_the_cap_with_every_connection_busy_a_new_one_is_refused_at_once() {
    let limits = Limits { max: 1, ..LIMITS };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (release, released) = watch::channel(false);
    let router = Router::new().route(
        "/slow",
        axum::routing::get(move || {
            let mut released = released.clone();
            async move {
                let _ = released.wait_for(|r| *r).await;
                "done"
            }
        }),
    );
    let stats = Arc::new(ConnectionStats::default());
    let (_stop, stopped) = watch::channel(false);
    tokio::spawn(serve(listener, router, limits, Arc::clone(&stats), stopped));
    let mut busy = send(addr, b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n").await;
    tokio::time::advance(Duration::from_millis(10)).await;
    let mut refused = send(addr, GET).await;
    let text = answer(&mut refused).await;
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("x-should-retry: true"), "{text}");
    let wait: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("retry-after-ms: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("a retry-after-ms");
    assert!((1000..2000).contains(&wait), "jittered over a second: {wait}");
    let body = text.split("\r\n\r\n").nth(1).unwrap();
    let body: serde_json::Value = serde_json::from_str(body).expect("its length is right");
    assert_eq!(body["code"], "overloaded");
    assert_eq!(stats.refused.load(Ordering::Relaxed), 1);
    release.send_replace(true);
    let mut buf = [0u8; 1024];
    let n = busy.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
}

/// Regression: the gateway's connections kept Nagle's algorithm on, and a stream's events after the first
/// waited for the caller's delayed ACK.
#[tokio::test]
async fn connections_are_served_with_tcp_nodelay() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (accepted, _) = accepted.unwrap();
    without_nagle(&accepted);
    assert!(accepted.nodelay().unwrap());
}

#[tokio::test(start_paused = true)]
async fn stopping_closes_idle_connections_and_lets_requests_in_flight_finish() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = Router::new().route(
        "/slow",
        axum::routing::get(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "done"
        }),
    );
    let stats = Arc::new(ConnectionStats::default());
    let (stop, stopped) = watch::channel(false);
    let server = tokio::spawn(serve(listener, router, LIMITS, Arc::clone(&stats), stopped));
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let mut busy = send(addr, b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n").await;
    tokio::time::advance(Duration::from_millis(10)).await;
    let stopped_at = clock::now();
    stop.send_replace(true);
    assert_eq!(answer(&mut idle).await, "", "closed");
    // A connection that sent nothing gets a moment (a request already on its way is still read), then goes.
    assert!(
        clock::now().saturating_duration_since(stopped_at)
            <= activity::CLOSE_PATIENCE + Duration::from_millis(100),
        "within its patience"
    );
    let text = answer(&mut busy).await;
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("done"),
        "finished, then closed: {text}"
    );
    server.await.unwrap();
    assert_eq!(stats.open.load(Ordering::Relaxed), 0);
}

/// Regression (review): a caller that never read its answer held its connection forever — past every timeout,
/// and out of reach of eviction.
#[tokio::test(start_paused = true)]
async fn a_caller_that_reads_nothing_is_dropped_at_the_send_timeout_and_evictable_before() {
    let (addr, stats, _stop) = start(LIMITS).await;
    let mut unread = send(addr, b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let started = clock::now();
    // Not read at all: the writes block; at the send timeout the connection goes.
    tokio::time::sleep(LIMITS.send_timeout + Duration::from_secs(1)).await;
    let mut buf = vec![0u8; 1 << 16];
    let mut read = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(1), unread.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => read += n,
            Err(_) => panic!(
                "still open after {:?}",
                clock::now().saturating_duration_since(started)
            ),
        }
    }
    assert!(read < 32 << 20, "the answer was not delivered whole");
    assert_eq!(stats.timed_out.load(Ordering::Relaxed), 1);
    // At the cap, a caller not reading for a second makes room for a new one.
    let mut stuck = Vec::new();
    for _ in 0..LIMITS.max {
        stuck.push(send(addr, b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n").await);
    }
    tokio::time::sleep(activity::STUCK + Duration::from_millis(100)).await;
    let mut caller = send(addr, GET).await;
    let mut buf = [0u8; 1024];
    let n = caller.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    assert_eq!(stats.evicted.load(Ordering::Relaxed), 1);
}
