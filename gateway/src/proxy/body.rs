//! The request's body as the proxy sends it to the app: its errors marked as the client's
//! ([`ClientBody`]), and the time spent waiting for the client to send it kept apart
//! ([`Upload`]), so that the upstream timeout and a room's measure count the app's time only,
//! not a slow client's upload.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
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

/// How long a request has waited on its client, shared by the body (polled by the
/// connection's task) and the proxy (waiting for the answer).
///
/// The app's time is everything else: the request's time less the client's. Not "from the
/// body's end": an app that stops reading a large upload (its socket full, hyper no longer
/// asking for the body) would otherwise never time out, and the time it takes to read a body
/// is its own.
#[derive(Clone, Debug)]
pub(crate) struct Upload {
    inner: Arc<Mutex<Waited>>,
}

#[derive(Debug, Default)]
struct Waited {
    /// The time hyper asked for the next part and the client had not sent it, closed spells.
    total: Duration,
    /// Since when hyper has been waiting for the client, if it is now.
    since: Option<Instant>,
}

impl Upload {
    fn lock(&self) -> MutexGuard<'_, Waited> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long the request has waited on its client by `now`.
    pub(crate) fn client_time(&self, now: Instant) -> Duration {
        let waited = self.lock();
        waited.total + waited.since.map_or(Duration::ZERO, |since| now - since)
    }
}

pin_project_lite::pin_project! {
    /// A request body that keeps its [`Upload`]'s count.
    pub(crate) struct Sent<B> {
        #[pin]
        inner: B,
        upload: Upload,
    }
}

impl<B> Sent<B> {
    /// `inner`, and what tells how long it kept the request waiting.
    pub(crate) fn new(inner: B) -> (Self, Upload) {
        let upload = Upload {
            inner: Arc::default(),
        };
        (
            Self {
                inner,
                upload: upload.clone(),
            },
            upload,
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
        let polled = this.inner.poll_frame(cx);
        let mut waited = this.upload.lock();
        match (&polled, waited.since) {
            (Poll::Pending, None) => waited.since = Some(Instant::now()),
            (Poll::Ready(_), Some(since)) => {
                waited.total += since.elapsed();
                waited.since = None;
            }
            _ => {}
        }
        drop(waited);
        match polled {
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(ClientBody(e.into()))))),
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
