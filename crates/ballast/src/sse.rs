//! Server-sent events, both ways: the upstream's stream read event by event, and the caller's stream written.
//!
//! Why a decoder of our own and not a crate: OpenAI-compatible streams use a small part of the SSE format
//! (`data:` lines, `:` comments as keep-alives, a blank line between events), and the client needs to know
//! exactly where the first event ends — that is the commit point (DESIGN.md, "Streaming"). The decoder follows
//! the WHATWG rules for that part: lines end with `\n` or `\r\n`; `data:` values (one optional space after the
//! colon dropped) are joined with `\n`; comments and other fields (`event`, `id`, `retry`) are skipped; an event
//! without data is no event. A lone `\r` as a line end (allowed by the spec, sent by no provider we know) is not
//! supported: it stays part of the line.
//!
//! **A bound on each event.** The decoder holds the unfinished line and the data of the event being read; an
//! upstream that never ends a line or an event (a broken proxy, a hostile server) would grow that without end.
//! So an event may hold at most the decoder's limit of bytes (the transport's body limit): past it the decoder
//! refuses ([`EventTooLarge`]) and the stream fails rather than the process running out of memory.

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use serde_json::json;

/// The data of OpenAI's last event: the stream ended as it should.
pub(crate) const DONE: &str = "[DONE]";

/// Reads events from bytes as they arrive, each at most `limit` bytes.
#[derive(Debug)]
pub(crate) struct SseDecoder {
    buffer: BytesMut,
    /// How much of `buffer`'s start holds no line end (so a long line is not scanned again at each push).
    scanned: usize,
    /// The data lines of the event being read.
    data: Option<String>,
    /// The most bytes an unfinished event may hold (its data so far and its unfinished line).
    limit: usize,
    /// Comment lines (keep-alives) read since [`SseDecoder::take_comments`] last asked.
    comments: usize,
}

/// An event grew past the decoder's limit without ending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EventTooLarge {
    /// The limit, in bytes.
    pub(crate) limit: usize,
}

impl SseDecoder {
    /// A decoder of events of at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        SseDecoder {
            buffer: BytesMut::new(),
            scanned: 0,
            data: None,
            limit,
            comments: 0,
        }
    }

    /// Adds bytes read from the stream.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The data of the next whole event, if the bytes pushed so far hold one; [`EventTooLarge`] when the event
    /// being read has grown past the limit without ending.
    pub(crate) fn next_event(&mut self) -> Result<Option<String>, EventTooLarge> {
        while let Some(end) = self.line_end() {
            let line = self.buffer.split_to(end + 1);
            self.scanned = 0;
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    return Ok(Some(data));
                }
                continue;
            }
            let (field, value) = match line.iter().position(|b| *b == b':') {
                Some(colon) => (&line[..colon], &line[colon + 1..]),
                None => (line, &line[line.len()..]),
            };
            if field.is_empty() {
                // A comment: a keep-alive, counted so a reader can pass it on.
                self.comments += 1;
                continue;
            }
            if field != b"data" {
                // A field OpenAI's streams do not use.
                continue;
            }
            let value = value.strip_prefix(b" ").unwrap_or(value);
            let value = String::from_utf8_lossy(value);
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(&value);
                }
                None => self.data = Some(value.into_owned()),
            }
            self.check_size()?;
        }
        self.check_size()?;
        Ok(None)
    }

    /// How many comment lines (keep-alives) were read since the last call.
    pub(crate) fn take_comments(&mut self) -> usize {
        std::mem::take(&mut self.comments)
    }

    /// Where the buffer's first line ends, scanning only what was not scanned before.
    fn line_end(&mut self) -> Option<usize> {
        match self.buffer[self.scanned..].iter().position(|b| *b == b'\n') {
            Some(at) => Some(self.scanned + at),
            None => {
                self.scanned = self.buffer.len();
                None
            }
        }
    }

    /// Refuses an unfinished event (its data so far and its unfinished line) over the limit.
    fn check_size(&self) -> Result<(), EventTooLarge> {
        let pending = self.data.as_ref().map_or(0, String::len) + self.scanned.min(self.buffer.len());
        if pending > self.limit {
            return Err(EventTooLarge { limit: self.limit });
        }
        Ok(())
    }
}

/// One chunk as the caller's event: `data: <json>\n\n`.
pub(crate) fn data_event(json: &impl Serialize) -> Bytes {
    event(b"data: ", json)
}

/// An event's `data` as the upstream sent it, passed on: a `data:` line for each of its lines, and the blank line
/// that ends the event.
pub(crate) fn data_as_sent(data: &str) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + 16);
    data_lines(&mut out, data);
    Bytes::from(out)
}

/// [`data_as_sent`] with the event's name first (`event: <name>`, as [`named_event`] writes it).
pub(crate) fn named_as_sent(name: &str, data: &str) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + name.len() + 24);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(safe_name(name).as_bytes());
    out.push(b'\n');
    data_lines(&mut out, data);
    Bytes::from(out)
}

fn data_lines(out: &mut Vec<u8>, data: &str) {
    for line in data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
}

/// One event with its name, as the Responses API sends them: `event: <name>\ndata: <json>\n\n`.
pub(crate) fn named_event(name: &str, json: &impl Serialize) -> Bytes {
    event(format!("event: {}\ndata: ", safe_name(name)).as_bytes(), json)
}

/// An event's name as written: it comes from the upstream's JSON, and a line break in it would forge events of the
/// caller's stream.
fn safe_name(name: &str) -> String {
    (name.chars())
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect()
}

/// `head`, `json` written straight into the event's bytes (JSON has no line break of its own), and the blank line
/// that ends it. What cannot be written as JSON is `null`.
fn event(head: &[u8], json: &impl Serialize) -> Bytes {
    let mut out = Vec::with_capacity(head.len() + 256);
    out.extend_from_slice(head);
    if serde_json::to_writer(&mut out, json).is_err() {
        out.truncate(head.len());
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// A keep-alive comment: the stream is alive, nothing to read.
pub(crate) fn keep_alive() -> Bytes {
    Bytes::from_static(b": keep-alive\n\n")
}

/// The event that ends a stream that went well.
pub(crate) fn done_event() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// The event that ends a stream that failed after its commit point: OpenAI's error envelope, and no `[DONE]`
/// after it.
pub(crate) fn error_event(message: &str, kind: &str, code: &str) -> Bytes {
    data_event(&json!({"error": {"message": message, "type": kind, "code": code}}))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    const LIMIT: usize = 1 << 20;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::new(LIMIT);
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.push(chunk);
            while let Some(event) = decoder.next_event().expect("under the limit") {
                out.push(event);
            }
        }
        out
    }

    #[test]
    fn events_split_anywhere_are_read_whole() {
        let stream = b"data: {\"a\":1}\n\ndata: [DONE]\n\n";
        for cut in 0..stream.len() {
            let (first, second) = stream.split_at(cut);
            assert_eq!(events(&[first, second]), ["{\"a\":1}", "[DONE]"], "cut at {cut}");
        }
    }

    #[test]
    fn comments_other_fields_and_crlf() {
        let stream = b": keep-alive\r\n\r\nevent: message\r\nid: 7\r\ndata:x\r\ndata: y\r\n\r\n";
        assert_eq!(events(&[stream]), ["x\ny"]);
        let mut decoder = SseDecoder::new(LIMIT);
        decoder.push(b": keep-alive\n\n:\n\nevent: ping\n\n");
        assert_eq!(decoder.next_event(), Ok(None));
        assert_eq!(
            decoder.take_comments(),
            2,
            "two comments, counted; the field-only event is none"
        );
        assert_eq!(decoder.take_comments(), 0);
    }

    #[test]
    fn an_unfinished_event_is_not_an_event() {
        let mut decoder = SseDecoder::new(LIMIT);
        decoder.push(b"data: {\"a\"");
        assert_eq!(decoder.next_event(), Ok(None));
        decoder.push(b":1}\n\n\n");
        assert_eq!(decoder.next_event(), Ok(Some("{\"a\":1}".to_owned())));
        assert_eq!(decoder.next_event(), Ok(None));
    }

    #[test]
    fn written_events_read_back() {
        let chunk = json!({"choices": [], "x": "a\nb"});
        let mut decoder = SseDecoder::new(LIMIT);
        decoder.push(&data_event(&chunk));
        decoder.push(&error_event("cut", "upstream_error", "upstream_error"));
        decoder.push(&done_event());
        let read: Vec<Value> = std::iter::from_fn(|| decoder.next_event().expect("under the limit"))
            .map(|e| serde_json::from_str(&e).unwrap_or(Value::String(e)))
            .collect();
        assert_eq!(read[0], chunk);
        assert_eq!(read[1]["error"]["code"], "upstream_error");
        assert_eq!(read[2], DONE);
    }

    /// Regression: the decoder kept an unfinished line, and the data lines of an event with no blank line after
    /// them, without any bound — an upstream that never ends a line grew the buffer until memory ran out.
    #[test]
    fn an_event_that_outgrows_the_limit_is_refused() {
        // One line that never ends, pushed a kilobyte at a time.
        let mut decoder = SseDecoder::new(4096);
        decoder.push(b"data: ");
        let mut pushed = 0;
        let refused = loop {
            decoder.push(&[b'a'; 1024]);
            pushed += 1;
            if let Err(refused) = decoder.next_event() {
                break refused;
            }
            assert!(pushed < 100, "never refused");
        };
        assert_eq!(refused, EventTooLarge { limit: 4096 });
        assert_eq!(pushed, 4, "refused as soon as the line is over 4096 bytes");

        // Data lines that never end their event with a blank line.
        let mut decoder = SseDecoder::new(4096);
        let line = format!("data: {}\n", "b".repeat(1000));
        let mut lines = 0;
        let refused = loop {
            decoder.push(line.as_bytes());
            lines += 1;
            if let Err(refused) = decoder.next_event() {
                break refused;
            }
            assert!(lines < 100, "never refused");
        };
        assert_eq!(refused, EventTooLarge { limit: 4096 });
        assert_eq!(lines, 5);
    }

    #[test]
    fn an_event_at_the_limit_is_read_and_the_limit_is_per_event() {
        // `data: ` and 4090 bytes: a line of exactly 4096 bytes.
        let data = "c".repeat(4090);
        let event = format!("data: {data}\n\n");
        let mut decoder = SseDecoder::new(4096);
        let mut read = 0;
        for _ in 0..3 {
            for bytes in event.as_bytes().chunks(100) {
                decoder.push(bytes);
                if let Some(event) = decoder.next_event().expect("at the limit") {
                    assert_eq!(event, data);
                    read += 1;
                }
            }
        }
        assert_eq!(read, 3);
    }
}
