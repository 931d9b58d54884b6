//! Reading a whole response body under a size limit.

use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};

use crate::BoxError;

/// Why a body could not be read whole.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// It is longer than the limit.
    TooLarge,
    /// It failed midway (a reset, a closed connection, a failing stream).
    Failed(BoxError),
}

/// Reads all of `body`, refusing one longer than `limit` bytes — at once when its announced length says so.
pub(crate) async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, BodyError>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let limit_u64 = u64::try_from(limit).unwrap_or(u64::MAX);
    if body.size_hint().lower() > limit_u64 {
        return Err(BodyError::TooLarge);
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(BodyError::TooLarge),
        Err(error) => Err(BodyError::Failed(error)),
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::io;

    use http_body_util::{Full, StreamBody};

    use super::*;

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        let body = Full::new(Bytes::from_static(b"hello"));
        assert_eq!(read_limited(body, 5).await.unwrap(), "hello");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused() {
        let body = Full::new(Bytes::from_static(b"hello!"));
        assert!(matches!(read_limited(body, 5).await, Err(BodyError::TooLarge)));
        let chunks = futures::stream::iter([
            Ok::<_, Infallible>(http_body::Frame::data(Bytes::from_static(b"abc"))),
            Ok(http_body::Frame::data(Bytes::from_static(b"def"))),
        ]);
        let streamed = StreamBody::new(chunks);
        assert!(matches!(
            read_limited(streamed, 5).await,
            Err(BodyError::TooLarge)
        ));
    }

    #[tokio::test]
    async fn a_body_that_fails_midway_is_a_failure() {
        let chunks = futures::stream::iter([
            Ok(http_body::Frame::data(Bytes::from_static(b"abc"))),
            Err(io::Error::new(io::ErrorKind::ConnectionReset, "reset")),
        ]);
        let failing = StreamBody::new(chunks);
        assert!(matches!(
            read_limited(failing, 1024).await,
            Err(BodyError::Failed(_))
        ));
    }
}
