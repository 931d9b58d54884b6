//! What one connection is doing — as its reads, its writes, its requests and its answers tell — and what it
//! should do next ([`next_step`], pure: it takes `now`).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use ballast::clock;
use ballast_core::Instant;
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tower::Service as _;

use super::Limits;

/// How long a connection waits, once told to close gracefully with nothing in flight, for hyper to send its last
/// bytes and close; then it is dropped.
pub(super) const CLOSE_PATIENCE: Duration = Duration::from_secs(1);

/// A connection whose writes made no progress for this long is no better than an idle one when room is needed:
/// its caller is not reading.
pub(super) const STUCK: Duration = Duration::from_secs(1);

/// The connection's state, shared by its socket, its requests' answers, its own task and the accept loop.
pub(super) struct Activity {
    /// Requests whose answer has not been handed to hyper to its end.
    in_flight: AtomicUsize,
    /// When the connection last read a byte, or an answer ended (nanoseconds on the core's timeline).
    last: AtomicU64,
    /// When the head of the next request began (its first byte; a new connection: its accept), or 0 between
    /// requests with nothing read.
    head_since: AtomicU64,
    /// Since when a write has been refused by the socket (the caller not reading), or 0.
    blocked_since: AtomicU64,
    /// Told to close for room.
    evicted: AtomicBool,
    /// Signalled when what the connection waits for changes.
    pub(super) changed: Notify,
}

/// A moment's reading of an [`Activity`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Snapshot {
    pub(super) in_flight: usize,
    pub(super) last: Instant,
    pub(super) head_since: Option<Instant>,
    pub(super) blocked_since: Option<Instant>,
    pub(super) evicted: bool,
}

fn instant(nanos: u64) -> Option<Instant> {
    (nanos != 0).then(|| Instant::from_nanos(nanos))
}

impl Activity {
    pub(super) fn new(now: Instant) -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            last: AtomicU64::new(now.as_nanos()),
            head_since: AtomicU64::new(now.as_nanos()),
            blocked_since: AtomicU64::new(0),
            evicted: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot {
            in_flight: self.in_flight.load(Ordering::Acquire),
            last: Instant::from_nanos(self.last.load(Ordering::Relaxed)),
            head_since: instant(self.head_since.load(Ordering::Acquire)),
            blocked_since: instant(self.blocked_since.load(Ordering::Acquire)),
            evicted: self.evicted.load(Ordering::Acquire),
        }
    }

    /// Tells it to close for room.
    pub(super) fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    /// Bytes arrived.
    fn read(&self) {
        let now = clock::now().as_nanos();
        self.last.store(now, Ordering::Relaxed);
        if self.in_flight.load(Ordering::Acquire) == 0
            && (self.head_since)
                .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            // The next request's head began: the header timeout runs from here.
            self.changed.notify_one();
        }
    }

    /// The socket refused a write (`blocked`), or took one.
    fn wrote(&self, blocked: bool) {
        if blocked {
            let now = clock::now().as_nanos();
            if (self.blocked_since)
                .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.changed.notify_one();
            }
        } else if self.blocked_since.load(Ordering::Relaxed) != 0 {
            self.blocked_since.store(0, Ordering::Release);
        }
    }

    /// A request's head was read: it is in flight until its answer ends.
    fn request(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(0, Ordering::Release);
        InFlight(Arc::clone(self))
    }
}

/// What a connection does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Wait, until this instant at most (then ask again), or for a change.
    Wait(Option<Instant>),
    /// Close when what is in flight is done: hyper stops keeping it alive, and closes it at once when idle.
    CloseGracefully(Why),
    /// Close now: nothing in flight can reach the caller, or nothing is in flight at all.
    Drop(Why),
}

/// Why a connection closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Why {
    HeaderTimeout,
    IdleTimeout,
    SendTimeout,
    /// Evicted for room, or the server stopping, or a graceful close that took too long: counted elsewhere.
    Told,
}

impl Why {
    /// Its `event` label in `ballast_connections_total`, for the timeouts (the rest are counted where decided).
    pub(super) fn timeout_event(self) -> Option<&'static str> {
        match self {
            Why::HeaderTimeout => Some("header_timeout"),
            Why::IdleTimeout => Some("idle_timeout"),
            Why::SendTimeout => Some("send_timeout"),
            Why::Told => None,
        }
    }
}

/// What a connection in state `s` does at `now` (module docs of `connections`): a caller not reading its answers
/// for `send_timeout` is dropped whatever it has in flight; told to close gracefully (`closing_since`), it is
/// dropped `CLOSE_PATIENCE` after that (or after its last answer ended) if hyper has not closed it; with requests in flight it waits (their deadlines
/// bound them), unless the server is stopping (`stopped`: since when); mid-head (or new, silent) it is dropped at
/// the header timeout or when evicted, and `CLOSE_PATIENCE` after the stop (a request already sent is still read
/// and served: hyper's graceful close would drop a connection that has read nothing yet, its request unread in the
/// socket); idle between requests it closes gracefully at the idle timeout, or when evicted or stopping.
pub(super) fn next_step(
    s: &Snapshot,
    limits: &Limits,
    now: Instant,
    stopped: Option<Instant>,
    closing_since: Option<Instant>,
) -> Step {
    let send_deadline = s.blocked_since.map(|blocked| blocked + limits.send_timeout);
    if send_deadline.is_some_and(|at| now >= at) {
        return Step::Drop(Why::SendTimeout);
    }
    if s.evicted && s.blocked_since.is_some() {
        return Step::Drop(Why::Told);
    }
    let earliest = |at: Instant| Some(send_deadline.map_or(at, |send| send.min(at)));
    if let Some(since) = closing_since {
        if s.in_flight > 0 {
            return Step::Wait(send_deadline);
        }
        // From the close, or the end of the last answer when it ended later: hyper still has its bytes to send.
        let patience = since.max(s.last) + CLOSE_PATIENCE;
        return if now >= patience {
            Step::Drop(Why::Told)
        } else {
            Step::Wait(earliest(patience))
        };
    }
    if s.in_flight > 0 {
        return if stopped.is_some() {
            Step::CloseGracefully(Why::Told)
        } else {
            Step::Wait(send_deadline)
        };
    }
    match s.head_since {
        Some(head) => {
            let at = head + limits.header_timeout;
            if s.evicted {
                Step::Drop(Why::Told)
            } else if let Some(stopped) = stopped {
                // A request whose bytes already arrived is read (then it is in flight, and closed gracefully
                // after its answer); one that is not there within `CLOSE_PATIENCE` goes.
                let patience = stopped + CLOSE_PATIENCE;
                if now >= patience {
                    Step::Drop(Why::Told)
                } else {
                    Step::Wait(earliest(patience.min(at)))
                }
            } else if now >= at {
                Step::Drop(Why::HeaderTimeout)
            } else {
                Step::Wait(earliest(at))
            }
        }
        None => {
            let at = s.last + limits.idle_timeout;
            if s.evicted || stopped.is_some() {
                Step::CloseGracefully(Why::Told)
            } else if now >= at {
                Step::CloseGracefully(Why::IdleTimeout)
            } else {
                Step::Wait(earliest(at))
            }
        }
    }
}

/// Whether a connection in state `s` may be closed for room at `now`, and how idle it is (the smaller the key,
/// the better a victim): nothing in flight, idle the longest first; then a caller not reading for [`STUCK`].
pub(super) fn eviction_key(s: &Snapshot, now: Instant) -> Option<(u8, Instant)> {
    if s.evicted {
        return None;
    }
    if s.in_flight == 0 {
        return Some((0, s.last));
    }
    let blocked = s.blocked_since?;
    (now.saturating_duration_since(blocked) >= STUCK).then_some((1, blocked))
}

/// A request in flight; its end (the answer's body dropped by hyper, sent or not) starts the idle time.
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.last.store(clock::now().as_nanos(), Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.changed.notify_one();
        }
    }
}

/// The router, for one connection: each request counted in flight until its answer's body is dropped.
#[derive(Clone)]
pub(super) struct Tracked {
    pub(super) router: Router,
    pub(super) activity: Arc<Activity>,
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: Request<Incoming>) -> Answer {
        let in_flight = self.activity.request();
        // axum's router is always ready and cheap to clone (what `axum::serve` does for every request).
        let mut router = self.router.clone();
        let answer = router.call(request.map(Body::new));
        Box::pin(async move {
            let response = match answer.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok(response.map(|body| TrackedBody {
                inner: body,
                _in_flight: in_flight,
            }))
        })
    }
}

/// An answer's body, holding its request in flight until hyper drops it.
pub(super) struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The connection's socket, telling its [`Activity`] when bytes arrive and when writes are refused.
pub(super) struct Watched {
    pub(super) stream: TcpStream,
    pub(super) activity: Arc<Activity>,
}

impl Watched {
    fn after_write(&self, polled: &Poll<io::Result<usize>>) {
        match polled {
            Poll::Pending => self.activity.wrote(true),
            Poll::Ready(Ok(n)) if *n > 0 => self.activity.wrote(false),
            _ => {}
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.after_write(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.after_write(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = super::super::TEST_LIMITS;

    fn at(secs: u64) -> Instant {
        Instant::from_millis(1_000_000 + secs * 1000)
    }

    fn idle_since(secs: u64) -> Snapshot {
        Snapshot {
            in_flight: 0,
            last: at(secs),
            head_since: None,
            blocked_since: None,
            evicted: false,
        }
    }

    #[test]
    fn a_new_or_half_sent_head_is_dropped_at_the_header_timeout_an_idle_connection_closed_at_the_idle_timeout()
     {
        let head = Snapshot {
            head_since: Some(at(0)),
            ..idle_since(0)
        };
        assert_eq!(
            next_step(&head, &LIMITS, at(5), None, None),
            Step::Wait(Some(at(10)))
        );
        assert_eq!(
            next_step(&head, &LIMITS, at(10), None, None),
            Step::Drop(Why::HeaderTimeout)
        );
        let idle = idle_since(0);
        assert_eq!(
            next_step(&idle, &LIMITS, at(10), None, None),
            Step::Wait(Some(at(75)))
        );
        assert_eq!(
            next_step(&idle, &LIMITS, at(75), None, None),
            Step::CloseGracefully(Why::IdleTimeout)
        );
    }

    #[test]
    fn a_request_in_flight_is_never_cut_but_by_a_caller_not_reading_for_the_send_timeout() {
        let busy = Snapshot {
            in_flight: 1,
            ..idle_since(0)
        };
        assert_eq!(next_step(&busy, &LIMITS, at(1_000), None, None), Step::Wait(None));
        let evicted = Snapshot {
            evicted: true,
            ..busy
        };
        assert_eq!(
            next_step(&evicted, &LIMITS, at(1_000), None, None),
            Step::Wait(None)
        );
        assert_eq!(
            next_step(&busy, &LIMITS, at(1_000), Some(at(999)), None),
            Step::CloseGracefully(Why::Told)
        );
        let not_reading = Snapshot {
            blocked_since: Some(at(100)),
            ..busy
        };
        assert_eq!(
            next_step(&not_reading, &LIMITS, at(130), None, None),
            Step::Wait(Some(at(160)))
        );
        assert_eq!(
            next_step(&not_reading, &LIMITS, at(160), None, None),
            Step::Drop(Why::SendTimeout)
        );
    }

    /// Regression (review): a graceful close whose last bytes could not be sent re-armed a timer already past
    /// and spun a core.
    #[test]
    fn a_graceful_close_that_does_not_end_is_dropped_after_its_patience_never_rearmed_in_the_past() {
        let idle = idle_since(0);
        let closing = Some(at(75));
        assert_eq!(
            next_step(&idle, &LIMITS, at(75), None, closing),
            Step::Wait(Some(at(75) + CLOSE_PATIENCE))
        );
        assert_eq!(
            next_step(&idle, &LIMITS, at(75) + CLOSE_PATIENCE, None, closing),
            Step::Drop(Why::Told)
        );
        // An answer that ended after the close: its bytes get their patience too.
        let answered_late = idle_since(80);
        assert_eq!(
            next_step(&answered_late, &LIMITS, at(80), None, closing),
            Step::Wait(Some(at(80) + CLOSE_PATIENCE))
        );
        for now in [at(75), at(76), at(500)] {
            if let Step::Wait(Some(wake)) = next_step(&idle, &LIMITS, now, None, closing) {
                assert!(wake > now, "a wake-up in the future: {wake:?} at {now:?}");
            }
        }
    }

    #[test]
    fn evicted_or_stopping_a_connection_with_nothing_in_flight_goes() {
        let head = Snapshot {
            head_since: Some(at(0)),
            evicted: true,
            ..idle_since(0)
        };
        assert_eq!(
            next_step(&head, &LIMITS, at(1), None, None),
            Step::Drop(Why::Told)
        );
        let idle = Snapshot {
            evicted: true,
            ..idle_since(0)
        };
        assert_eq!(
            next_step(&idle, &LIMITS, at(1), None, None),
            Step::CloseGracefully(Why::Told)
        );
        // Stopping, a connection mid-head gets its patience: a request already sent is read and served, not dropped.
        let head = Snapshot {
            evicted: false,
            ..head
        };
        assert_eq!(
            next_step(&head, &LIMITS, at(1), Some(at(1)), None),
            Step::Wait(Some(at(1) + CLOSE_PATIENCE))
        );
        assert_eq!(
            next_step(&head, &LIMITS, at(1) + CLOSE_PATIENCE, Some(at(1)), None),
            Step::Drop(Why::Told)
        );
        assert_eq!(
            next_step(&idle_since(0), &LIMITS, at(1), Some(at(1)), None),
            Step::CloseGracefully(Why::Told)
        );
    }

    #[test]
    fn idle_connections_are_evicted_first_oldest_first_then_callers_not_reading() {
        let now = at(100);
        let busy = Snapshot {
            in_flight: 1,
            ..idle_since(0)
        };
        assert_eq!(
            eviction_key(&busy, now),
            None,
            "a request in flight is never a victim"
        );
        let stuck = Snapshot {
            blocked_since: Some(at(50)),
            ..busy
        };
        let briefly = Snapshot {
            blocked_since: Some(now),
            ..busy
        };
        assert_eq!(
            eviction_key(&briefly, now),
            None,
            "a write refused just now is no sign yet"
        );
        let keys = [
            eviction_key(&idle_since(90), now),
            eviction_key(&idle_since(10), now),
            eviction_key(&stuck, now),
        ];
        assert!(keys[1] < keys[0] && keys[0] < keys[2], "{keys:?}");
        let evicted = Snapshot {
            evicted: true,
            ..idle_since(0)
        };
        assert_eq!(eviction_key(&evicted, now), None);
    }
}
