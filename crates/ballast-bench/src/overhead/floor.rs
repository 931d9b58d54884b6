//! The floor: a pass-through proxy that does nothing but be on the path — hyper on both sides, each inbound
//! connection forwarded over one upstream connection of its own, no parsing of headers or bodies, no pool, no
//! policy. What any proxy pays to stand between a client and its upstream; the gateway's cost is read against it.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Serves the floor proxy on `listener`, forwarding every request to `upstream`, until `shutdown` completes.
pub async fn serve_floor(
    listener: TcpListener,
    upstream: SocketAddr,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = &mut shutdown => return Ok(()),
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let Ok(sender) = connect(upstream).await else {
                return;
            };
            let sender = Arc::new(Mutex::new(sender));
            let service = service_fn(move |request: Request<Incoming>| {
                let sender = Arc::clone(&sender);
                async move { Ok::<_, Infallible>(forward(&sender, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One upstream connection.
async fn connect(upstream: SocketAddr) -> std::io::Result<hyper::client::conn::http1::SendRequest<Incoming>> {
    let stream = TcpStream::connect(upstream).await?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    Ok(sender)
}

/// The request sent on as it came (method, path, headers, body streamed), the answer passed back as it came.
async fn forward(
    sender: &Mutex<hyper::client::conn::http1::SendRequest<Incoming>>,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    let mut sender = sender.lock().await;
    if sender.ready().await.is_err() {
        return bad_gateway();
    }
    match sender.send_request(request).await {
        Ok(response) => response.map(http_body_util::BodyExt::boxed),
        Err(_) => bad_gateway(),
    }
}

fn bad_gateway() -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(Bytes::from_static(b"floor: upstream failed"))
            .map_err(|e| match e {})
            .boxed(),
    );
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::overhead::load::{self, Target};

    #[tokio::test]
    async fn the_floor_passes_requests_and_answers_through_untouched() {
        let upstream = ballast_chaos::spawn(ballast_chaos::Profile::default())
            .await
            .expect("chaos");
        let upstream_addr: SocketAddr = upstream
            .url("")
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let floor = tokio::spawn(serve_floor(listener, upstream_addr, async {
            let _ = stopped.await;
        }));
        let target = Target {
            addr,
            path: "/tools/lookup_order".into(),
            headers: Vec::new(),
            keyed: false,
            runs_of: None,
            body: Bytes::from_static(br#"{"order_id": "1234"}"#),
            until: load::Until::Whole,
            expect: None,
        };
        let measured = load::run(&target, 2, Duration::ZERO, Duration::from_millis(100)).await;
        assert!(measured.requests > 0 && measured.errors == 0, "{measured:?}");
        assert!(measured.quantile(0.5) <= measured.quantile(0.99));
        let _ = stop.send(());
        floor.await.unwrap().unwrap();
    }
}
