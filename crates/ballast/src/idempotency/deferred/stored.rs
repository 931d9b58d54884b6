//! A deferred request as the operation keeps it: what a worker needs to send it again — the target as the
//! caller sent it (path and query), its media type and its body. The method and the route are the scope's; the
//! key and the principal too. Nothing else of the caller's request is kept (no `Authorization`, no deadline: a
//! deferred attempt has deadlines of its own).
//!
//! The form: a version byte, then the target and the media type each as a 2-byte big-endian length and its
//! bytes, then the body.

use bytes::{BufMut as _, Bytes, BytesMut};

const VERSION: u8 = 1;

/// The parts of a deferred request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredRequest {
    /// Path and query, as sent.
    pub(crate) target: String,
    /// The `content-type`, if any.
    pub(crate) content_type: Option<String>,
    /// The body, whole.
    pub(crate) body: Bytes,
}

impl StoredRequest {
    /// The stored form; `None` when a part is too long for it (a target or media type over 64 KiB).
    pub(crate) fn encode(&self) -> Option<Bytes> {
        let content_type = self.content_type.as_deref().unwrap_or("");
        let (target_len, type_len) = (
            u16::try_from(self.target.len()).ok()?,
            u16::try_from(content_type.len()).ok()?,
        );
        let mut out = BytesMut::with_capacity(5 + self.target.len() + content_type.len() + self.body.len());
        out.put_u8(VERSION);
        out.put_u16(target_len);
        out.put_slice(self.target.as_bytes());
        out.put_u16(type_len);
        out.put_slice(content_type.as_bytes());
        out.put_slice(&self.body);
        Some(out.freeze())
    }

    /// The parts of a stored form; `None` when it is not one (another version, cut short, not UTF-8).
    pub(crate) fn decode(stored: &Bytes) -> Option<Self> {
        let (&version, rest) = stored.split_first()?;
        if version != VERSION {
            return None;
        }
        let (target, rest) = text(rest)?;
        let (content_type, rest) = text(rest)?;
        let body = stored.slice(stored.len() - rest.len()..);
        Some(StoredRequest {
            target,
            content_type: (!content_type.is_empty()).then_some(content_type),
            body,
        })
    }
}

/// A 2-byte length and that many bytes of UTF-8, and what follows.
fn text(bytes: &[u8]) -> Option<(String, &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_be_bytes(*len));
    let (text, rest) = (rest.get(..len)?, rest.get(len..)?);
    Some((std::str::from_utf8(text).ok()?.to_owned(), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_garbage_is_refused() {
        let request = StoredRequest {
            target: "/v1/tools/refund?x=1".to_owned(),
            content_type: Some("application/json".to_owned()),
            body: Bytes::from_static(b"{\"amount\":5}"),
        };
        assert_eq!(
            StoredRequest::decode(&request.encode().unwrap()),
            Some(request.clone())
        );
        let bare = StoredRequest {
            content_type: None,
            body: Bytes::new(),
            ..request
        };
        assert_eq!(StoredRequest::decode(&bare.encode().unwrap()), Some(bare));
        for garbage in [
            &b""[..],
            b"\x02",
            b"\x01\x00\x09/short",
            b"\x01\x00\x01\xff\x00\x00",
        ] {
            assert_eq!(
                StoredRequest::decode(&Bytes::copy_from_slice(garbage)),
                None,
                "{garbage:?}"
            );
        }
    }
}
