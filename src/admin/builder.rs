//! [`AdminBuilder`]: who may use the admin service, which rooms it controls, where it is mounted.

use std::fmt;
use std::sync::Arc;

use ring::hmac;
use ring::rand::SystemRandom;

use super::service::AdminService;
use super::shared::{Auth, Inner};
use crate::config::{ConfigError, MIN_ADMIN_TOKEN_LEN};
use crate::control::RoomControl;

/// The largest request body the admin service reads by default: 16 KiB, far more than any of
/// its JSON bodies needs.
pub(crate) const DEFAULT_BODY_LIMIT: usize = 16 * 1024;

/// Builds an [`AdminService`]: [`AdminService::builder`].
///
/// ```
/// use tower_waiting_room::admin::AdminService;
/// use tower_waiting_room::testing::TestRoom;
/// use tower_waiting_room::ConfigError;
///
/// let room = TestRoom::new("drop", 10);
/// let short = AdminService::builder()
///     .bearer_token("hunter2")
///     .room(room.layer().control())
///     .build();
/// assert!(matches!(short, Err(ConfigError::AdminTokenTooShort { len: 7 })));
///
/// let admin = AdminService::builder()
///     .bearer_token("0123456789abcdef0123456789abcdef")
///     .room(room.layer().control())
///     .build()
///     .unwrap();
/// assert!(!format!("{admin:?}").contains("0123456789abcdef"));
/// ```
pub struct AdminBuilder {
    auth: Option<Result<Vec<u8>, ()>>,
    rooms: Vec<RoomControl>,
    prefix: Option<String>,
    body_limit: usize,
}

impl fmt::Debug for AdminBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match &self.auth {
            None => "not chosen",
            Some(Ok(_)) => "bearer token",
            Some(Err(())) => "none (the app's own auth in front)",
        };
        f.debug_struct("AdminBuilder")
            .field("auth", &auth)
            .field("rooms", &self.rooms)
            .field("prefix", &self.prefix)
            .field("body_limit", &self.body_limit)
            .finish()
    }
}

// Next to the builder it starts, so that the service needs nothing from here.
impl AdminService {
    /// Starts building the service: choose [`bearer_token`](AdminBuilder::bearer_token) or
    /// [`without_token`](AdminBuilder::without_token), add each room's
    /// [`control`](crate::WaitingRoomLayer::control), then [`build`](AdminBuilder::build).
    ///
    /// ```
    /// use tower_waiting_room::admin::AdminService;
    /// use tower_waiting_room::testing::TestRoom;
    ///
    /// let room = TestRoom::new("drop", 10);
    /// // Behind the app's own operator auth (not shown): no token.
    /// let admin = AdminService::builder()
    ///     .without_token()
    ///     .room(room.layer().control())
    ///     .prefix("/ops/waiting-room")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(admin.rooms().collect::<Vec<_>>(), ["drop"]);
    /// ```
    pub fn builder() -> AdminBuilder {
        AdminBuilder::default()
    }
}

impl Default for AdminBuilder {
    fn default() -> Self {
        Self {
            auth: None,
            rooms: Vec::new(),
            prefix: None,
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

impl AdminBuilder {
    /// Every call but the dashboard's HTML needs `Authorization: Bearer <token>`. At least
    /// 32 bytes of visible ASCII; checked by [`build`](Self::build). The token
    /// is kept only as an HMAC under a random key of this process (compared in constant time),
    /// and never shown by `Debug` or logged.
    pub fn bearer_token(mut self, token: impl AsRef<[u8]>) -> Self {
        self.auth = Some(Ok(token.as_ref().to_vec()));
        self
    }

    /// No token: **you put your own auth in front** of the service (a layer of your app that
    /// lets only operators through). Anyone who reaches the service can change the room.
    pub fn without_token(mut self) -> Self {
        self.auth = Some(Err(()));
        self
    }

    /// A room to control (call once per room). Get it from
    /// [`WaitingRoomLayer::control`](crate::WaitingRoomLayer::control).
    pub fn room(mut self, control: RoomControl) -> Self {
        self.rooms.push(control);
        self
    }

    /// Where the service is mounted, for servers that hand it full paths (a bare hyper server,
    /// axum's `route_service`): a request path starting with `prefix` has it removed; any
    /// other path is taken as already relative (as axum's `nest_service` hands it).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// The largest request body read, in bytes (default 16 KiB); a larger one is
    /// answered `413`.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// The service, or why not: a token too short or not sendable, no auth chosen, no room, a
    /// room given twice, or a prefix that is not a path. The error never holds the token.
    pub fn build(self) -> Result<AdminService, ConfigError> {
        let auth = match self.auth {
            None => return Err(ConfigError::AdminAuthNotChosen),
            Some(Err(())) => Auth::None,
            Some(Ok(token)) => {
                if token.len() < MIN_ADMIN_TOKEN_LEN {
                    return Err(ConfigError::AdminTokenTooShort { len: token.len() });
                }
                if !token.iter().all(|b| b.is_ascii_graphic()) {
                    return Err(ConfigError::AdminTokenNotSendable);
                }
                // Only an HMAC of the token is kept: comparing two tags of equal length in
                // constant time tells an attacker neither the token's bytes nor its length.
                let key = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new())
                    .expect("the system random source works");
                let tag = hmac::sign(&key, &token);
                Auth::Bearer {
                    key,
                    tag: tag.as_ref().to_vec(),
                }
            }
        };
        if self.rooms.is_empty() {
            return Err(ConfigError::AdminWithoutRooms);
        }
        let mut ids: Vec<&str> = self.rooms.iter().map(RoomControl::room).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(ConfigError::DuplicateRoom {
                room: w[0].to_owned(),
            });
        }
        let prefix = match self.prefix {
            None => None,
            Some(p) => {
                let ok = p.starts_with('/')
                    && p.len() > 1
                    && !p.ends_with('/')
                    && !p.contains(['?', '#'])
                    // "/rooms" would make `/rooms/x` ambiguous: the room or the prefix?
                    && p != "/rooms"
                    && !p.starts_with("/rooms/");
                if !ok {
                    return Err(ConfigError::InvalidPathPrefix { prefix: p });
                }
                Some(p)
            }
        };
        Ok(AdminService {
            inner: Arc::new(Inner {
                auth,
                rooms: self.rooms,
                prefix,
                body_limit: self.body_limit,
            }),
        })
    }
}
