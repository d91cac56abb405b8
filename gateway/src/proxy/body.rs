//! The request's body as the proxy sends it to the app: its errors marked as the client's
//! ([`ClientBody`]), and the moment it ends announced ([`Sent`]), so that the app's time, for
//! the upstream timeout and for a room's measure, starts when the app has the whole request,
//! not while a slow client is still uploading.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::BoxError;

/// An error of the client's body on its way to the app (it stopped, arrived too slowly, was
/// too large): found in the chain of the client's error, it makes the failure the client's.
#[derive(Debug)]
pub(crate) struct ClientBody(pub(crate) BoxError);

impl std::fmt::Display for ClientBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client's body failed")
    }
}

impl std::error::Error for ClientBody {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

pin_project_lite::pin_project! {
    /// A request body that says when it has all been read, once.
    pub(crate) struct Sent<B> {
        #[pin]
        inner: B,
        ended: Ended,
    }
}

/// Sends the instant it is dropped, unless told the body failed. hyper drops a body once it has
/// sent all of it (the request's `Content-Length` reached, without asking for the end that the
/// body's wrappers may not report), or when the app answered without reading it all; a body
/// that failed sends nothing.
struct Ended(Option<oneshot::Sender<Instant>>);

impl Drop for Ended {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(Instant::now());
        }
    }
}

impl<B> Sent<B> {
    /// `inner`, and what hears of its end: the instant it ended, or an error if it failed.
    pub(crate) fn new(inner: B) -> (Self, oneshot::Receiver<Instant>) {
        let (tx, rx) = oneshot::channel();
        (
            Self {
                inner,
                ended: Ended(Some(tx)),
            },
            rx,
        )
    }
}

impl<B> Body for Sent<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        match this.inner.poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => {
                // Dropped unsent: the receiver hears of no end.
                this.ended.0.take();
                Poll::Ready(Some(Err(Box::new(ClientBody(e.into())))))
            }
            Poll::Ready(None) => {
                if let Some(tx) = this.ended.0.take() {
                    let _ = tx.send(Instant::now());
                }
                Poll::Ready(None)
            }
            polled => polled.map(|frame| frame.map(|frame| frame.map_err(Into::into))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
