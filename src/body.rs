//! The response body: the inner service's body, or the room's own answer.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

/// A body the room streams chunk by chunk (a waiter's Server-Sent Events): defined here, and
/// implemented where the stream is made, so that the body needs nothing from the room.
pub(crate) trait Chunks: Send {
    /// The next chunk; `None` once the stream has ended.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>>;

    /// Whether the stream has ended.
    fn is_done(&self) -> bool;
}

pin_project! {
    /// The body of a response through [`WaitingRoom`](crate::WaitingRoom): the inner
    /// service's body, untouched; the room's own answer in one chunk; or a waiter's stream of
    /// Server-Sent Events (the room's `events` endpoint).
    pub struct ResponseBody<B> {
        #[pin]
        kind: BodyKind<B>,
    }
}

pin_project! {
    #[project = BodyKindProj]
    enum BodyKind<B> {
        Inner { #[pin] body: B },
        Room { data: Option<Bytes> },
        Events { stream: Box<dyn Chunks> },
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        Self {
            kind: BodyKind::Inner { body },
        }
    }

    pub(crate) fn events(stream: Box<dyn Chunks>) -> Self {
        Self {
            kind: BodyKind::Events { stream },
        }
    }

    pub(crate) fn room(data: Bytes) -> Self {
        Self {
            kind: BodyKind::Room {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.project().kind.project() {
            BodyKindProj::Inner { body } => body.poll_frame(cx),
            BodyKindProj::Room { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            BodyKindProj::Events { stream } => stream
                .poll_chunk(cx)
                .map(|chunk| chunk.map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Inner { body } => body.is_end_stream(),
            BodyKind::Room { data } => data.is_none(),
            BodyKind::Events { stream } => stream.is_done(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Inner { body } => body.size_hint(),
            BodyKind::Room { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            BodyKind::Events { .. } => SizeHint::default(),
        }
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            BodyKind::Inner { .. } => "Inner",
            BodyKind::Room { .. } => "Room",
            BodyKind::Events { .. } => "Events",
        };
        f.debug_struct("ResponseBody").field("kind", &kind).finish()
    }
}

/// A body in one chunk: the JSON or page a service of this crate answers by itself (the
/// admin API (feature `admin`), matching (the `tower-waiting-room-matching` crate).
///
/// ```
/// use http_body::Body;
/// use tower_waiting_room::FullBody;
///
/// let body = FullBody::from("{}");
/// assert_eq!(body.size_hint().exact(), Some(2));
/// ```
#[derive(Debug, Default)]
pub struct FullBody {
    data: Option<Bytes>,
}

impl FullBody {
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

impl From<&'static str> for FullBody {
    fn from(s: &'static str) -> Self {
        Self::new(Bytes::from_static(s.as_bytes()))
    }
}

impl From<Bytes> for FullBody {
    fn from(b: Bytes) -> Self {
        Self::new(b)
    }
}

impl Body for FullBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.get_mut().data.take().map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

/// Why a request body was not read whole.
#[derive(Debug)]
pub enum Collect {
    /// More than the limit came (the rest is not read).
    TooLarge,
    /// The body failed.
    Failed,
}

/// The whole body, or `TooLarge` as soon as more than `limit` bytes came (the rest is not read).
pub async fn collect_limited<B: Body>(body: B, limit: usize) -> Result<Bytes, Collect> {
    use bytes::{Buf, BytesMut};
    let mut body = std::pin::pin!(body);
    let mut out = BytesMut::new();
    loop {
        let frame = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
        match frame {
            None => return Ok(out.freeze()),
            Some(Err(_)) => return Err(Collect::Failed),
            Some(Ok(frame)) => {
                if let Ok(mut data) = frame.into_data() {
                    if out.len() + data.remaining() > limit {
                        return Err(Collect::TooLarge);
                    }
                    while data.has_remaining() {
                        let chunk = data.chunk();
                        out.extend_from_slice(chunk);
                        let n = chunk.len();
                        data.advance(n);
                    }
                }
                // Trailers carry nothing these services read.
            }
        }
    }
}

/// A JSON answer.
pub fn json_response(
    status: http::StatusCode,
    body: &impl serde::Serialize,
) -> http::Response<FullBody> {
    let bytes = serde_json::to_vec(body).expect("the crate's JSON bodies serialize");
    let mut res = http::Response::new(FullBody::from(Bytes::from(bytes)));
    *res.status_mut() = status;
    res.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    res
}
