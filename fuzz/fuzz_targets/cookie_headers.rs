//! Hostile `Cookie` headers: many of them, the room's names repeated with and without values,
//! tampered copies of real values, bytes that are not UTF-8, and headers made huge by
//! repetition. Never a panic, never a 5xx but the room's own 503s, and a genuine queue cookie or
//! admission token sent as a pair of its own is always found, whatever surrounds it.
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use http::{header, HeaderValue, Request, Response, StatusCode};
use libfuzzer_sys::fuzz_target;
use tower::{service_fn, Layer, ServiceExt};
use tower_waiting_room::testing::TestRoom;

/// Most bytes of one header: hyper's default limit for all of a request's headers is about
/// 400 kB; this keeps each run quick while still far past any real browser's header.
const MAX_HEADER: usize = 64 * 1024;

#[derive(Arbitrary, Debug)]
enum Part {
    /// Anything, bytes that are not UTF-8 and control bytes included.
    Bytes(Vec<u8>),
    QueueName,
    AdmissionName,
    Eq,
    Semicolon,
    Space,
    Quote,
    /// A copy of a genuine queue cookie value with one byte changed.
    TamperedQueue(u8, u8),
    /// A copy of a genuine admission token value with one byte changed.
    TamperedToken(u8, u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    headers: Vec<(Vec<Part>, u8)>,
    /// Which header gets the genuine queue cookie, as a pair of its own.
    genuine_queue: Option<u8>,
    /// Which header gets a genuine admission token, as a pair of its own.
    genuine_token: Option<u8>,
    to_status: bool,
}

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

/// `value` with the byte at `at` replaced by a different one (never the same value again).
fn tampered(value: &str, at: u8, by: u8) -> Vec<u8> {
    let mut bytes = value.as_bytes().to_vec();
    let i = at as usize % bytes.len();
    bytes[i] = if bytes[i] == by {
        by.wrapping_add(1)
    } else {
        by
    };
    bytes
}

fuzz_target!(|input: Input| {
    let room = room();
    let (_, queue) = room.queue_cookie();
    let (_, token) = room.token_without_slot();
    let queue = queue.to_str().unwrap();
    let token = token.to_str().unwrap();
    let (queue_name, queue_value) = queue.split_once('=').unwrap();
    let (token_name, token_value) = token.split_once('=').unwrap();

    let mut headers: Vec<Vec<u8>> = Vec::new();
    for (parts, repeat) in &input.headers {
        let mut one = Vec::new();
        for part in parts {
            match part {
                Part::Bytes(b) => one.extend_from_slice(b),
                Part::QueueName => one.extend_from_slice(queue_name.as_bytes()),
                Part::AdmissionName => one.extend_from_slice(token_name.as_bytes()),
                Part::Eq => one.push(b'='),
                Part::Semicolon => one.push(b';'),
                Part::Space => one.push(b' '),
                Part::Quote => one.push(b'"'),
                Part::TamperedQueue(at, by) => one.extend(tampered(queue_value, *at, *by)),
                Part::TamperedToken(at, by) => one.extend(tampered(token_value, *at, *by)),
            }
        }
        // Repeated, up to 256 times and `MAX_HEADER` bytes: the same hostile shape, huge.
        let copies = (1 + *repeat as usize)
            .min(MAX_HEADER / one.len().max(1))
            .max(1);
        headers.push(one.repeat(copies));
    }
    // The genuine values, each as a pair of its own inside the chosen header (or in a header of
    // its own when there is none, or the chosen one cannot be sent).
    let mut loose = Vec::new();
    for (at, pair) in [(input.genuine_queue, queue), (input.genuine_token, token)] {
        let Some(at) = at else { continue };
        let i = at as usize % headers.len().max(1);
        match headers.get_mut(i) {
            Some(header) if HeaderValue::from_bytes(header).is_ok() => {
                let middle = header.len() / 2;
                let spliced = [
                    &header[..middle],
                    b";",
                    pair.as_bytes(),
                    b";",
                    &header[middle..],
                ];
                *header = spliced.concat();
            }
            _ => loose.push(pair.as_bytes().to_vec()),
        }
    }

    let path = if input.to_status {
        "/__waitingroom/fuzz/status"
    } else {
        "/"
    };
    let mut req = Request::get(path).body(()).unwrap();
    for h in headers.iter().chain(&loose) {
        if let Ok(v) = HeaderValue::from_bytes(h) {
            req.headers_mut().append(header::COOKIE, v);
        }
    }
    let inner = service_fn(|_req: Request<()>| async {
        Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    });
    let res = runtime()
        .block_on(room.layer().layer(inner).oneshot(req))
        .unwrap();
    let status = res.status();
    assert!(
        matches!(
            status,
            StatusCode::OK
                | StatusCode::FOUND
                | StatusCode::TOO_MANY_REQUESTS
                | StatusCode::SERVICE_UNAVAILABLE
        ),
        "unexpected status {status}"
    );
    let genuine = input.genuine_queue.is_some() || input.genuine_token.is_some();
    if genuine {
        assert_ne!(status, StatusCode::FOUND, "a genuine value was not found");
    }
    if input.genuine_token.is_some() {
        // A fresh token passes on the fast path; the status endpoint says admitted.
        assert_eq!(status, StatusCode::OK, "a genuine token was not found");
    }
});
