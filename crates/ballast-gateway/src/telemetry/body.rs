//! The answer's body of a traced request: the body as it was, which draws the request's spans when it ends — its
//! last frame read, or dropped (the caller went away): a stream's spans end with the stream.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};

use super::Ending;

/// `body`, and what its end draws.
pub(super) struct Traced {
    body: Body,
    ending: Option<Ending>,
}

impl Traced {
    pub(super) fn new(body: Body, ending: Ending) -> Self {
        Traced {
            body,
            ending: Some(ending),
        }
    }

    fn end(&mut self) {
        if let Some(ending) = self.ending.take() {
            ending.end();
        }
    }
}

impl http_body::Body for Traced {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.end();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        self.end();
    }
}
