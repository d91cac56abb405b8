//! The layer's request classification with arbitrary methods, paths, queries and headers:
//! never a panic, never a 5xx, and only the answers the room can give.
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use libfuzzer_sys::fuzz_target;
use tower::{service_fn, Layer, ServiceExt};
use tower_waiting_room::testing::TestRoom;

#[derive(Arbitrary, Debug)]
struct Input {
    method: u8,
    path: String,
    headers: Vec<(u8, Vec<u8>)>,
    cookie: Vec<u8>,
    with_valid_queue_cookie: bool,
    with_valid_admission: bool,
}

const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"];
const HEADERS: [&str; 5] = ["accept", "cookie", "x-forwarded-for", "user-agent", "content-type"];

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    })
}

fn room() -> &'static TestRoom {
    static ROOM: OnceLock<TestRoom> = OnceLock::new();
    ROOM.get_or_init(|| TestRoom::new("fuzz", 1))
}

fuzz_target!(|input: Input| {
    let room = room();
    let method = Method::from_bytes(METHODS[input.method as usize % METHODS.len()].as_bytes())
        .unwrap();
    // Arbitrary paths: some parse as URIs, most do not; those that do are classified.
    let uri = if input.path.starts_with('/') {
        input.path.clone()
    } else {
        format!("/{}", input.path)
    };
    let Ok(mut req) = Request::builder().method(method).uri(uri.as_str()).body(()) else {
        return;
    };
    for (name, value) in &input.headers {
        let name = HeaderName::from_static(HEADERS[*name as usize % HEADERS.len()]);
        if let Ok(v) = HeaderValue::from_bytes(value) {
            req.headers_mut().append(name, v);
        }
    }
    if let Ok(v) = HeaderValue::from_bytes(&input.cookie) {
        req.headers_mut().append(http::header::COOKIE, v);
    }
    if input.with_valid_queue_cookie {
        req.headers_mut().append(http::header::COOKIE, room.queue_cookie().1);
    }
    if input.with_valid_admission {
        req.headers_mut().append(http::header::COOKIE, room.admission_cookie().1);
    }
    let inner = service_fn(|_req: Request<()>| async {
        Ok::<_, std::convert::Infallible>(Response::new(http_body_empty()))
    });
    let svc = room.layer().layer(inner);
    let res = runtime().block_on(svc.oneshot(req)).unwrap();
    let status = res.status();
    assert!(
        matches!(
            status,
            StatusCode::OK
                | StatusCode::FOUND
                | StatusCode::TEMPORARY_REDIRECT
                | StatusCode::TOO_MANY_REQUESTS
                | StatusCode::METHOD_NOT_ALLOWED
                | StatusCode::SERVICE_UNAVAILABLE
        ),
        "unexpected status {status}"
    );
});

fn http_body_empty() -> EmptyBody {
    EmptyBody
}

/// A body with no data, so the fuzz crate needs no body utility crate.
struct EmptyBody;

impl http_body::Body for EmptyBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Ready(None)
    }
}
