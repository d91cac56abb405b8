//! The body of the admin service's answers.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// The body of an [`AdminService`](super::AdminService) answer: JSON or the dashboard, in one
/// chunk.
///
/// ```
/// use http_body::Body;
/// use tower_waiting_room::admin::AdminBody;
///
/// let body = AdminBody::from("{}");
/// assert_eq!(body.size_hint().exact(), Some(2));
/// ```
#[derive(Debug, Default)]
pub struct AdminBody {
    data: Option<Bytes>,
}

impl AdminBody {
    pub(crate) fn new(data: Bytes) -> Self {
        Self {
            data: (!data.is_empty()).then_some(data),
        }
    }

    /// An empty body (the answer to `HEAD`).
    pub fn empty() -> Self {
        Self::default()
    }
}

impl From<&'static str> for AdminBody {
    fn from(s: &'static str) -> Self {
        Self::new(Bytes::from_static(s.as_bytes()))
    }
}

impl From<Bytes> for AdminBody {
    fn from(b: Bytes) -> Self {
        Self::new(b)
    }
}

impl Body for AdminBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().data.take().map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}
