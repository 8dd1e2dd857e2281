//! Each way a mirror can fail, against a tiny HTTP server on loopback
//! written by hand (raw TCP), so a body can be cut, corrupted, endless or
//! stalled exactly.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the test server does with every request.
#[derive(Clone, Debug)]
enum Serve {
    /// 200 with exactly these bytes and their length.
    Bytes(Vec<u8>),
    /// 200 announcing `len` bytes, sending `body`, then closing.
    Cut { len: usize, body: Vec<u8> },
    /// 200 without a length, sending `body`, then closing.
    Close(Vec<u8>),
    /// 200 without a length, sending bytes forever.
    Endless,
    /// Headers announcing `len` bytes, then nothing.
    StallBody { len: usize },
    /// Reads the request, answers nothing.
    StallHead,
    /// One byte every `every_ms`, announcing `len` bytes.
    Trickle { len: usize, every_ms: u64 },
    /// 404.
    Missing,
    /// Honours `Range: bytes=N-` (206 with the bytes after N), else 200
    /// with all of them.
    Ranged(Vec<u8>),
}

/// A server on loopback answering every request with `serve`; returns
/// its base URL and how many requests it got.
async fn server(serve: Serve) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(answer(socket, serve.clone()));
        }
    });
    (format!("http://{addr}/base"), hits)
}

async fn answer(mut socket: tokio::net::TcpStream, serve: Serve) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match socket.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let range_start = String::from_utf8_lossy(&head).lines().find_map(|l| {
        let l = l.to_ascii_lowercase();
        l.strip_prefix("range: bytes=")
            .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok())
    });
    let ok = |len: Option<usize>| match len {
        Some(n) => format!("HTTP/1.1 200 OK\r\ncontent-length: {n}\r\n\r\n"),
        None => "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_string(),
    };
    let _ = match serve {
        Serve::Bytes(b) => {
            let _ = socket.write_all(ok(Some(b.len())).as_bytes()).await;
            socket.write_all(&b).await
        }
        Serve::Ranged(b) => match range_start {
            Some(from) if from < b.len() => {
                let rest = &b[from..];
                let head = format!(
                    "HTTP/1.1 206 Partial Content\r\ncontent-length: {}\r\ncontent-range: bytes {from}-{}/{}\r\n\r\n",
                    rest.len(),
                    b.len() - 1,
                    b.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                socket.write_all(rest).await
            }
            _ => {
                let _ = socket.write_all(ok(Some(b.len())).as_bytes()).await;
                socket.write_all(&b).await
            }
        },
        Serve::Cut { len, body } => {
            let _ = socket.write_all(ok(Some(len)).as_bytes()).await;
            socket.write_all(&body).await
        }
        Serve::Close(body) => {
            let _ = socket.write_all(ok(None).as_bytes()).await;
            socket.write_all(&body).await
        }
        Serve::Endless => {
            let _ = socket.write_all(ok(None).as_bytes()).await;
            let block = vec![b'x'; 64 * 1024];
            loop {
                if socket.write_all(&block).await.is_err() {
                    break Ok(());
                }
            }
        }
        Serve::StallBody { len } => {
            let _ = socket.write_all(ok(Some(len)).as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        }
        Serve::StallHead => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        }
        Serve::Trickle { len, every_ms } => {
            let _ = socket.write_all(ok(Some(len)).as_bytes()).await;
            for _ in 0..len {
                tokio::time::sleep(Duration::from_millis(every_ms)).await;
                if socket.write_all(b"x").await.is_err() {
                    break;
                }
            }
            Ok(())
        }
        Serve::Missing => {
            socket
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .await
        }
    };
}

fn chunk_of(bytes: &[u8]) -> ChunkRef {
    ChunkRef {
        sha256: Sha256::digest(bytes).into(),
        len: bytes.len() as u32,
    }
}

/// Short bounds so the stall cases take well under a second.
const TEST_BOUNDS: Bounds = Bounds {
    stall: Duration::from_millis(300),
    chunk: Duration::from_millis(1_500),
};

async fn one(serve: Serve, chunk: &ChunkRef) -> Result<Vec<u8>, MirrorError> {
    let (url, _) = server(serve).await;
    let mirror = Mirror::parse(0, &url).expect("mirror URL");
    fetch_chunk(
        &client(TEST_BOUNDS),
        &mirror,
        chunk,
        TEST_BOUNDS,
        Vec::new(),
        |_| {},
    )
    .await
}

const BODY: &[u8] = b"the chunk's true bytes, as the manifest names them";

#[tokio::test]
async fn a_good_mirror_gives_the_chunk() {
    let chunk = chunk_of(BODY);
    assert_eq!(
        one(Serve::Bytes(BODY.to_vec()), &chunk).await,
        Ok(BODY.to_vec())
    );
    // Without a declared length, a body that ends at the right length.
    assert_eq!(
        one(Serve::Close(BODY.to_vec()), &chunk).await,
        Ok(BODY.to_vec())
    );
}

#[tokio::test]
async fn wrong_bytes_are_refused() {
    let chunk = chunk_of(BODY);
    let mut wrong = BODY.to_vec();
    wrong[3] ^= 0x20;
    let got = one(Serve::Bytes(wrong), &chunk).await;
    assert!(
        matches!(got, Err(MirrorError::WrongBytes { .. })),
        "{got:?}"
    );
    let got = one(Serve::Missing, &chunk).await;
    assert_eq!(got, Err(MirrorError::Status(404)));
}

#[tokio::test]
async fn a_truncated_body_is_refused() {
    let chunk = chunk_of(BODY);
    let half = BODY[..BODY.len() / 2].to_vec();
    // Declared short: refused before the body is read.
    let got = one(Serve::Bytes(half.clone()), &chunk).await;
    assert!(matches!(got, Err(MirrorError::Truncated { .. })), "{got:?}");
    // Declared whole, cut off by a close.
    let cut = Serve::Cut {
        len: BODY.len(),
        body: half.clone(),
    };
    let got = one(cut, &chunk).await;
    assert!(matches!(got, Err(MirrorError::Truncated { .. })), "{got:?}");
    // No length at all, ends short.
    let got = one(Serve::Close(half), &chunk).await;
    let expected = BODY.len() as u64;
    let got_len = (BODY.len() / 2) as u64;
    assert_eq!(
        got,
        Err(MirrorError::Truncated {
            got: got_len,
            expected
        })
    );
}

#[tokio::test]
async fn an_endless_or_too_long_body_is_cut_at_the_manifests_length() {
    let chunk = chunk_of(BODY);
    let started = Instant::now();
    let got = one(Serve::Endless, &chunk).await;
    assert!(matches!(got, Err(MirrorError::TooLong { .. })), "{got:?}");
    assert!(
        started.elapsed() < TEST_BOUNDS.stall,
        "cut at once, not by a timer"
    );
    let mut longer = BODY.to_vec();
    longer.push(b'!');
    let got = one(Serve::Bytes(longer.clone()), &chunk).await;
    assert!(matches!(got, Err(MirrorError::TooLong { .. })), "{got:?}");
    let got = one(Serve::Close(longer), &chunk).await;
    assert!(matches!(got, Err(MirrorError::TooLong { .. })), "{got:?}");
}

#[tokio::test]
async fn a_stalled_mirror_is_given_up_within_the_stall_bound() {
    let chunk = chunk_of(BODY);
    for serve in [Serve::StallHead, Serve::StallBody { len: BODY.len() }] {
        let started = Instant::now();
        let got = one(serve.clone(), &chunk).await;
        let took = started.elapsed();
        assert!(
            matches!(got, Err(MirrorError::Stalled { .. })),
            "{serve:?}: {got:?}"
        );
        assert!(
            took >= TEST_BOUNDS.stall,
            "{serve:?}: gave up early ({took:?})"
        );
        assert!(took < TEST_BOUNDS.stall * 3, "{serve:?}: took {took:?}");
    }
    // A trickle makes progress, but the chunk is never whole in time.
    let trickle = Serve::Trickle {
        len: BODY.len(),
        every_ms: 100,
    };
    let started = Instant::now();
    let got = one(trickle, &chunk).await;
    assert!(matches!(got, Err(MirrorError::TimedOut { .. })), "{got:?}");
    assert!(started.elapsed() < TEST_BOUNDS.chunk + TEST_BOUNDS.stall);
}

#[tokio::test]
async fn chunks_fall_back_in_order_and_a_failing_mirror_is_skipped() {
    let chunk = chunk_of(BODY);
    let mut wrong = BODY.to_vec();
    wrong[0] ^= 1;
    let (bad, bad_hits) = server(Serve::Bytes(wrong)).await;
    let (good, good_hits) = server(Serve::Bytes(BODY.to_vec())).await;
    let mirrors = Mirrors::new(&[bad, good], TEST_BOUNDS);
    let dir = tempfile::tempdir().expect("tempdir");
    let partials = PartialChunks::open(dir.path()).expect("partials");
    for _ in 0..5 {
        let got = mirrors.fetch(&chunk, &mut Vec::new(), &partials).await;
        assert_eq!(got, Some(BODY.to_vec()));
    }
    // The corrupting mirror was asked until it failed the bound in a row.
    assert_eq!(
        bad_hits.load(Ordering::SeqCst),
        MIRROR_FAILURES_IN_A_ROW_MAX as usize
    );
    assert_eq!(good_hits.load(Ordering::SeqCst), 5);
    mirrors.served_by_controller(7);
    let tally = mirrors.tally();
    assert_eq!(tally.len(), 3, "{tally:?}");
    assert!(tally[0].source.starts_with("mirror[0] 127.0.0.1:"));
    assert_eq!((tally[0].chunks, tally[0].failures), (0, 3));
    assert_eq!(
        (tally[1].chunks, tally[1].bytes),
        (5, 5 * BODY.len() as u64)
    );
    assert_eq!(tally[2].source, CONTROLLER_SOURCE);
    assert_eq!((tally[2].chunks, tally[2].bytes), (1, 7));
}

#[tokio::test]
async fn no_good_mirror_leaves_the_chunk_to_the_controller() {
    let chunk = chunk_of(BODY);
    let (missing, _) = server(Serve::Missing).await;
    // Nothing listens on port 9 of loopback: refused at once.
    let mirrors = Mirrors::new(&[missing, "http://127.0.0.1:9".into()], TEST_BOUNDS);
    let dir = tempfile::tempdir().expect("tempdir");
    let partials = PartialChunks::open(dir.path()).expect("partials");
    assert_eq!(
        mirrors.fetch(&chunk, &mut Vec::new(), &partials).await,
        None
    );
    let tally = mirrors.tally();
    assert_eq!(tally.iter().map(|t| t.failures).sum::<u64>(), 2);
    let none = Mirrors::new(&[], TEST_BOUNDS);
    assert!(none
        .fetch(&chunk, &mut Vec::new(), &partials)
        .await
        .is_none());
}

/// A fetch a crash cut short resumes after its kept bytes: a mirror that
/// honours `Range` sends only the rest (tallied as such), one that does
/// not sends the whole chunk, which replaces the kept bytes; a wrong
/// prefix fails like wrong bytes and the next mirror is asked for the
/// whole chunk, the partial file forgotten.
#[tokio::test]
async fn a_kept_prefix_is_resumed_with_range_and_checked_whole() {
    let chunk = chunk_of(BODY);
    let dir = tempfile::tempdir().expect("tempdir");
    let partials = PartialChunks::open(dir.path()).expect("partials");
    let kept = 10;
    let (ranged, _) = server(Serve::Ranged(BODY.to_vec())).await;
    let mirrors = Mirrors::new(std::slice::from_ref(&ranged), TEST_BOUNDS);
    // What a crash left: the first bytes in the partial file.
    let mut writer = partials.writer(&chunk, 0).expect("writer");
    writer.append(&BODY[..kept]).expect("append");
    drop(writer);
    let mut prefix = partials.prefix(&chunk);
    assert_eq!(prefix, BODY[..kept]);
    let got = mirrors.fetch(&chunk, &mut prefix, &partials).await;
    assert_eq!(got.as_deref(), Some(BODY));
    assert_eq!(
        mirrors.tally()[0].bytes,
        (BODY.len() - kept) as u64,
        "only the rest travelled"
    );
    assert_eq!(
        partials.prefix(&chunk),
        BODY,
        "the partial file holds the whole chunk"
    );
    partials.remove(&chunk);

    let (plain, _) = server(Serve::Bytes(BODY.to_vec())).await;
    let mirrors = Mirrors::new(&[plain], TEST_BOUNDS);
    let mut prefix = BODY[..kept].to_vec();
    let got = mirrors.fetch(&chunk, &mut prefix, &partials).await;
    assert_eq!(got.as_deref(), Some(BODY));
    assert_eq!(mirrors.tally()[0].bytes, BODY.len() as u64);
    assert_eq!(
        partials.prefix(&chunk),
        BODY,
        "the restart replaced the kept bytes"
    );
    partials.remove(&chunk);

    let mut wrong = BODY[..kept].to_vec();
    wrong[0] ^= 1;
    let (second, _) = server(Serve::Ranged(BODY.to_vec())).await;
    let mirrors = Mirrors::new(&[ranged, second], TEST_BOUNDS);
    let got = mirrors.fetch(&chunk, &mut wrong, &partials).await;
    assert_eq!(got.as_deref(), Some(BODY));
    let tally = mirrors.tally();
    assert_eq!((tally[0].failures, tally[1].chunks), (1, 1), "{tally:?}");
    assert_eq!(
        tally[1].bytes,
        BODY.len() as u64,
        "the second was asked for all of it"
    );
    assert!(wrong.is_empty(), "the wrong prefix was dropped");
}

#[test]
fn a_mirror_is_named_by_index_and_host_never_by_its_secrets() {
    let m = Mirror::parse(2, "http://user:s3cret@cache.example:8080/fleet/tok3n/").expect("ok");
    assert_eq!(m.label, "mirror[2] cache.example:8080");
    assert_eq!(m.base, "http://user:s3cret@cache.example:8080/fleet/tok3n");
    assert!(Mirror::parse(0, "https://a").is_err());
    assert!(Mirror::parse(0, "http://a/?sig=1").is_err());
    assert!(Mirror::parse(0, "not a url").is_err());
    // An unusable entry is left out without shifting the others' names.
    let set = Mirrors::new(&["ftp://x".into(), "http://b".into()], Bounds::default());
    assert_eq!(set.mirrors.len(), 1);
    assert_eq!(set.mirrors[0].label, "mirror[1] b");
}
