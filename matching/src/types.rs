//! The values of matching: who ([`UserId`]), waiting for what ([`Queue`]: a [`Topic`] and a
//! [`GroupSize`]), where they stand ([`MatchState`]) and the groups formed ([`Group`],
//! [`GroupId`]). Every value from outside is checked where it is made, so a store never sees a
//! bad one.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The longest topic, in bytes.
pub const MAX_TOPIC_BYTES: usize = 64;
/// The longest user id, in bytes.
pub const MAX_USER_BYTES: usize = 128;
/// The longest id an application may give a confirmed group, in bytes.
pub const MAX_APP_ID_BYTES: usize = 128;
/// The largest group size a queue may have.
pub const MAX_GROUP_SIZE: u8 = 8;

/// Why a value from outside was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputError {
    /// Empty.
    Empty,
    /// Longer than the limit, in bytes.
    TooLong {
        /// The limit.
        max: usize,
    },
    /// Holds a control character (a newline, a NUL, ...).
    ControlCharacter,
    /// A group size outside `2..=MAX_GROUP_SIZE`.
    BadSize,
    /// Not a group id this crate made.
    BadGroupId,
}

impl InputError {
    /// A short snake_case reason, as the HTTP API answers it.
    pub fn reason(self) -> &'static str {
        match self {
            InputError::Empty => "empty",
            InputError::TooLong { .. } => "too_long",
            InputError::ControlCharacter => "control_character",
            InputError::BadSize => "bad_size",
            InputError::BadGroupId => "bad_group_id",
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Empty => f.write_str("empty"),
            InputError::TooLong { max } => write!(f, "longer than {max} bytes"),
            InputError::ControlCharacter => f.write_str("holds a control character"),
            InputError::BadSize => write!(f, "a group size is 2 to {MAX_GROUP_SIZE}"),
            InputError::BadGroupId => f.write_str("not a group id"),
        }
    }
}

impl std::error::Error for InputError {}

/// Text from outside: not empty, at most `max` bytes, no control characters.
fn checked(text: &str, max: usize) -> Result<(), InputError> {
    if text.is_empty() {
        return Err(InputError::Empty);
    }
    if text.len() > max {
        return Err(InputError::TooLong { max });
    }
    if text.chars().any(char::is_control) {
        return Err(InputError::ControlCharacter);
    }
    Ok(())
}

macro_rules! checked_text {
    ($(#[$doc:meta])* $name:ident, $max:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Checks `text`: not empty, not too long, no control characters.
            pub fn new(text: impl Into<String>) -> Result<Self, InputError> {
                let text = text.into();
                checked(&text, $max)?;
                Ok(Self(text))
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = InputError;
            fn from_str(s: &str) -> Result<Self, InputError> {
                Self::new(s)
            }
        }
    };
}

checked_text!(
    /// What people wait to talk about or play: at most [`MAX_TOPIC_BYTES`] bytes of text without
    /// control characters.
    ///
    /// ```
    /// use tower_waiting_room_matching::Topic;
    /// assert!(Topic::new("rust").is_ok());
    /// assert!(Topic::new("").is_err());
    /// assert!(Topic::new("a\nb").is_err());
    /// ```
    Topic,
    MAX_TOPIC_BYTES
);

checked_text!(
    /// Who waits: the application's own id for a user (from its authentication), or a signed
    /// session's. At most [`MAX_USER_BYTES`] bytes without control characters.
    ///
    /// ```
    /// use tower_waiting_room_matching::UserId;
    /// assert_eq!(UserId::new("alice").unwrap().as_str(), "alice");
    /// assert!(UserId::new("x".repeat(129)).is_err());
    /// ```
    UserId,
    MAX_USER_BYTES
);

checked_text!(
    /// The application's own id for a group it confirmed (its conversation's, its game's).
    ///
    /// ```
    /// use tower_waiting_room_matching::AppGroupId;
    /// assert!(AppGroupId::new("conversation-42").is_ok());
    /// ```
    AppGroupId,
    MAX_APP_ID_BYTES
);

/// How many people a group holds: 2 to [`MAX_GROUP_SIZE`].
///
/// ```
/// use tower_waiting_room_matching::GroupSize;
/// assert_eq!(GroupSize::new(3).unwrap().get(), 3);
/// assert!(GroupSize::new(1).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupSize(u8);

impl GroupSize {
    /// Two.
    pub const PAIR: GroupSize = GroupSize(2);
    /// Three.
    pub const TRIO: GroupSize = GroupSize(3);

    /// Checks `size`: 2 to [`MAX_GROUP_SIZE`].
    pub fn new(size: u64) -> Result<Self, InputError> {
        match u8::try_from(size) {
            Ok(n) if (2..=MAX_GROUP_SIZE).contains(&n) => Ok(Self(n)),
            _ => Err(InputError::BadSize),
        }
    }

    /// The size.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for GroupSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One line of waiters: those waiting for a group of `size` on `topic`. Each is matched only
/// with others of the same queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Queue {
    /// The topic.
    pub topic: Topic,
    /// The group size.
    pub size: GroupSize,
}

impl Queue {
    /// The queue of `topic` and `size`.
    pub fn new(topic: Topic, size: GroupSize) -> Self {
        Self { topic, size }
    }

    /// The queue's name in store keys and group ids: the topic in lowercase hex (so any text is
    /// safe in a Redis key and its hash tag), a dot, the size.
    pub fn key(&self) -> String {
        let mut out = String::with_capacity(self.topic.0.len() * 2 + 4);
        for b in self.topic.0.as_bytes() {
            out.push_str(&format!("{b:02x}"));
        }
        out.push('.');
        out.push_str(&self.size.0.to_string());
        out
    }

    /// The queue named by [`key`](Self::key).
    pub fn from_key(key: &str) -> Result<Self, InputError> {
        let (hex, size) = key.split_once('.').ok_or(InputError::BadGroupId)?;
        if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(InputError::BadGroupId);
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| InputError::BadGroupId))
            .collect::<Result<Vec<u8>, _>>()?;
        let topic = String::from_utf8(bytes).map_err(|_| InputError::BadGroupId)?;
        let size = size.parse::<u64>().map_err(|_| InputError::BadGroupId)?;
        Ok(Self::new(
            Topic::new(topic).map_err(|_| InputError::BadGroupId)?,
            GroupSize::new(size).map_err(|_| InputError::BadGroupId)?,
        ))
    }
}

/// A group's id, made by the store: its queue and the queue's group sequence number. Its text
/// form (`Display`, `FromStr`) is `<queue key>.<number>`, as the HTTP API shows it.
///
/// ```
/// use tower_waiting_room_matching::{GroupId, GroupSize, Queue, Topic};
/// let queue = Queue::new(Topic::new("go").unwrap(), GroupSize::PAIR);
/// let id = GroupId::new(queue, 7);
/// assert_eq!(id.to_string(), "676f.2.7");
/// assert_eq!("676f.2.7".parse::<GroupId>().unwrap(), id);
/// assert!("not an id".parse::<GroupId>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId {
    /// The queue it was formed in.
    pub queue: Queue,
    /// The queue's group number (from 1).
    pub number: u64,
}

impl GroupId {
    /// The group `number` of `queue`.
    pub fn new(queue: Queue, number: u64) -> Self {
        Self { queue, number }
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.queue.key(), self.number)
    }
}

impl FromStr for GroupId {
    type Err = InputError;
    fn from_str(s: &str) -> Result<Self, InputError> {
        let (queue, number) = s.rsplit_once('.').ok_or(InputError::BadGroupId)?;
        let number = number.parse::<u64>().map_err(|_| InputError::BadGroupId)?;
        if number == 0 {
            return Err(InputError::BadGroupId);
        }
        Ok(Self::new(Queue::from_key(queue)?, number))
    }
}

/// A user waiting in a queue.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waiting {
    /// The queue.
    pub queue: Queue,
    /// 1 for the oldest waiter.
    pub position: u64,
    /// How many wait in the queue, this user included.
    pub waiting: u64,
    /// How long this user has waited since joining (store clock).
    pub waited: Duration,
    /// When the wait times out unless a group forms, from now.
    pub expires_in: Duration,
}

/// A group formed from a queue.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Group {
    /// The store's id.
    pub id: GroupId,
    /// The members, oldest first. As many as the queue's size, or fewer (at least 2) when the
    /// oldest had waited `fallback_after`.
    pub members: Vec<UserId>,
    /// The application's id once it confirmed the group; `None` while pending.
    pub confirmed: Option<AppGroupId>,
    /// Pending: how long until an unconfirmed group is undone (its members back to the front of
    /// their queue). Confirmed: how long its record is kept for status answers.
    pub expires_in: Duration,
}

/// Where a user stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchState {
    /// Neither waiting nor in a group.
    Idle,
    /// Waiting for a group.
    Waiting(Waiting),
    /// In a group, pending confirmation or confirmed.
    Matched(Group),
}

impl MatchState {
    /// `"idle"`, `"waiting"` or `"matched"`, as the HTTP API names them.
    pub fn name(&self) -> &'static str {
        match self {
            MatchState::Idle => "idle",
            MatchState::Waiting(_) => "waiting",
            MatchState::Matched(_) => "matched",
        }
    }
}

/// The answer to a join.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinOutcome {
    /// Joined: now waiting, or already in a group if one formed at once.
    Joined(MatchState),
    /// Already waiting or in a group (in this queue or another): nothing changed. Holds where
    /// the user stands.
    Conflict(MatchState),
}

/// The answer to a confirmation.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfirmOutcome {
    /// The group is confirmed with the application's id (now, or before with the same id: a
    /// retried confirmation is harmless).
    Confirmed(Group),
    /// The group was confirmed before with another id: nothing changed.
    Conflict(Group),
    /// No such group: never formed, undone (unconfirmed for `confirm_ttl`, or a member left),
    /// or its record expired. The application must not start it.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_checked() {
        assert_eq!(Topic::new(""), Err(InputError::Empty));
        assert_eq!(
            Topic::new("x".repeat(MAX_TOPIC_BYTES + 1)),
            Err(InputError::TooLong {
                max: MAX_TOPIC_BYTES
            })
        );
        assert!(Topic::new("x".repeat(MAX_TOPIC_BYTES)).is_ok());
        assert_eq!(UserId::new("a\u{0}b"), Err(InputError::ControlCharacter));
        assert_eq!(UserId::new("a\u{7f}b"), Err(InputError::ControlCharacter));
        assert!(UserId::new("émilie {42}").is_ok());
        for bad in [0, 1, 9, 256, u64::MAX] {
            assert_eq!(GroupSize::new(bad), Err(InputError::BadSize), "{bad}");
        }
    }

    #[test]
    fn group_ids_round_trip_through_text_and_refuse_others() {
        let queue = Queue::new(Topic::new("c'est {la} vie.").unwrap(), GroupSize::TRIO);
        let id = GroupId::new(queue.clone(), 12);
        assert_eq!(id.to_string().parse::<GroupId>(), Ok(id));
        assert_eq!(Queue::from_key(&queue.key()), Ok(queue));
        for bad in [
            "", ".", "6.2.1", "zz.2.1", "61.1.1", "61.2.0", "61.2.x", "61.2", "0a.2.1", "ff.2.1",
        ] {
            assert!(bad.parse::<GroupId>().is_err(), "{bad}");
        }
    }
}
