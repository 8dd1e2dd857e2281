//! A blocking reader of `GET /api/events/stream` for the tests: HTTP/1.0,
//! so the server ends the body by closing (no chunked framing to undo).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One SSE event off the wire.
#[derive(Debug, Clone, Default)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub kind: String,
    pub data: String,
}

pub struct SseReader {
    reader: BufReader<TcpStream>,
}

/// Open the stream at `path` (query included); the status and the
/// reader when it answered 200, else the status and the body.
pub fn open(
    port: u16,
    path: &str,
    token: Option<&str>,
    last_event_id: Option<&str>,
) -> Result<SseReader, (u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let mut head = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n");
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(id) = last_event_id {
        head.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("request");
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header");
        if line.trim().is_empty() {
            break;
        }
    }
    if status != 200 {
        let mut body = String::new();
        let _ = std::io::Read::read_to_string(&mut reader, &mut body);
        return Err((status, body));
    }
    Ok(SseReader { reader })
}

impl SseReader {
    /// The next event (keep-alive comments skipped); `None` when the
    /// stream ended or nothing came within the read timeout.
    pub fn next(&mut self) -> Option<SseEvent> {
        self.read_event().ok().flatten()
    }

    /// Every event up to the end of a stream that ends (`follow=false`),
    /// panicking when it does not end within the read timeout.
    pub fn read_to_end(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        loop {
            match self.read_event() {
                Ok(Some(event)) => events.push(event),
                Ok(None) => return events,
                Err(e) => panic!("the stream did not end: {e} after {events:?}"),
            }
        }
    }

    /// The next event, `Ok(None)` when the server closed the stream, an
    /// error when a read failed (the timeout included).
    fn read_event(&mut self) -> std::io::Result<Option<SseEvent>> {
        let mut event = SseEvent::default();
        let mut any = false;
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if any {
                    return Ok(Some(event));
                }
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => event.id = value.parse().ok(),
                "event" => event.kind = value.to_string(),
                "data" => event.data.push_str(value),
                _ => continue,
            }
            any = true;
        }
    }

    /// Events until one with id `last` (inclusive), panicking on an early end.
    pub fn until(&mut self, last: u64) -> Vec<SseEvent> {
        let mut events = Vec::new();
        loop {
            let event = self
                .next()
                .unwrap_or_else(|| panic!("stream ended before {last}: {events:?}"));
            assert_ne!(event.kind, "dropped", "dropped: {}", event.data);
            let id = event.id;
            events.push(event);
            if id == Some(last) {
                return events;
            }
        }
    }
}
