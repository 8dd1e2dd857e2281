//! The public route streams both ways: answers larger than anything it
//! could buffer go through whole, the first bytes of an answer reach the
//! client before the app has finished it, and an upload reaches the app
//! while the client is still sending it.

use super::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Larger than the 1 MiB the route used to buffer at most.
const BIG_BYTES: usize = 24 * 1024 * 1024;
/// How long a test waits for what should come at once.
const WAIT_MS: u64 = 10_000;

const RELEASE: Digest = Digest::repeat(7);

/// The route on a fresh port, pointed at `app_port`.
async fn route_to(app_port: u16) -> u16 {
    route_with_handle(app_port).await.0
}

/// The route's port and the route itself (to switch it, count in flight).
async fn route_with_handle(app_port: u16) -> (u16, Route) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let route = Route::default();
    route.switch(Some(Backend {
        port: app_port,
        release: RELEASE,
    }));
    tokio::spawn(serve(listener, route.clone()));
    (port, route)
}

/// Reads one request head from `conn`, returning its Content-Length.
async fn read_head(conn: &mut TcpStream) -> usize {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        conn.read_exact(&mut byte).await.expect("request head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    head.lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// An app that answers one request: a head with `Content-Length: len`,
/// then `first`, then (once `more` fires) the rest of `len` bytes of `x`.
async fn app_answering(len: usize, first: &'static [u8], more: oneshot::Receiver<()>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.expect("accept");
        read_head(&mut conn).await;
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n");
        conn.write_all(head.as_bytes()).await.expect("head");
        conn.write_all(first).await.expect("first");
        let _ = more.await;
        conn.write_all(&vec![b'x'; len - first.len()])
            .await
            .expect("rest");
    });
    port
}

/// Sends `request` to the route, returns the connection.
async fn ask(route_port: u16, request: &[u8]) -> TcpStream {
    let mut conn = TcpStream::connect(("127.0.0.1", route_port))
        .await
        .expect("connect");
    conn.write_all(request).await.expect("request");
    conn
}

/// Reads from `conn` until `needle` has arrived; everything read.
async fn read_until(conn: &mut TcpStream, needle: &[u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !seen.windows(needle.len()).any(|w| w == needle) {
        let n = conn.read(&mut buf).await.expect("read");
        assert!(
            n > 0,
            "closed before {:?} arrived",
            String::from_utf8_lossy(needle)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    seen
}

#[tokio::test]
async fn an_answer_larger_than_any_buffer_streams_through_whole() {
    let (go, more) = oneshot::channel();
    let app = app_answering(BIG_BYTES, b"start", more).await;
    let route = route_to(app).await;
    let _ = go.send(());
    let mut conn = ask(
        route,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    let mut answer = Vec::new();
    let read = conn.read_to_end(&mut answer);
    tokio::time::timeout(Duration::from_millis(WAIT_MS), read)
        .await
        .expect("in time")
        .expect("read");
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("head")
        + 4;
    let head = String::from_utf8_lossy(&answer[..split]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("{RELEASE_HEADER}: {}", RELEASE.to_hex())),
        "{head}"
    );
    assert_eq!(answer.len() - split, BIG_BYTES);
}

#[tokio::test]
async fn the_first_bytes_arrive_before_the_app_has_finished() {
    let (go, more) = oneshot::channel();
    let app = app_answering(BIG_BYTES, b"first-bytes", more).await;
    let route = route_to(app).await;
    let mut conn = ask(route, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    // The app holds the rest back until the client has the first bytes:
    // a route that buffered the whole answer would never pass them on.
    let first = read_until(&mut conn, b"first-bytes");
    tokio::time::timeout(Duration::from_millis(WAIT_MS), first)
        .await
        .expect("the first bytes came while the app still held the rest");
    let _ = go.send(());
}

#[tokio::test]
async fn an_upload_streams_to_the_app_as_it_is_sent() {
    const PIECE_BYTES: usize = 1024 * 1024;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let app = listener.local_addr().expect("addr").port();
    let (first_arrived, first_seen) = oneshot::channel();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.expect("accept");
        let len = read_head(&mut conn).await;
        let mut got = 0usize;
        let mut buf = vec![0u8; 64 * 1024];
        let mut first_arrived = Some(first_arrived);
        while got < len {
            let n = conn.read(&mut buf).await.expect("body");
            assert!(n > 0, "body cut at {got}");
            got += n;
            if got >= PIECE_BYTES {
                first_arrived.take().map(|tx| tx.send(()));
            }
        }
        let body = got.to_string();
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(answer.as_bytes()).await.expect("answer");
    });
    let route = route_to(app).await;
    let head = format!("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {BIG_BYTES}\r\nConnection: close\r\n\r\n");
    let mut conn = ask(route, head.as_bytes()).await;
    let piece = vec![b'u'; PIECE_BYTES];
    conn.write_all(&piece).await.expect("first piece");
    // The rest is sent only once the app has the first piece: a route that
    // read the whole upload before forwarding it would wait forever.
    tokio::time::timeout(Duration::from_millis(WAIT_MS), first_seen)
        .await
        .expect("the app got the first piece while the rest was unsent")
        .expect("app");
    let (mut reader, mut writer) = conn.split();
    let send = async {
        for _ in 1..BIG_BYTES / piece.len() {
            writer.write_all(&piece).await.expect("upload");
        }
    };
    let mut answer = Vec::new();
    let (_, read) = tokio::time::timeout(
        Duration::from_millis(WAIT_MS),
        futures_join(send, reader.read_to_end(&mut answer)),
    )
    .await
    .expect("in time");
    read.expect("answer");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with(&format!("\r\n\r\n{BIG_BYTES}")), "{text}");
}

/// Both futures, concurrently (the upload and the answer's reading).
async fn futures_join<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    tokio::join!(a, b)
}

#[tokio::test]
async fn no_backend_is_503_and_a_silent_app_is_502_without_an_identity() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let route = Route::default();
    tokio::spawn(serve(listener, route.clone()));
    let request = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut answer = Vec::new();
    ask(port, request)
        .await
        .read_to_end(&mut answer)
        .await
        .expect("read");
    assert!(
        answer.starts_with(b"HTTP/1.1 503"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // A port nothing listens on.
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let dead = closed.local_addr().expect("addr").port();
    drop(closed);
    route.switch(Some(Backend {
        port: dead,
        release: RELEASE,
    }));
    let mut answer = Vec::new();
    ask(port, request)
        .await
        .read_to_end(&mut answer)
        .await
        .expect("read");
    let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 502"), "{text}");
    assert!(!text.contains(RELEASE_HEADER), "{text}");
}

/// A request counts against its backend until its answer's body ended:
/// what lets a retired instance finish its streamed answers first.
#[tokio::test]
async fn a_request_counts_in_flight_until_its_answer_ends() {
    let (go, more) = oneshot::channel();
    let app = app_answering(BIG_BYTES, b"first-bytes", more).await;
    let (port, route) = route_with_handle(app).await;
    assert_eq!(route.in_flight(app), 0);
    let request = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut conn = ask(port, request).await;
    let first = read_until(&mut conn, b"first-bytes");
    tokio::time::timeout(Duration::from_millis(WAIT_MS), first)
        .await
        .expect("first bytes");
    // Taken off the route, the backend still owes the rest of the answer.
    route.switch(None);
    assert_eq!(route.in_flight(app), 1);
    let _ = go.send(());
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_millis(WAIT_MS), conn.read_to_end(&mut rest))
        .await
        .expect("in time")
        .expect("read");
    let deadline = std::time::Instant::now() + Duration::from_millis(WAIT_MS);
    while route.in_flight(app) > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(route.in_flight(app), 0, "the answer ended");
}
