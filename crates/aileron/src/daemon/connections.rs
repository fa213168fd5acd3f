//! Accepting and serving the daemon's connections, with the bounds `axum::serve` leaves open:
//! a connection must finish each request head within [`HEADER_READ_TIMEOUT`] (slowloris, and
//! idle connections, fresh or kept alive, are closed after it), at most [`max_connections`] are
//! open at once (the rest wait in the kernel's backlog), and shutdown drains in-flight requests.
//! Ambiguous request framing is hyper's to refuse: it answers 400 to every smuggling form the
//! surface campaign sends but two, and those (`Content-Length` with `Transfer-Encoding`) it reads
//! as chunked and closes the connection after its one response, so nothing after it is read.

use std::future::Future;
use std::sync::Arc;
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

/// Serves `app` on `listener` until `shutdown` completes, then lets in-flight requests finish
/// (idle connections close at once).
pub async fn serve(listener: tokio::net::TcpListener, app: Surface, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(max_connections()));
    // Connections watch `draining` and hold a `finished` receiver until they end.
    let (draining, _) = tokio::sync::watch::channel(false);
    let (finished, finished_rx) = tokio::sync::watch::channel(());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut told_exhausted = false;
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
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
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let connection = http.serve_connection(hyper_util::rt::TokioIo::new(stream), service).with_upgrades();
        let (mut drain, done) = (draining.subscribe(), finished_rx.clone());
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            // Errors here are the client's (a reset, a timed-out head, a malformed request).
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = async { drain.wait_for(|draining| *draining).await.is_ok() } => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop((permit, done));
        });
    }
    drop(listener);
    drop(finished_rx);
    draining.send_replace(true);
    finished.closed().await;
    Ok(())
}
