//! Accepting and serving the daemon's connections, with the bounds `axum::serve` leaves open:
//! a connection must finish each request head within [`HEADER_READ_TIMEOUT`] (slowloris, and
//! idle connections, fresh or kept alive, are closed after it), a request body within its
//! [`BodyDeadline`] (a stalled body is answered 408 and its connection closed), at most [`max_connections`] are
//! open at once (the rest wait in the kernel's backlog), and shutdown drains in-flight requests.
//! On the daemon's own port only connections from processes of the daemon's own user are served
//! ([`Peers::OwnUser`]): another local user's are closed unread, before they can hold a slot.
//! Ambiguous request framing is hyper's to refuse: it answers 400 to every smuggling form the
//! surface campaign sends but two, and those (`Content-Length` with `Transfer-Encoding`) it reads
//! as chunked and closes the connection after its one response, so nothing after it is read.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::Surface;

/// How long a connection may take to send a whole request head, counted from when the daemon
/// starts waiting for it (a new connection, or the end of the previous response on a kept-alive
/// one). Local clients send a head in microseconds; 10 s also bounds an idle keep-alive
/// connection (Node's servers close those after 5 s, and HTTP clients' pools expect it).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Descriptors kept back from the connection cap for the store, the audit log, guests' files,
/// upstream connections and spawned programs.
const RESERVED_DESCRIPTORS: u64 = 512;

/// The most connections served at once: the open-file limit (raised to its hard limit first)
/// less [`RESERVED_DESCRIPTORS`], between 64 and 16,384.
pub fn max_connections() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return 1024 };
    let soft = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() { hard } else { soft };
    soft.saturating_sub(RESERVED_DESCRIPTORS).clamp(64, 16_384) as usize
}

/// Whose connections a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peers {
    /// Processes of the daemon's own user (the kernel says whose the other end is). Loopback
    /// ports are every local user's to connect to: another user's process could otherwise hold
    /// the gateway's keyless slots and the connection cap (SECURITY.md's "another local user").
    OwnUser,
    /// Whoever can reach the listener: a launched agent's own network namespace, where nothing
    /// else lives (its listeners are made there and handed to the daemon).
    Anyone,
}

/// Serves `app` on `listener` until `shutdown` completes, then lets in-flight requests finish
/// (idle connections close at once).
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Surface,
    peers: Peers,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with_head_timeout(listener, app, peers, shutdown, HEADER_READ_TIMEOUT).await
}

/// [`serve`], with `head_timeout` in place of [`HEADER_READ_TIMEOUT`] (the tests shorten it).
pub async fn serve_with_head_timeout(
    listener: tokio::net::TcpListener,
    app: Surface,
    peers: Peers,
    shutdown: impl Future<Output = ()>,
    head_timeout: Duration,
) -> std::io::Result<()> {
    let owners = Arc::new(Owners::default());
    let permits = Arc::new(tokio::sync::Semaphore::new(max_connections()));
    // Connections wait on `drain` and hold a `finished` receiver until they end.
    let drain = Arc::new(Drain::default());
    let (finished, finished_rx) = tokio::sync::watch::channel(());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(head_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut told_exhausted = false;
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors (EMFILE/ENFILE) or a connection reset before accept:
                    // wait a little rather than spin; the backlog keeps the others.
                    if !told_exhausted {
                        log_line!("aileron daemon: accepting a connection failed: {error}");
                        told_exhausted = true;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        told_exhausted = false;
        if let Err(error) = stream.set_nodelay(true) {
            log_line!("aileron: cannot set TCP_NODELAY on a connection: {error}");
        }
        if peers == Peers::OwnUser && !owners.is_own_user(&stream, peer) {
            continue;
        }
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service).with_upgrades();
        let (drained, done) = (Drained::new(drain.clone()), finished_rx.clone());
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            // Errors here are the client's (a reset, a timed-out head, a malformed request).
            tokio::select! {
                _ = connection.as_mut() => {}
                () = drained => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop((permit, done));
        });
    }
    drop(listener);
    drop(finished_rx);
    drain.start();
    finished.closed().await;
    Ok(())
}

/// What the daemon's port has learnt of its peers' owners: the users refused (each logged once)
/// and whether the kernel could not be asked (logged once; connections are then served).
#[derive(Default)]
struct Owners {
    refused: Mutex<std::collections::HashSet<Option<u32>>>,
    unasked: AtomicBool,
}

impl Owners {
    /// Whether the process at the other end of `stream` runs as the daemon's user. One socket
    /// diagnostics query (a few microseconds) a connection, before it is served; a peer that is
    /// gone already is not served either.
    fn is_own_user(&self, stream: &tokio::net::TcpStream, peer: std::net::SocketAddr) -> bool {
        let me = nix::unistd::geteuid().as_raw();
        let owner = stream.local_addr().and_then(|local| crate::platform::process::tcp_peer_uid(local, peer));
        match owner {
            Ok(owner) if owner == Some(me) => true,
            Ok(owner) => {
                if self.refused.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(owner) {
                    let whose = owner.map_or_else(|| "a process that is gone".to_string(), |uid| format!("uid {uid}"));
                    log_line!(
                        "aileron daemon: refused a connection from {whose}: the daemon serves only its own user's \
                         processes (logged once for each)"
                    );
                }
                false
            }
            Err(error) => {
                if !self.unasked.swap(true, Ordering::Relaxed) {
                    log_line!(
                        "aileron daemon: warning: cannot tell which user a connection comes from ({error}); \
                         connections are served without that check"
                    );
                }
                true
            }
        }
    }
}

/// The signal that tells every open connection to drain. A connection's task leaves its waker
/// here once and then checks one flag each time it is polled; a `watch` receiver's `changed()`
/// took a lock shared with the other connections at every poll, several a request (~1,150 of a
/// gateway request's ~69,000 instructions, BENCHMARKS.md, issue 49).
#[derive(Default)]
struct Drain {
    draining: AtomicBool,
    /// The waker of each connection still waiting, by the connection's number.
    waiting: Mutex<HashMap<u64, Waker>>,
    numbers: AtomicU64,
}

impl Drain {
    /// Sets the flag, then wakes every connection that left a waker: one that registers after
    /// the wakers were taken finds the flag set under the same lock.
    fn start(&self) {
        self.draining.store(true, Ordering::Release);
        let waiting = std::mem::take(&mut *self.waiting.lock().expect("drain wakers poisoned"));
        waiting.into_values().for_each(Waker::wake);
    }
}

/// One connection's wait for [`Drain::start`].
struct Drained {
    drain: Arc<Drain>,
    number: u64,
    /// The waker left in `drain`, once one is.
    left: Option<Waker>,
}

impl Drained {
    fn new(drain: Arc<Drain>) -> Drained {
        let number = drain.numbers.fetch_add(1, Ordering::Relaxed);
        Drained { drain, number, left: None }
    }
}

impl Future for Drained {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.drain.draining.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        // A task's waker stays the same while it lives: the common poll ends here.
        if self.left.as_ref().is_some_and(|left| left.will_wake(cx.waker())) {
            return Poll::Pending;
        }
        let this = &mut *self;
        let mut waiting = this.drain.waiting.lock().expect("drain wakers poisoned");
        if this.drain.draining.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        waiting.insert(this.number, cx.waker().clone());
        this.left = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        if self.left.is_some() {
            self.drain.waiting.lock().expect("drain wakers poisoned").remove(&self.number);
        }
    }
}

/// How long a request routed to the API (everything but the gateway) may take to send its whole
/// body, counted from the end of its head. Those bodies are small JSON (axum's 2 MB default cap)
/// and local clients send them with the head; without a deadline a client that declares a
/// `Content-Length` and stops held its connection (and a descriptor) for ever, and some 16,000
/// of them locked the user out of health, approvals and the console.
pub const API_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a gateway request body may go without a byte. Gateway bodies may be large (64 MiB)
/// and stream upstream as they arrive, so a deadline from the head could cut a legitimate upload
/// to a slow upstream short; a body that stops sending is dropped after this much silence.
pub const GATEWAY_BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long, in all, a gateway request body may keep the gateway waiting for its client (time
/// spent waiting on the upstream is not counted). The agents that send them are local and send
/// from memory; without it a body trickling a byte every 20 s never went quiet for long enough,
/// and 64 of them held every gateway slot (and a `daemon stop`) for as long as they liked (the
/// second re-attack of 2026-12-05).
pub const GATEWAY_BODY_WAIT_BUDGET: Duration = Duration::from_secs(60);

/// When a request body must have arrived.
#[derive(Debug, Clone, Copy)]
pub enum BodyDeadline {
    /// The whole body by this instant.
    Total(tokio::time::Instant),
    /// At most `quiet` without a frame, and at most `budget` spent waiting for frames in all.
    Idle { quiet: Duration, budget: Duration },
}

/// A request body that fails (and records that it did in `expired`) when the client does not
/// send it within its [`BodyDeadline`]. The clock runs only while the reader waits for the
/// client: time the reader spends elsewhere (backpressure upstream) is not counted against it.
pub struct DeadlineBody<B = axum::body::Body> {
    inner: B,
    deadline: BodyDeadline,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// When the current wait for the client began ([`BodyDeadline::Idle`]).
    waiting_since: Option<tokio::time::Instant>,
    expired: Arc<AtomicBool>,
    done: bool,
}

impl<B> DeadlineBody<B> {
    /// Wraps the connection's own body type, so the request body is boxed once (by the
    /// `axum::body::Body` the router takes), not once for it and once more around this.
    pub fn new(inner: B, deadline: BodyDeadline, expired: Arc<AtomicBool>) -> DeadlineBody<B> {
        DeadlineBody { inner, deadline, sleep: None, waiting_since: None, expired, done: false }
    }
}

/// The error a [`DeadlineBody`] fails with.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
pub struct BodyTimedOut;

impl<B> axum::body::HttpBody for DeadlineBody<B>
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = bytes::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, axum::BoxError>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let BodyDeadline::Idle { budget, .. } = &mut this.deadline {
                    this.sleep = None;
                    if let Some(since) = this.waiting_since.take() {
                        *budget = budget.saturating_sub(since.elapsed());
                    }
                }
                Poll::Ready(frame.map(|frame| frame.map_err(Into::into)))
            }
            Poll::Pending => {
                let (deadline, waiting_since) = (this.deadline, &mut this.waiting_since);
                let sleep = this.sleep.get_or_insert_with(|| {
                    Box::pin(tokio::time::sleep_until(match deadline {
                        BodyDeadline::Total(at) => at,
                        BodyDeadline::Idle { quiet, budget } => {
                            let now = *waiting_since.insert(tokio::time::Instant::now());
                            now + quiet.min(budget)
                        }
                    }))
                });
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.done = true;
                this.expired.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(BodyTimedOut.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::HttpBody as _;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A body fed by the test: `(body, sender)`.
    fn fed() -> (axum::body::Body, tokio::sync::mpsc::Sender<bytes::Bytes>) {
        let (sender, receiver) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
        let stream = tokio_stream::wrappers::ReceiverStream::new(receiver).map(Ok::<_, std::io::Error>);
        (axum::body::Body::from_stream(stream), sender)
    }

    async fn read_all(body: DeadlineBody) -> Result<usize, axum::BoxError> {
        let mut body = std::pin::pin!(body);
        let mut seen = 0;
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            seen += frame?.into_data().map(|data| data.len()).unwrap_or(0);
        }
        Ok(seen)
    }

    use tokio_stream::StreamExt as _;

    /// The gateway's idle deadline: a body that keeps sending outlives it in total, one that
    /// goes quiet for longer fails and says so.
    #[tokio::test]
    async fn an_idle_deadline_counts_silence_not_total_time() {
        let quiet = Duration::from_millis(300);
        let (inner, sender) = fed();
        let expired = Arc::new(AtomicBool::new(false));
        let reading = tokio::spawn(read_all(DeadlineBody::new(
            inner,
            BodyDeadline::Idle { quiet, budget: Duration::from_secs(3600) },
            expired.clone(),
        )));
        for _ in 0..8 {
            sender.send(bytes::Bytes::from_static(b"0123456789")).await.unwrap();
            tokio::time::sleep(quiet / 3).await;
        }
        drop(sender);
        assert_eq!(reading.await.unwrap().unwrap(), 80, "a body that keeps sending is read whole");
        assert!(!expired.load(Ordering::Relaxed));

        let (inner, sender) = fed();
        let expired = Arc::new(AtomicBool::new(false));
        let reading = tokio::spawn(read_all(DeadlineBody::new(
            inner,
            BodyDeadline::Idle { quiet, budget: Duration::from_secs(3600) },
            expired.clone(),
        )));
        sender.send(bytes::Bytes::from_static(b"0123456789")).await.unwrap();
        let error = tokio::time::timeout(quiet * 4, reading).await.expect("the deadline fires").unwrap().unwrap_err();
        assert!(error.is::<BodyTimedOut>(), "{error}");
        assert!(expired.load(Ordering::Relaxed));
        drop(sender);
    }

    /// The gateway's wait budget: a body trickling in under the idle deadline still fails once
    /// it has kept the reader waiting for the budget in all; time the reader spends away (an
    /// upstream slow to take the bytes) is not counted.
    #[tokio::test]
    async fn an_idle_deadline_has_a_budget_a_trickle_runs_out_of() {
        let (quiet, budget) = (Duration::from_millis(300), Duration::from_millis(600));
        let deadline = BodyDeadline::Idle { quiet, budget };
        let (inner, sender) = fed();
        let expired = Arc::new(AtomicBool::new(false));
        let started = tokio::time::Instant::now();
        let reading = tokio::spawn(read_all(DeadlineBody::new(inner, deadline, expired.clone())));
        let trickle = tokio::spawn(async move {
            while sender.send(bytes::Bytes::from_static(b"x")).await.is_ok() {
                tokio::time::sleep(quiet * 2 / 3).await;
            }
        });
        let error = reading.await.unwrap().unwrap_err();
        assert!(error.is::<BodyTimedOut>(), "{error}");
        assert!(expired.load(Ordering::Relaxed));
        assert!(started.elapsed() >= budget, "{:?}", started.elapsed());
        trickle.abort();

        // Here a byte comes 50 ms after the reader asks and the reader is then away for 400 ms:
        // 300 ms spent waiting in six rounds, well over the budget in all.
        let (inner, sender) = fed();
        let mut body = std::pin::pin!(DeadlineBody::new(inner, deadline, Arc::new(AtomicBool::new(false))));
        let started = tokio::time::Instant::now();
        for _ in 0..6 {
            let send = sender.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                send.send(bytes::Bytes::from_static(b"x")).await.unwrap();
            });
            let frame = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
            assert!(frame.unwrap().is_ok(), "failed after {:?}", started.elapsed());
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        drop(sender);
        assert!(std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await.is_none());
        assert!(started.elapsed() > budget * 4);
    }

    /// A total deadline fails a body that trickles in past it, and leaves a body already complete alone.
    #[tokio::test]
    async fn a_total_deadline_counts_from_the_head() {
        let (inner, sender) = fed();
        let expired = Arc::new(AtomicBool::new(false));
        let at = tokio::time::Instant::now() + Duration::from_millis(300);
        let reading = tokio::spawn(read_all(DeadlineBody::new(inner, BodyDeadline::Total(at), expired.clone())));
        let trickle = tokio::spawn(async move {
            for _ in 0..20 {
                if sender.send(bytes::Bytes::from_static(b"x")).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let error = reading.await.unwrap().unwrap_err();
        assert!(error.is::<BodyTimedOut>(), "{error}");
        assert!(expired.load(Ordering::Relaxed));
        trickle.abort();

        let past = tokio::time::Instant::now() - Duration::from_secs(1);
        let complete = DeadlineBody::new(
            axum::body::Body::from("{}"),
            BodyDeadline::Total(past),
            Arc::new(AtomicBool::new(false)),
        );
        assert_eq!(read_all(complete).await.unwrap(), 2, "a body already here is never failed");
    }
}
