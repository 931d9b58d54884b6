//! Server-sent events, both ways: the upstream's stream read event by event, and the caller's stream written.
//!
//! Why a decoder of our own and not a crate: OpenAI-compatible streams use a small part of the SSE format
//! (`data:` lines, `:` comments as keep-alives, a blank line between events), and the client needs to know
//! exactly where the first event ends — that is the commit point (DESIGN.md, "Streaming"). The decoder follows
//! the WHATWG rules for that part: lines end with `\n` or `\r\n`; `data:` values (one optional space after the
//! colon dropped) are joined with `\n`; comments and other fields (`event`, `id`, `retry`) are skipped; an event
//! without data is no event. A lone `\r` as a line end (allowed by the spec, sent by no provider we know) is not
//! supported: it stays part of the line.

use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};

/// The data of OpenAI's last event: the stream ended as it should.
pub(crate) const DONE: &str = "[DONE]";

/// Reads events from bytes as they arrive.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    buffer: BytesMut,
    /// The data lines of the event being read.
    data: Option<String>,
}

impl SseDecoder {
    /// Adds bytes read from the stream.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The data of the next whole event, if the bytes pushed so far hold one.
    pub(crate) fn next_event(&mut self) -> Option<String> {
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let line = self.buffer.split_to(end + 1);
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    return Some(data);
                }
                continue;
            }
            let (field, value) = match line.iter().position(|b| *b == b':') {
                Some(colon) => (&line[..colon], &line[colon + 1..]),
                None => (line, &line[line.len()..]),
            };
            if field != b"data" {
                // A comment (`: keep-alive`) or a field OpenAI's streams do not use.
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
        }
        None
    }
}

/// One chunk as the caller's event: `data: <json>\n\n`.
pub(crate) fn data_event(json: &Value) -> Bytes {
    Bytes::from(format!("data: {json}\n\n"))
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
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.push(chunk);
            while let Some(event) = decoder.next_event() {
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
    }

    #[test]
    fn an_unfinished_event_is_not_an_event() {
        let mut decoder = SseDecoder::default();
        decoder.push(b"data: {\"a\"");
        assert_eq!(decoder.next_event(), None);
        decoder.push(b":1}\n\n\n");
        assert_eq!(decoder.next_event().as_deref(), Some("{\"a\":1}"));
        assert_eq!(decoder.next_event(), None);
    }

    #[test]
    fn written_events_read_back() {
        let chunk = json!({"choices": [], "x": "a\nb"});
        let mut decoder = SseDecoder::default();
        decoder.push(&data_event(&chunk));
        decoder.push(&error_event("cut", "upstream_error", "upstream_error"));
        decoder.push(&done_event());
        let read: Vec<Value> = std::iter::from_fn(|| decoder.next_event())
            .map(|e| serde_json::from_str(&e).unwrap_or(Value::String(e)))
            .collect();
        assert_eq!(read[0], chunk);
        assert_eq!(read[1]["error"]["code"], "upstream_error");
        assert_eq!(read[2], DONE);
    }
}
