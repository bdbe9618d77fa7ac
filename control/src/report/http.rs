//! A small HTTP/1.1 endpoint for plain-text pages (`/metrics`), reusable by any process that
//! exposes one: hyper's server on a single-threaded tokio runtime in its own thread.
//!
//! Why hyper rather than the hand-written responder it replaces: that one served one connection
//! at a time, so one client sending a byte every 1.5 s, or 50 silent connections, blocked every
//! scrape for over a minute. Here every connection is its own task, reading a request's head
//! has a deadline ([`HEADER_TIMEOUT`]) that trickling bytes does not extend, a whole connection
//! has one too ([`CONNECTION_TIMEOUT`]), and at most [`MAX_CONNECTIONS`] are served at once
//! (beyond that a new one is closed at once), so neither slow nor silent clients delay a scrape.
//! Nothing here touches the data path: pages are rendered by the caller's [`Pages`] closure.

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest time to receive a request's head (request line and headers).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest time one connection may stay open (one request: no keep-alive).
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 256;

/// A page: (content type, body).
pub type Page = (&'static str, String);

/// What the server serves: the page at a path, or `None` (404). Called on the server's thread,
/// once per GET.
pub type Pages = Arc<dyn Fn(&str) -> Option<Page> + Send + Sync>;

/// Serves GET requests on `listener` with `pages` until `stop` is set (checked every 50 ms).
pub fn serve(listener: TcpListener, pages: Pages, stop: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    std::thread::Builder::new().name("wirelat-http".into()).spawn(move || {
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "HTTP endpoint: cannot use the listener");
                    return;
                }
            };
            let open = Arc::new(AtomicUsize::new(0));
            while !stop.load(Ordering::SeqCst) {
                let accepted = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
                let stream = match accepted {
                    Err(_) => continue,
                    Ok(Ok((stream, _))) => stream,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "HTTP endpoint: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    drop(stream);
                    continue;
                }
                open.fetch_add(1, Ordering::SeqCst);
                let (pages, open) = (pages.clone(), open.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| respond(req, pages.clone()));
                    let conn = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .keep_alive(false)
                        .serve_connection(TokioIo::new(stream), service);
                    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    })
}

async fn respond(req: Request<Incoming>, pages: Pages) -> Result<Response<Full<Bytes>>, Infallible> {
    let text = "text/plain; charset=utf-8";
    let (status, ctype, body) = if req.method() != Method::GET {
        (StatusCode::METHOD_NOT_ALLOWED, text, "only GET\n".to_owned())
    } else {
        match pages(req.uri().path()) {
            Some((ctype, body)) => (StatusCode::OK, ctype, body),
            None => (StatusCode::NOT_FOUND, text, "not found\n".to_owned()),
        }
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        r
    }

    #[test]
    fn fifty_silent_connections_and_a_slow_one_do_not_delay_a_request() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let pages: Pages = Arc::new(|p| (p == "/metrics").then(|| ("text/plain", "up 1\n".to_owned())));
        let stop = Arc::new(AtomicBool::new(false));
        let h = serve(l, pages, stop.clone()).unwrap();
        let silent: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET /met").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        for _ in 0..3 {
            let t = Instant::now();
            let r = get(addr, "/metrics");
            assert!(r.starts_with("HTTP/1.1 200") && r.ends_with("up 1\n"), "{r}");
            assert!(t.elapsed() < Duration::from_secs(1), "took {:?}", t.elapsed());
        }
        assert!(get(addr, "/nope").starts_with("HTTP/1.1 404"));
        // The slow request is cut at the header deadline, though it keeps trickling.
        let t = Instant::now();
        let mut cut = false;
        while t.elapsed() < HEADER_TIMEOUT * 3 {
            if slow.write_all(b"r").is_err() {
                cut = true;
                break;
            }
            let mut b = [0u8; 256];
            slow.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
            if let Ok(n) = slow.read(&mut b) {
                cut = n == 0 || b.starts_with(b"HTTP/1.1 408");
                if cut {
                    break;
                }
            }
        }
        assert!(cut, "a trickling request is cut at the header deadline");
        drop(silent);
        stop.store(true, Ordering::SeqCst);
        h.join().unwrap();
    }
}
