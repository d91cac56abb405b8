//! The layer's request classification with arbitrary methods, paths, queries and headers, in a
//! room without and one with proof of work (arbitrary proofs, and real solutions, sent to the
//! proof endpoint): never a panic, never a 5xx, and only the answers the room can give.
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use libfuzzer_sys::fuzz_target;
use tower::{service_fn, Layer, ServiceExt};
use tower_waiting_room::__private::Challenge;
use tower_waiting_room::defences::proof_of_work::{solve, ProofOfWork, PROOF_HEADER};
use tower_waiting_room::testing::{TestRoom, TEST_EPOCH_MS};
use tower_waiting_room::{Keyring, SigningKey, WaitingRoomLayer};

#[derive(Arbitrary, Debug)]
struct Input {
    method: u8,
    path: String,
    headers: Vec<(u8, Vec<u8>)>,
    cookie: Vec<u8>,
    with_valid_queue_cookie: bool,
    with_valid_admission: bool,
    proof_of_work: bool,
    to_proof_endpoint: bool,
    proof: Vec<u8>,
    with_real_solution: bool,
}

const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"];
const HEADERS: [&str; 5] = [
    "accept",
    "cookie",
    "x-forwarded-for",
    "user-agent",
    "content-type",
];

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

/// The same room with proof of work on (4 bits: cheap to solve here).
fn pow_room() -> &'static TestRoom {
    static ROOM: OnceLock<TestRoom> = OnceLock::new();
    ROOM.get_or_init(|| {
        TestRoom::with(
            WaitingRoomLayer::builder("fuzz")
                .capacity(1)
                .proof_of_work(ProofOfWork::new(4)),
        )
    })
}

/// `TestRoom`'s documented test key, to mint challenges as the room would.
fn test_keys() -> Keyring {
    Keyring::new(SigningKey::new("test", [0x5e; 32]).unwrap())
}

fuzz_target!(|input: Input| {
    let room = if input.proof_of_work {
        pow_room()
    } else {
        room()
    };
    let method =
        Method::from_bytes(METHODS[input.method as usize % METHODS.len()].as_bytes()).unwrap();
    // Arbitrary paths: some parse as URIs, most do not; those that do are classified.
    let uri = if input.to_proof_endpoint {
        "/__waitingroom/fuzz/proof".to_owned()
    } else if input.path.starts_with('/') {
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
    if let Ok(v) = HeaderValue::from_bytes(&input.proof) {
        req.headers_mut().append(PROOF_HEADER, v);
    }
    if input.with_valid_queue_cookie || input.with_real_solution {
        let (session, cookie) = room.queue_cookie();
        req.headers_mut().append(http::header::COOKIE, cookie);
        if input.with_real_solution {
            let challenge =
                Challenge::issue(session, TEST_EPOCH_MS, 60_000).sign(&test_keys(), "fuzz");
            let proof = format!("{challenge}:{}", solve(&challenge, 4));
            req.headers_mut()
                .insert(PROOF_HEADER, HeaderValue::try_from(proof).unwrap());
        }
    }
    if input.with_valid_admission {
        req.headers_mut()
            .append(http::header::COOKIE, room.token_without_slot().1);
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
                | StatusCode::FORBIDDEN
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
