//! HTTP as bytes on a socket, for what a well-behaved client never sends: its headers or body slowly, or never; and
//! a store server that goes away and comes back. Loopback only; every wait is bounded.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::net::{TcpListener, TcpStream};

/// A connection to `addr`.
pub(crate) async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("the gateway accepts")
}

/// What the peer sends until it closes the connection, or until `patience` has passed: the text, and whether it
/// closed.
pub(crate) async fn read_until_closed(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    patience: Duration,
) -> (String, bool) {
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(patience, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .is_ok();
    (String::from_utf8_lossy(&text).into_owned(), closed)
}

/// The status of a response's text (`HTTP/1.1 413 ...` -> 413), 0 when there is none.
pub(crate) fn status(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A header's value in a response's text (names matched case-insensitively), `""` when absent.
pub(crate) fn header<'a>(response: &'a str, name: &str) -> &'a str {
    let head = response.split("\r\n\r\n").next().unwrap_or_default();
    head.lines()
        .skip(1)
        .find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
        .unwrap_or("")
}

/// A TCP forwarder on 127.0.0.1 to `target` that can be cut — every connection dropped, new ones reset — and
/// restored: a store server that goes away and comes back, without stopping the machine's own.
pub(crate) struct Cuttable {
    pub(crate) addr: SocketAddr,
    up: tokio::sync::watch::Sender<bool>,
}

impl Cuttable {
    /// Forwards to `target` until cut.
    pub(crate) async fn to(target: SocketAddr) -> Cuttable {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        let (up, _) = tokio::sync::watch::channel(true);
        let state = up.subscribe();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !*state.borrow() {
                    drop(inbound);
                    continue;
                }
                let mut state = state.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = state.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Cuttable { addr, up }
    }

    /// Drops every connection and resets new ones.
    pub(crate) fn cut(&self) {
        self.up.send_replace(false);
    }

    /// Forwards again.
    pub(crate) fn restore(&self) {
        self.up.send_replace(true);
    }
}

/// The address of a store server the tests use (`var`, else `default`, a URL), or `None` — skipped with the
/// reason printed — when nothing listens there and the run allows skipping (`BALLAST_REQUIRE_SERVICES=1` fails).
pub(crate) async fn service(what: &str, var: &str, default: &str) -> Option<(String, SocketAddr)> {
    let url = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    let host_port = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.rsplit('@').next())
        .and_then(|rest| rest.split('/').next())
        .expect("a URL with a host and port");
    let addr: SocketAddr = host_port.parse().expect("an IP address and port in the URL");
    match TcpStream::connect(addr).await {
        Ok(_) => Some((url, addr)),
        Err(error) => {
            assert!(
                std::env::var("BALLAST_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "{what} is required (BALLAST_REQUIRE_SERVICES=1) but unreachable at {addr}: {error}"
            );
            eprintln!(
                "skipped: {what} is unreachable at {addr} ({error}); start it or set BALLAST_REQUIRE_SERVICES=1"
            );
            None
        }
    }
}
