//! Testing support: unit-test the handlers behind the layer without a server or a Redis.
//!
//! [`TestRoom`] builds a room on the embedded store and a [`ManualClock`] in one line, and mints
//! valid queue cookies and admission tokens for test requests. Drive your `Router` with
//! [`tower::ServiceExt::oneshot`](https://docs.rs/tower/latest/tower/trait.ServiceExt.html#method.oneshot):
//!
//! ```
//! use axum::{body::Body, routing::get, Extension, Router};
//! use http::{header, Request, StatusCode};
//! use tower::ServiceExt;
//! use tower_waiting_room::{testing::TestRoom, Admission};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let room = TestRoom::new("shop", 1);
//! let app = Router::new()
//!     .route("/", get(|Extension(a): Extension<Admission>| async move { a.session().to_string() }))
//!     .layer(room.layer());
//!
//! // An admitted visitor reaches the handler, which sees the admission.
//! let (session, cookie) = room.admit().await;
//! let req = Request::get("/").header(header::COOKIE, cookie).body(Body::empty()).unwrap();
//! let res = app.clone().oneshot(req).await.unwrap();
//! assert_eq!(res.status(), StatusCode::OK);
//! # let body = http_body_util::BodyExt::collect(res.into_body()).await.unwrap().to_bytes();
//! # assert_eq!(body, session.to_string());
//!
//! // A first visit gets the stateless redirect.
//! let res = app.oneshot(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
//! assert_eq!(res.status(), StatusCode::FOUND);
//! # }
//! ```
//!
//! For the authors of a store: the submodule `conformance` (feature `testing`) is the store
//! conformance suite, the semantics of the `Store` trait as test cases that any implementation
//! can run, as the crate's own `MemoryStore` and `RedisStore` do. Matching's suite is the
//! `testing` module of the `tower-waiting-room-matching` crate (its feature `testing`).

use http::HeaderValue;

use crate::builder::WaitingRoomBuilder;
use crate::clock::{duration_ms, Clock};
use crate::layer::WaitingRoomLayer;
use crate::session::SessionId;
use crate::store::{Decision, MemoryStore, Store};
use crate::token::{AdmissionToken, QueueCookie, SigningKey};

// One case of a suite: public for matching's suite (`__private`), hidden from the docs.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod case;
#[cfg(feature = "testing")]
pub mod conformance;
mod manual_clock;

pub use manual_clock::ManualClock;

/// The time a [`TestRoom`]'s clock starts at: 2026-01-01T00:00:00Z.
pub const TEST_EPOCH_MS: u64 = 1_767_225_600_000;

/// A room on the embedded store and a manual clock, with helpers to mint cookies.
#[derive(Clone, Debug)]
pub struct TestRoom {
    layer: WaitingRoomLayer,
    clock: ManualClock,
    store: MemoryStore,
}

impl TestRoom {
    /// A room with the given capacity and otherwise default settings (cookies not `Secure`, so
    /// they work over plain http in tests).
    pub fn new(room: &str, capacity: u32) -> Self {
        Self::with(WaitingRoomLayer::builder(room).capacity(capacity))
    }

    /// A room from a builder you configured; the key, clock and store are set here.
    ///
    /// # Panics
    /// If the builder's configuration is invalid.
    pub fn with(builder: WaitingRoomBuilder) -> Self {
        let clock = ManualClock::new(TEST_EPOCH_MS);
        let store = MemoryStore::with_clock(clock.clone());
        let layer = builder
            .signing_key(SigningKey::new("test", [0x5e; 32]).expect("valid test key"))
            .secure_cookies(false)
            .clock(clock.clone())
            .store(store.clone())
            .build()
            .expect("TestRoom configuration is valid");
        Self {
            layer,
            clock,
            store,
        }
    }

    /// The layer, to put on a `Router` or service.
    pub fn layer(&self) -> WaitingRoomLayer {
        self.layer.clone()
    }

    /// The clock shared by the layer and the store; advance it instead of sleeping.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The embedded store behind the room.
    pub fn store(&self) -> &MemoryStore {
        &self.store
    }

    /// A visitor the store lets in: a fresh session takes a slot in the embedded store (as a
    /// first visitor to a room with room to spare would), and its admission token comes back as
    /// a `Cookie` header value. The slot counts against capacity like any other.
    ///
    /// # Panics
    /// If the store does not admit the visitor (the room is full, or others wait).
    pub async fn admit(&self) -> (SessionId, HeaderValue) {
        let session = SessionId::random();
        let policy = self.layer.config().policy();
        match self.store.enter(policy, session).await {
            Ok(Decision::Admitted { expires_at_ms }) => {
                (session, self.admission_cookie_until(session, expires_at_ms))
            }
            other => panic!("TestRoom::admit: the store did not admit a new visitor: {other:?}"),
        }
    }

    /// A fresh session's admission token as a `Cookie` header value, **without a slot** in the
    /// store: the token alone. It is valid on the fast path (no store call) for the room's
    /// `refresh` time on the manual clock; once older, the store finds no slot for it and the
    /// visitor goes back to the line. For a visitor who holds a slot, use
    /// [`admit`](Self::admit).
    pub fn token_without_slot(&self) -> (SessionId, HeaderValue) {
        let session = SessionId::random();
        (session, self.token_without_slot_for(session))
    }

    /// Like [`token_without_slot`](Self::token_without_slot), for `session`.
    pub fn token_without_slot_for(&self, session: SessionId) -> HeaderValue {
        let expires_at_ms = self.clock.now_ms() + self.layer.config().policy().active_ttl_ms;
        self.admission_cookie_until(session, expires_at_ms)
    }

    fn admission_cookie_until(&self, session: SessionId, expires_at_ms: u64) -> HeaderValue {
        let room = self.layer.room();
        let token = AdmissionToken::new(session, self.clock.now_ms(), expires_at_ms);
        cookie_header(
            room.config().cookies().admission_name(),
            &token.sign(room.keys(), room.config().room()),
        )
    }

    /// A fresh session's queue cookie as a `Cookie` header value: the request goes to the
    /// store (stage 3) instead of being redirected (or, with proof of work on, gets a challenge).
    pub fn queue_cookie(&self) -> (SessionId, HeaderValue) {
        self.new_queue_cookie(false)
    }

    /// Like [`queue_cookie`](Self::queue_cookie), marked as having solved its proof-of-work
    /// challenge: with [`proof_of_work`](WaitingRoomBuilder::proof_of_work) on, the request
    /// goes to the store instead of getting a challenge.
    pub fn proven_queue_cookie(&self) -> (SessionId, HeaderValue) {
        self.new_queue_cookie(true)
    }

    fn new_queue_cookie(&self, proven: bool) -> (SessionId, HeaderValue) {
        let room = self.layer.room();
        let mut cookie = QueueCookie::issue(
            self.clock.now_ms(),
            duration_ms(room.config().session_ttl()),
        );
        if proven {
            cookie = cookie.into_proven();
        }
        (
            cookie.session(),
            cookie_header(
                room.config().cookies().queue_name(),
                &cookie.sign(room.keys(), room.config().room()),
            ),
        )
    }
}

fn cookie_header(name: &str, value: &str) -> HeaderValue {
    HeaderValue::try_from(format!("{name}={value}")).expect("cookie values are header-safe")
}
