//! The admin API's HTTP/1 server, with connections bounded in time and
//! number so that a flood of slow or idle clients can neither keep
//! `/healthz` and `/metrics` from answering nor hold memory:
//!
//! - a request's headers must arrive within [`Limits::header_read_timeout`],
//!   and a kept-alive connection idle that long is closed (hyper's
//!   header-read timer runs from the end of one response to the next
//!   request's headers);
//! - at most [`Limits::max_connections`] are open: a connection beyond that
//!   closes the oldest one that is not handling a request (a slow or idle
//!   client), so a new client is always served; only when every open one is
//!   handling a request is the new one closed at once.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tower::ServiceExt;

use crate::metrics;

/// How the server bounds its connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Longest wait for a request's headers, and longest idle time of a
    /// kept-alive connection.
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    /// 256 connections, 5 s for headers.
    fn default() -> Limits {
        Limits {
            max_connections: 256,
            header_read_timeout: Duration::from_secs(5),
        }
    }
}

/// An open connection, as the accept loop sees it.
struct Conn {
    /// Requests being handled.
    busy: Arc<AtomicUsize>,
    /// Closes the connection.
    evict: Arc<Notify>,
}

/// Open connections by age (ids increase).
#[derive(Default)]
struct Conns {
    next: u64,
    open: BTreeMap<u64, Conn>,
}

type Shared = Arc<Mutex<Conns>>;

fn lock(conns: &Shared) -> std::sync::MutexGuard<'_, Conns> {
    conns.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves `router` on `listener` within `limits` until `shutdown`
/// completes; then every connection is closed (admin requests are cheap to
/// retry).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let conns: Shared = Arc::default();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: let connections
                    // close before accepting again.
                    tracing::warn!(error = %e, "admin API: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some((id, busy, evict)) = admit(&conns, limits.max_connections) else {
            metrics::AdminConnectionClosed { why: "refused" }.emit();
            drop(stream);
            continue;
        };
        let router = router.clone();
        let conns = Arc::clone(&conns);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let guard = Busy::new(&busy);
                let response = router.clone().oneshot(request);
                async move {
                    let response = response.await;
                    drop(guard);
                    response
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = evict.notified() => {}
            }
            let mut conns = lock(&conns);
            conns.open.remove(&id);
            metrics::admin_connections(conns.open.len());
        });
    }
    let conns = lock(&conns);
    for conn in conns.open.values() {
        conn.evict.notify_one();
    }
    Ok(())
}

/// Registers a new connection, closing the oldest idle one when the limit
/// is reached; `None` when every open connection is handling a request.
fn admit(conns: &Shared, max: usize) -> Option<(u64, Arc<AtomicUsize>, Arc<Notify>)> {
    let mut conns = lock(conns);
    if conns.open.len() >= max {
        let idle = conns
            .open
            .iter()
            .find(|(_, c)| c.busy.load(Ordering::SeqCst) == 0)
            .map(|(&id, _)| id)?;
        if let Some(evicted) = conns.open.remove(&idle) {
            // A permit is stored if the connection's task is not waiting yet.
            evicted.evict.notify_one();
            metrics::AdminConnectionClosed { why: "evicted" }.emit();
        }
    }
    let id = conns.next;
    conns.next += 1;
    let busy = Arc::new(AtomicUsize::new(0));
    let evict = Arc::new(Notify::new());
    conns.open.insert(
        id,
        Conn {
            busy: Arc::clone(&busy),
            evict: Arc::clone(&evict),
        },
    );
    metrics::admin_connections(conns.open.len());
    Some((id, busy, evict))
}

/// Counts a request in flight on its connection while alive.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn new(busy: &Arc<AtomicUsize>) -> Busy {
        busy.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(busy))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    async fn start(limits: Limits) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new().route("/healthz", get(|| async { "ok" }));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, router, limits, async move {
            let _ = stopped.await;
        }));
        (addr, stop)
    }

    /// `GET /healthz` on a fresh connection: the whole response, or what
    /// went wrong.
    async fn healthz(addr: SocketAddr) -> Result<String, String> {
        let exchange = async {
            let mut s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .map_err(|e| e.to_string())?;
            let mut response = String::new();
            s.read_to_string(&mut response)
                .await
                .map_err(|e| e.to_string())?;
            Ok(response)
        };
        tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .map_err(|_| "timed out".to_string())?
    }

    /// Whether the server closed `stream` (end of stream or reset).
    async fn closed(stream: &mut TcpStream, within: Duration) -> bool {
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(within, stream.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    /// `wanted` connections, or fewer when the process may not open twice as
    /// many files (both ends are in this process).
    fn connections(wanted: usize) -> usize {
        let soft_limit = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|limits| {
                limits
                    .lines()
                    .find(|l| l.starts_with("Max open files"))
                    .and_then(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
            })
            .unwrap_or(1024);
        wanted.min(soft_limit.saturating_sub(256) / 2)
    }

    async fn partial_headers(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
        let mut streams = Vec::with_capacity(n);
        for _ in 0..n {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .await
                .unwrap();
            streams.push(s);
        }
        streams
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_of_slow_connections_leaves_healthz_answering() {
        let limits = Limits {
            max_connections: 64,
            header_read_timeout: Duration::from_secs(600),
        };
        let (addr, _stop) = start(limits).await;
        // Far more slow clients than the limit: each new one closes the
        // oldest, and a health check still gets its answer.
        let mut slow = partial_headers(addr, connections(2000)).await;
        let reply = healthz(addr).await.unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.ends_with("ok"), "{reply}");
        // The oldest slow clients were closed to make room.
        assert!(closed(&mut slow[0], Duration::from_secs(10)).await);
        let open = slow.len() - limits.max_connections;
        assert!(!closed(&mut slow[open + 1], Duration::from_millis(100)).await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_headers_and_idle_connections_are_closed() {
        let limits = Limits {
            max_connections: 4096,
            header_read_timeout: Duration::from_millis(300),
        };
        let (addr, _stop) = start(limits).await;
        let mut slow = partial_headers(addr, connections(1000)).await;
        // Idle: connected, nothing sent.
        let mut idle = TcpStream::connect(addr).await.unwrap();
        assert_eq!(healthz(addr).await.map(|r| r.ends_with("ok")), Ok(true));
        for s in slow.iter_mut().step_by(97) {
            assert!(closed(s, Duration::from_secs(30)).await);
        }
        assert!(closed(&mut idle, Duration::from_secs(30)).await);
    }

    #[tokio::test]
    async fn busy_connections_are_not_evicted() {
        let conns: Shared = Arc::default();
        let (_, busy, _) = admit(&conns, 1).unwrap();
        let _guard = Busy::new(&busy);
        assert!(admit(&conns, 1).is_none(), "the only connection is busy");
        drop(_guard);
        let (id, _, _) = admit(&conns, 1).unwrap();
        assert_eq!(lock(&conns).open.keys().copied().collect::<Vec<_>>(), [id]);
    }
}
